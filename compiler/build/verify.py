"""Checking a compiled library against TensorFlow's outputs for the same generated inputs.

The exported library file itself is loaded and run (not the in-memory executable), by the
runtime's own loader (`tfcheck.runtime.tvm_backend`, with the runtime libraries the manifest will
record), in a process without TVM's Python package (`run_saved.py`), so what is verified is exactly
what the cache stores, loaded as production loads it. An element passes when
`|tvm - tf| <= atol * scale + rtol * |tf| + allowance`, with a tolerance for its dtype and `scale` the output's
largest magnitude (at least 1): summation order differs between TVM and TensorFlow, and the
rounding error that leaves grows with the size of the values summed, not with each element's own
size. Integers and booleans must match exactly. The reported relative error is relative to the
output's scale, `max|tvm - tf| / max|tf|` (`process/error_metric.py`, the figure `tfcheck bench`
reports too): taken element by element it blew up on outputs near zero (issue 42).

`allowance` is what float32 itself cannot do better than on this model: `SPREAD_FACTOR` times the
largest difference between TFLite's outputs (the same graph, run by TFLite's interpreter, saved by
the tracing step: with XNNPACK, or its builtin kernels when the weights are inputs) and TensorFlow's. Most models leave it far below the tolerance; a model that
amplifies rounding errors does not: the deep post-activation ResNets (ResNet101 and ResNet152 with
random weights) turn a relative change of 1e-5 in their input into 3.6e-2 in their logits, and
TensorFlow, TFLite (XNNPACK and reference kernels) and TVM each end up 1.4e-3 to 1.7e-3 away from
a float64 evaluation of ResNet152, with TVM the closest (docs/build.md). A TFLite difference above
`SPREAD_CAP` of the output's scale is not rounding (a conversion that changed the computation) and
allows nothing. In the reported figure's terms the rule is the same: an error relative to the
output's scale up to twice TFLite's, on top of the tolerance.
"""

from __future__ import annotations

from pathlib import Path

import json

import numpy as np

from tfcheck.compiler.process.child import StepError
from tfcheck.compiler.process.error_metric import scaled_error
from tfcheck.compiler.process.io_file import OUTPUT, SIZES, TFLITE_OUTPUT
from tfcheck.compiler.process.messages import Comparison

# dtype name -> (atol, rtol). float32 is loose enough for reassociated sums over ~10^5 terms
# (ResNet50's widest reductions) and tight enough to catch a wrong layout or a dropped bias. float64
# allows its own rounding amplified 10^5 times, and catches one float32 rounding anywhere (6e-8 of
# the value): a float64 function is built as a float32 twin read back as float64
# (compiler/trace/float64_twin.py), and nothing of it may be computed in float32.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-2),
    "bfloat16": (5e-2, 5e-2),
    "float32": (1e-4, 1e-3),
    "float64": (1e-10, 1e-9),
}


# How many times TFLite's largest difference from TensorFlow the artifact may differ on top of the
# tolerance: TVM's rounding is independent of TFLite's, and as large.
SPREAD_FACTOR = 2.0
# The largest TFLite difference, as a share of the output's scale, that counts as rounding.
SPREAD_CAP = 1e-2


def rounding_allowance(want: np.ndarray, second: np.ndarray | None, scale: float) -> float:
    """`SPREAD_FACTOR` x TFLite's largest difference from TensorFlow on a float output; 0 without
    TFLite's outputs, for other dtypes, or when the difference is too large to be rounding."""
    if second is None or want.dtype.kind != "f" or second.shape != want.shape or second.dtype != want.dtype:
        return 0.0
    spread = float(np.abs(second.astype(np.float64) - want.astype(np.float64)).max(initial=0.0))
    return SPREAD_FACTOR * spread if np.isfinite(spread) and spread <= SPREAD_CAP * scale else 0.0


def compare(actual: list[np.ndarray], expected: list[np.ndarray],
            tflite: list[np.ndarray] | None = None) -> Comparison:
    """Max absolute error and error relative to each output's scale (`scaled_error`) over all
    outputs, and whether all are within tolerance (widened by `rounding_allowance` where TFLite's
    outputs for the same inputs are given)."""
    if len(actual) != len(expected):
        return Comparison(False, message=f"the artifact returned {len(actual)} outputs, TensorFlow {len(expected)}")
    seconds = tflite if tflite is not None and len(tflite) == len(expected) else [None] * len(expected)
    max_abs = max_rel = 0.0
    failures = []
    for index, (got, want, second) in enumerate(zip(actual, expected, seconds)):
        if got.shape != want.shape or got.dtype != want.dtype:
            failures.append(f"output {index}: {got.dtype}{list(got.shape)} instead of {want.dtype}{list(want.shape)}")
            continue
        difference = np.abs(got.astype(np.float64) - want.astype(np.float64))
        if difference.size:
            max_abs = max(max_abs, float(difference.max()))
            max_rel = max(max_rel, scaled_error(got, want))
        failure = _beyond_tolerance(got, want, second, difference)
        if failure:
            failures.append(f"output {index}: {failure}")
    return Comparison(not failures, max_abs, max_rel, "; ".join(failures))


