"""Child process: import the user's module, trace one annotated function, freeze, convert to TFLite.

Run as `python -m tfcheck.compiler.trace request.json` (see `compiler/child.py`). For every shape
entry of the function it writes, into `work_dir/variant-<i>/`:

- `model.tflite`: the frozen graph converted with TFLite builtin ops only (TVM cannot import Flex);
- `io.npz`: generated inputs (`input_<j>`) and TensorFlow's outputs for them (`output_<k>`), which
  the compile step uses to verify the artifact;

and reports, per variant, the input/output specs, the output structure, the frozen graph's SHA-256
(the cache key's main part), the fingerprints and the TFLite operators.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import random
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.compiler.artifact import cache_key, entry_problem
from tfcheck.compiler.child import EventWriter, StepError, child_main

_FLOAT_KINDS = "f"


def trace_function(request: dict[str, Any], events: EventWriter) -> dict[str, Any]:
    """Import, trace every shape entry, and report what the parent needs for the cache key."""
    source = request.get("path") or request["module"]
    events.stage("import", doing="importing TensorFlow", before=f"importing {source}")
    _seed_everything(int(request["seed"]))
    import tensorflow as tf

    from tfcheck.fingerprint import source_fingerprint

    events.stage("import", doing=f"importing {source}", before=f"tracing {_label(request)}")
    wrapper = _load_object(request["root"], request["module"], request["qualname"])
    tf_function = getattr(wrapper, "tf_function", wrapper)
    options = getattr(wrapper, "aot_options", {}) or {}
    if not hasattr(tf_function, "get_concrete_function"):
        raise StepError("not a tf.function: put @tf.function under @tfcheck.aot")
    entries = options.get("shapes") or request.get("config_shapes") or None
    signature = _flat_signature(tf_function, entries)
    shapes = _shape_entries(signature, entries, _label(request))
    work_dir = Path(request["work_dir"])
    variants = [
        _trace_variant(tf, tf_function, signature, entry, work_dir / f"variant-{index}", events, request)
        for index, entry in enumerate(shapes)
    ]
    return {
        "name": options.get("name") or request["qualname"],
        # what tfcheck.aot dispatch matches artifacts by: the Python function's own name, which
        # differs from the module attribute for `h = tfcheck.aot(tf.function(k))`
        "qualname": f"{tf_function.python_function.__module__}.{tf_function.python_function.__qualname__}",
        "tensorflow": tf.__version__,
        "source_fingerprint": source_fingerprint(tf_function),
        "variants": variants,
    }


def _label(request: dict[str, Any]) -> str:
    return f"{request['module']}.{request['qualname']}"


def _seed_everything(seed: int) -> None:
    """Fix every RNG before the user's module runs, so that randomly initialised weights (and so
    the frozen graph and the cache key) are the same in every build."""
    random.seed(seed)
    np.random.seed(seed)
    import keras
    import tensorflow as tf

    tf.random.set_seed(seed)
    keras.utils.set_random_seed(seed)


def _load_object(root: str, module_name: str, qualname: str) -> Any:
    """Import `module_name` with `root` first on sys.path and fetch `qualname` from it."""
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
    return getattr(module, qualname)


def _flat_signature(tf_function: Any, entries: list[Any] | None) -> list[Any]:
    """The input_signature as a flat list of TensorSpecs, or a message saying how to add one."""
    import tensorflow as tf

    signature = tf_function.input_signature
    if signature is None:
        raise StepError(signature_hint(_tensor_parameters(tf_function.python_function), entries))
    flat = tf.nest.flatten(signature)
    if len(flat) != len(signature) or not all(isinstance(s, tf.TensorSpec) for s in flat):
        raise StepError("only a flat list of tf.TensorSpec is supported as input_signature")
    return flat


def _tensor_parameters(python_function: Any) -> list[str]:
    """The parameters that take tensors: the positional ones without a default (`training=False`
    and the like are Python options, not inputs)."""
    positional = [p for p in inspect.signature(python_function).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [p.name for p in positional if p.default is p.empty] or [p.name for p in positional]


def signature_hint(parameters: list[str], entries: list[Any] | None) -> str:
    """How to declare the missing input_signature, with the function's own parameter names and,
    when the shape entries (`shapes=` or the config) give one shape per parameter, the shapes they
    imply: a dimension that differs between entries becomes None."""
    known = bool(entries) and all(len(entry) == len(parameters) for entry in entries)
    shapes = [_common_shape([entry[i] for entry in entries]) if known else "[...]"
              for i in range(len(parameters))]
    specs = ", ".join(f"tf.TensorSpec({shape}, tf.float32, name={name!r})" for shape, name in zip(shapes, parameters))
    todo = "shapes from the shape entries; check the dtypes" if known else \
        "fill in each shape, with None for a dimension that varies, and each dtype"
    return (f"no input_signature: the build needs the shape and dtype of each input; declare them with "
            f"@tf.function(input_signature=[{specs}]) ({todo})")


def _common_shape(shapes: list[Any]) -> str:
    """`[None, 8]` for (1, 8) and (4, 8); `[...]` when the ranks differ."""
    if len({len(shape) for shape in shapes}) != 1:
        return "[...]"
    return "[" + ", ".join(str(dims[0]) if len(set(dims)) == 1 else "None" for dims in zip(*shapes)) + "]"


def _shape_entries(signature: list[Any], entries: list[Any] | None, label: str) -> list[list[list[int]]]:
    """One list of concrete input shapes per artifact.

    Without entries the signature's own shapes are used and must be fully known; with entries each
    must give one shape per input, compatible with the signature.
    """
    if not entries:
        unknown = [f"{_input_label(spec, i)} {_shape_text(spec.shape)}"
                   for i, spec in enumerate(signature) if not spec.shape.is_fully_defined()]
        if unknown:
            raise StepError(
                f"input {', '.join(unknown)} has unknown dimensions; list the concrete shapes to compile "
                f"for, one artifact each: {entries_example([spec.shape.as_list() for spec in signature], label)}")
        return [[spec.shape.as_list() for spec in signature]]
    return [_check_entry(signature, entry) for entry in entries]


def entries_example(shapes: list[list[int | None]], label: str) -> str:
    """Both spellings of shape entries for these signature shapes, unknown dimensions as 1 and 8:
    the decorator's (a bare shape for a one-input function) and the config's (always nested)."""
    entries = [[[size if dim is None else dim for dim in shape] for shape in shapes] for size in (1, 8)]
    decorated = ", ".join(repr(tuple(entry[0])) if len(entry) == 1 else repr(tuple(map(tuple, entry)))
                          for entry in entries)
    return (f"@tfcheck.aot(shapes=[{decorated}]) or, in pyproject.toml, [tool.tfcheck.build] "
            f'shapes = {{ "{label}" = {entries} }}')


def _check_entry(signature: list[Any], entry: Any) -> list[list[int]]:
    """Validate one shape entry against the signature (count, rank, known dimensions)."""
    shapes = [list(shape) for shape in entry]
    if len(shapes) != len(signature):
        raise StepError(f"shape entry {entry!r} has {len(shapes)} shapes for "
                        f"{len(signature)} inputs")
    for index, (spec, shape) in enumerate(zip(signature, shapes)):
        if any(dim is None for dim in shape) or not spec.shape.is_compatible_with(shape):
            raise StepError(f"shape {tuple(shape)} for {_input_label(spec, index)} must be "
                            f"concrete and compatible with the signature's {_shape_text(spec.shape)}")
    return shapes


def _input_label(spec: Any, index: int) -> str:
    return repr(spec.name) if spec.name else f"#{index}"


def _shape_text(shape: Any) -> str:
    return "(" + ", ".join("None" if dim is None else str(dim) for dim in shape.as_list()) + ")"


def _trace_variant(tf: Any, tf_function: Any, signature: list[Any], shapes: list[list[int]],
                   variant_dir: Path, events: EventWriter, request: dict[str, Any]) -> dict[str, Any]:
    """Concrete function -> frozen graph -> TFLite flatbuffer, plus reference inputs/outputs."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from tfcheck.fingerprint import captures_fingerprint

    events.stage("trace", doing=f"tracing {_label(request)} for input shapes {shapes}")
    names = _input_names(tf_function, signature)
    specs = [tf.TensorSpec(shape, spec.dtype, name=name) for spec, shape, name in zip(signature, shapes, names)]
    concrete = _specialize(tf, tf_function, signature, specs).get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete)
    graph_bytes = canonical_graph_bytes(frozen.graph.as_graph_def(), [t.name.split(":")[0] for t in frozen.inputs])
    described = {
        "dir": str(variant_dir),
        "inputs": [{"name": n, "shape": s, "dtype": spec.dtype.name} for n, s, spec in zip(names, shapes, signature)],
        "graph_sha256": hashlib.sha256(graph_bytes).hexdigest(),
        "captures_fingerprint": captures_fingerprint(concrete),
    }
    described["key"] = _cached_key(request, described, tf.__version__)
    if described["key"] is not None:
        return described
    events.stage("convert", doing=f"converting {_label(request)} to TFLite for input shapes {shapes}")
    flatbuffer = _to_tflite(tf, frozen)
    variant_dir.mkdir(parents=True, exist_ok=True)
    (variant_dir / "model.tflite").write_bytes(flatbuffer)
    inputs = _generate_inputs(specs, int(request["seed"]))
    outputs = _reference_outputs(tf, concrete, inputs)
    np.savez(variant_dir / "io.npz", **{f"input_{i}": a for i, a in enumerate(inputs)},
             **{f"output_{i}": a for i, a in enumerate(outputs)})
    return {
        **described,
        "outputs": [{"name": f"output_{i}", "shape": list(a.shape), "dtype": str(a.dtype)} for i, a in enumerate(outputs)],
        "output_structure": _output_structure(tf, concrete.structured_outputs),
        "operators": tflite_operators(flatbuffer),
    }


