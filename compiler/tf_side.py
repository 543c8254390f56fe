"""Everything the build and the benchmark do with TensorFlow, in one place.

Tracing (`compiler/trace.py`) and benchmarking (`compiler/bench.py`) both load the user's
tf.function, generate inputs, freeze and convert to TFLite, and run TensorFlow for reference
outputs; doing it here once keeps what is benchmarked the same as what was built: the same seeded
weights, the same inputs, the same TFLite conversion. Only child processes import this module's
TensorFlow: it is imported inside the functions, so importing the module costs nothing.
"""

from __future__ import annotations

import importlib
import random
import re
import sys
from typing import Any

import numpy as np

from tfcheck.compiler.child import StepError

# Seeds Python, NumPy, TensorFlow and Keras before the user's module is imported, and the inputs.
SEED = 0


def import_tensorflow() -> Any:
    """TensorFlow, with every random generator seeded, so that randomly initialised weights (and
    so the frozen graph and the cache key) are the same in every process."""
    random.seed(SEED)
    np.random.seed(SEED)
    import keras
    import tensorflow as tf

    tf.random.set_seed(SEED)
    keras.utils.set_random_seed(SEED)
    return tf


def load_function(root: str, module_name: str, qualname: str) -> tuple[Any, dict[str, Any]]:
    """The tf.function named `qualname` in `module_name` (imported with `root` first on
    sys.path), unwrapped from `@tfcheck.aot`, and its aot options; StepError saying what is wrong.

    Call `import_tensorflow` first, so that the module's weights are the build's.
    """
    if "." in qualname:
        raise StepError("a method or nested function: only module-level functions can be built; "
                        "wrap the call in a module-level @tfcheck.aot function")
    sys.path.insert(0, root)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - the user's module can raise anything
        raise StepError(f"importing {module_name} failed: {type(error).__name__}: {error}") from error
    if not hasattr(module, qualname):
        raise StepError(f"{module_name} has no attribute {qualname!r} after import")
    wrapper = getattr(module, qualname)
    tf_function = getattr(wrapper, "tf_function", wrapper)
    if not hasattr(tf_function, "get_concrete_function"):
        raise StepError("not a tf.function: put @tf.function under @tfcheck.aot")
    return tf_function, getattr(wrapper, "aot_options", {}) or {}


def generate_inputs(specs: list[dict[str, Any]]) -> list[np.ndarray]:
    """Deterministic inputs for {"name", "shape", "dtype"} specs: normal floats, small positive
    ints, random booleans. Without TensorFlow: the benchmark's TVM children never load it."""
    rng = np.random.default_rng(SEED)
    arrays = []
    for spec in specs:
        dtype = _numpy_dtype(spec["dtype"])
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(spec["shape"]).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.random(spec["shape"]) < 0.5)
        elif dtype.kind in "iu":
            arrays.append(rng.integers(1, 8, size=spec["shape"]).astype(dtype))
        else:
            raise StepError(f"input {spec['name']!r} has dtype {spec['dtype']}, which the build "
                            "cannot generate test inputs for")
    return arrays


def _numpy_dtype(name: str) -> np.dtype:
    """NumPy's dtype for TensorFlow's dtype name (`bfloat16` is ml_dtypes', as in TensorFlow)."""
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def freeze(concrete: Any) -> Any:
    """The concrete function with its variables as constants (TVM cannot import variable ops)."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    return convert_variables_to_constants_v2(concrete)


def to_tflite(frozen: Any) -> bytes:
    """Convert with builtin ops only (TVM cannot import Flex ops); a TF op without a builtin is
    named in the error."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_concrete_functions([frozen])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    try:
        return converter.convert()
    except Exception as error:  # noqa: BLE001 - ConverterError and friends, with MLIR text
        ops = sorted(set(re.findall(r"'tf\.(\w+)' op", str(error))))
        if ops:
            raise StepError(
                f"uses TensorFlow op{'s' if len(ops) > 1 else ''} {', '.join(ops)}, which "
                "TFLite builtins (and so TVM's importer) cannot express; compute it outside the "
                "compiled function or replace it with supported ops", op=", ".join(ops)) from error
        raise StepError(f"TFLite conversion failed: {_first_lines(str(error))}") from error


def _first_lines(text: str, count: int = 6) -> str:
    return "\n".join([line for line in text.splitlines() if line.strip()][:count])


def flat_outputs(outputs: Any) -> list[np.ndarray]:
    """A tensor, a flat sequence or a flat dict of outputs (what an artifact can return) as NumPy
    arrays in TensorFlow's flattening order (a dict's values by sorted key), the order of an
    artifact's outputs."""
    if isinstance(outputs, dict):
        values = [outputs[key] for key in sorted(outputs)]
    elif isinstance(outputs, (tuple, list)):
        values = list(outputs)
    else:
        values = [outputs]
    return [np.asarray(value) for value in values]


def reference_outputs(concrete: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """TensorFlow's outputs for `inputs`, flattened in the concrete function's output order."""
    import tensorflow as tf

    return flat_outputs(concrete(*[tf.constant(a) for a in inputs]))