def _beyond_tolerance(got: np.ndarray, want: np.ndarray, second: np.ndarray | None, difference: np.ndarray) -> str:
    """How many elements of one output are beyond `atol * scale + rtol * |tf| + allowance`, with
    the output's error and TFLite's, both relative to the output's scale; `` when none is."""
    atol, rtol = TOLERANCES.get(str(want.dtype), (0.0, 0.0))
    reference = np.abs(want.astype(np.float64))
    scale = max(1.0, float(reference.max())) if reference.size else 1.0
    allowance = rounding_allowance(want, second, scale)
    bad = int(np.count_nonzero(difference > atol * scale + rtol * reference + allowance))
    if not bad:
        return ""
    widened = (f" + {allowance:.1e} ({SPREAD_FACTOR:g} x TFLite's own difference, "
               f"{scaled_error(second, want):.1e} of the output's scale)") if allowance and second is not None else ""
    return (f"{bad} of {difference.size} elements beyond atol={atol:g}, rtol={rtol:g}{widened} "
            f"(error {scaled_error(got, want):.1e} of the output's scale)")


def expected_outputs(io_path: Path) -> list[np.ndarray]:
    """TensorFlow's outputs saved by the tracing step, in order."""
    return _saved(io_path, OUTPUT)


def tflite_outputs(io_path: Path) -> list[np.ndarray] | None:
    """TFLite's outputs saved by the tracing step, in order; None when it saved none."""
    return _saved(io_path, TFLITE_OUTPUT) or None


def _saved(io_path: Path, prefix: str) -> list[np.ndarray]:
    data = np.load(io_path)
    count = sum(1 for key in data.files if key.startswith(prefix))
    return [data[f"{prefix}{i}"] for i in range(count)]


def compare_all(library: Path, io_paths: list[Path], device: str, weights: int = 0) -> Comparison:
    """`compare` at each saved set of inputs, run as production runs the library (`run_saved.run_apart`):
    the largest errors over all, passed when all pass; a symbolic build's message says at which sizes
    it failed (`at batch=33: output 0: ...`)."""
    from tfcheck.compiler.build.run_saved import run_apart

    results = []
    for io_path, actual in zip(io_paths, run_apart(library, io_paths, device, weights)):
        where = _sizes(io_path)
        if isinstance(actual, str):
            raise StepError(f"running the compiled library{where} failed: {actual}{_compiler_only_hint(actual)}")
        results.append((where, compare(actual, expected_outputs(io_path), tflite_outputs(io_path))))
    abs_errors = [r.max_abs_error for _, r in results if r.max_abs_error is not None]
    rel_errors = [r.max_rel_error for _, r in results if r.max_rel_error is not None]
    return Comparison(all(r.passed for _, r in results), max(abs_errors) if abs_errors else None,
                      max(rel_errors) if rel_errors else None,
                      "; ".join(f"{where.strip()}: {r.message}" if where else r.message
                                for where, r in results if not r.passed))


def _compiler_only_hint(error: str) -> str:
    """For a library that calls a function only TVM's compiler (or its Python package) registers:
    what that means for the user. The importer's converter for some operator emitted the call."""
    if "Cannot find ffi::Function" not in error:
        return ""
    return (". The library calls a function that TVM registers in its compiler, not in the runtime that "
            "loads artifacts in production: an operator of this function is converted to it (a gap in the "
            "importer; docs/importer-fixes.md). Please report it, and leave this function to TensorFlow "
            "(remove @tfcheck.aot) until it is fixed")


def _sizes(io_path: Path) -> str:
    """` at batch=33, tokens_1=17` for the inputs of a symbolic build's verified size, else ``."""
    data = np.load(io_path)
    if SIZES not in data.files:
        return ""
    sizes = json.loads(str(data[SIZES]))
    return " at " + ", ".join(f"{name}={size}" for name, size in sizes.items())