def _cached_key(request: dict[str, Any], variant: dict[str, Any], tensorflow: str) -> str | None:
    """The cache key when the cache already holds a valid artifact for it, else None.

    Checked here, right after freezing, because converting, running TensorFlow for reference
    outputs and compiling are all unnecessary for a function that has not changed.
    """
    lookup = request.get("cache")
    if not lookup:
        return None
    key = cache_key(variant["graph_sha256"], variant["inputs"], lookup["target"], lookup["compile_options"],
                    {**lookup["versions"], "tensorflow": tensorflow})
    return key if entry_problem(Path(lookup["dir"]) / key) is None else None


def canonical_graph_bytes(graph_def: Any, inputs: list[str]) -> bytes:
    """The GraphDef serialized in a form that is the same in every process for the same function.

    Freezing control flow (an LSTM, a `tf.range` loop) emits the nodes in an order that changes
    from process to process, and leaves unreferenced placeholders (`unused_control_flow_input_N`)
    whose numbering changes too. Neither carries meaning, but both would change the cache key of
    an unchanged function on every build, so nodes (and library functions and their nodes) are
    sorted by name, placeholders that are neither an input nor used by any node are dropped, and so
    are internal attributes.
    """
    canonical = type(graph_def)()
    canonical.CopyFrom(graph_def)
    used = {name.lstrip("^").split(":")[0] for node in canonical.node for name in node.input}
    nodes = sorted((node for node in canonical.node
                    if node.op != "Placeholder" or node.name in inputs or node.name in used),
                   key=lambda node: node.name)
    for node in nodes:
        _drop_internal_attributes(node)
    del canonical.node[:]
    canonical.node.extend(nodes)
    functions = sorted(canonical.library.function, key=lambda function: function.signature.name)
    del canonical.library.function[:]
    for function in functions:
        body = sorted(function.node_def, key=lambda node: node.name)
        for node in body:
            _drop_internal_attributes(node)
        del function.node_def[:]
        function.node_def.extend(body)
        canonical.library.function.append(function)
    return canonical.SerializeToString(deterministic=True)


def _drop_internal_attributes(node: Any) -> None:
    """Remove `_`-prefixed attributes (`_has_manual_control_dependencies`, `_class`, ...): TensorFlow
    bookkeeping that does not change what the node computes and is not stable between processes."""
    for name in [name for name in node.attr if name.startswith("_")]:
        del node.attr[name]


def _specialize(tf: Any, tf_function: Any, signature: list[Any], specs: list[Any]) -> Any:
    """The tf.function to trace for these concrete shapes.

    A tf.function with an input_signature always traces that signature, so unknown dimensions
    would stay unknown (and TVM would import them as 1); for a shape entry that fills them in, the
    same Python function is wrapped again with the concrete signature.
    """
    if all(spec.shape == concrete.shape for spec, concrete in zip(signature, specs)):
        return tf_function
    return tf.function(tf_function.python_function, input_signature=specs)


def _input_names(tf_function: Any, signature: list[Any]) -> list[str]:
    """A spec's own name, else the Python parameter's name, else `input_<i>`."""
    parameters = list(inspect.signature(tf_function.python_function).parameters)
    return [spec.name or (parameters[i] if i < len(parameters) else f"input_{i}")
            for i, spec in enumerate(signature)]


def _to_tflite(tf: Any, frozen: Any) -> bytes:
    """Convert with builtin ops only; a TF op without a builtin is named in the error."""
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


def _generate_inputs(specs: list[Any], seed: int) -> list[np.ndarray]:
    """Deterministic inputs of the right shapes and dtypes: normal floats, small positive ints."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        dtype = np.dtype(spec.dtype.as_numpy_dtype)
        shape = spec.shape.as_list()
        if dtype.kind == _FLOAT_KINDS:
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.random(shape) < 0.5)
        elif dtype.kind in "iu":
            arrays.append(rng.integers(1, 8, size=shape).astype(dtype))
        else:
            raise StepError(f"input {spec.name!r} has dtype {spec.dtype.name}, which the build "
                            "cannot generate test inputs for")
    return arrays


def _reference_outputs(tf: Any, concrete: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """TensorFlow's outputs, flattened in the concrete function's output order."""
    result = concrete(*[tf.constant(a) for a in inputs])
    return [np.asarray(t) for t in tf.nest.flatten(result)]


def _output_structure(tf: Any, structured: Any) -> dict[str, Any]:
    """`tensor`, `tuple` (with length) or `dict` (keys in flattening order, i.e. sorted)."""
    if isinstance(structured, tf.Tensor):
        return {"kind": "tensor"}
    if isinstance(structured, (tuple, list)) and all(isinstance(t, tf.Tensor) for t in structured):
        return {"kind": "tuple", "length": len(structured)}
    if isinstance(structured, dict) and all(isinstance(t, tf.Tensor) for t in structured.values()):
        return {"kind": "dict", "keys": sorted(structured)}
    raise StepError(f"returns {type(structured).__name__}: an artifact can return a tensor, "
                    "a flat tuple of tensors or a flat dict of tensors")


def tflite_operators(flatbuffer: bytes) -> list[dict[str, Any]]:
    """Every TFLite operator of every subgraph, counted, with one output tensor name as an example
    (the name carries the TensorFlow node it came from, e.g. `model/conv1/Conv2D`)."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    names = {code: name for name, code in vars(BuiltinOperator).items() if name.isupper()}
    model = tflite.Model.GetRootAsModel(flatbuffer, 0)
    counts: dict[str, dict[str, Any]] = {}
    for s in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(s)
        for o in range(subgraph.OperatorsLength()):
            operator = subgraph.Operators(o)
            name = _op_name(model.OperatorCodes(operator.OpcodeIndex()), names)
            outputs = operator.OutputsAsNumpy() if operator.OutputsLength() else []
            tensor = subgraph.Tensors(int(outputs[0])).Name().decode() if len(outputs) else ""
            entry = counts.setdefault(name, {"op": name, "count": 0, "example": tensor})
            entry["count"] += 1
    return sorted(counts.values(), key=lambda e: (-e["count"], e["op"]))


def _op_name(code: Any, names: dict[int, str]) -> str:
    """The builtin's name; custom ops as `CUSTOM:<name>`."""
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    name = names.get(builtin, f"BUILTIN_{builtin}")
    if name == "CUSTOM":
        return f"CUSTOM:{code.CustomCode().decode()}"
    return name


if __name__ == "__main__":
    child_main(trace_function)
