"""Latency of one compiled function against every way TensorFlow can run it (`tfcheck bench`).

Each (function, backend) pair is measured in its own child process (`python -m
tfcheck.compiler.bench request.json`, through `compiler/child.py`), so backends never share
thread pools, XLA caches or allocators, and the `tfcheck` process never imports TensorFlow. The
TVM backends load the exported `lib.so` with the TVM runtime alone, as production code would.

Backends: `eager` (the Python function, op by op), `tf.function`, `xla`
(`tf.function(jit_compile=True)`), `tflite` (the frozen graph converted to TFLite, run by the
interpreter with its default XNNPACK delegate), and one `tvm` or `tvm-tuned` entry per artifact.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.compiler.child import EventWriter, StepError, child_main, run_child
from tfcheck.runtime.manifest import read_manifest
from tfcheck.runtime.threads import use_all_cores

TF_BACKENDS = ("eager", "tf.function", "xla", "tflite")
REFERENCE = "tf.function"
MANIFEST = "manifest.json"
SEED = 0


@dataclass(frozen=True)
class Budget:
    """How long to measure: warm-up calls, then at least `min_runs` and `min_seconds`, at most
    `max_runs` or `max_seconds` (whichever ends first)."""

    warmup: int = 3
    min_runs: int = 10
    min_seconds: float = 1.0
    max_runs: int = 500
    max_seconds: float = 10.0


@dataclass
class Measurement:
    """One backend's latency for one function; `error` when it could not run."""

    backend: str
    median_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    runs: int = 0
    ratio: float | None = None  # median / tf.function's median: < 1 is faster than tf.function
    max_abs_diff: float | None = None  # largest difference from tf.function's outputs
    setup_s: float | None = None  # conversion, compilation or loading before the first call
    build_s: float | None = None  # TVM artifacts: compile (and tuning) time from the manifest
    error: str | None = None


@dataclass
class FunctionBench:
    """All backends for one artifact's function and input shapes."""

    function: str  # the manifest's qualname: module + "." + name in the module
    inputs: list[dict[str, Any]]
    measurements: list[Measurement] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "inputs": self.inputs,
                "measurements": [asdict(m) for m in self.measurements]}


# --- main process ---------------------------------------------------------------------------------


def find_artifacts(folder: Path) -> list[dict[str, Any]]:
    """Manifests (with `_folder` set) of the artifact at `folder` or in its sub-folders (an
    `--out` folder or the cache), sorted by function."""
    candidates = [folder / MANIFEST] if (folder / MANIFEST).is_file() else sorted(folder.glob(f"*/{MANIFEST}"))
    manifests = []
    for path in candidates:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        manifest["_folder"] = str(path.parent)
        manifests.append(manifest)
    return sorted(manifests, key=lambda m: (m["qualname"], json.dumps(m["inputs"]), m.get("tuned", False)))


def group_by_function(manifests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Artifacts of the same function and input shapes go in one comparison: the newest default
    one and the newest tuned one (a cache can hold older builds of an edited function)."""
    groups: dict[str, dict[bool, dict[str, Any]]] = {}
    for manifest in manifests:
        if manifest.get("device", "cpu") != "cpu":
            continue
        key = json.dumps([manifest["module"], manifest["qualname"], manifest["inputs"]])
        kind = bool(manifest.get("tuned"))
        kept = groups.setdefault(key, {}).get(kind)
        if kept is None or manifest.get("created", "") > kept.get("created", ""):
            groups[key][kind] = manifest
    return [[by_kind[k] for k in sorted(by_kind)] for by_kind in groups.values()]


def bench_function(artifacts: list[dict[str, Any]], backends: tuple[str, ...], budget: Budget,
                   on_stage: Callable[[str], None], timeout: float = 1800.0) -> FunctionBench:
    """Measure the TensorFlow backends and every artifact of one function, one child each."""
    first = artifacts[0]
    result = FunctionBench(first["qualname"], first["inputs"])
    work = Path(tempfile.mkdtemp(prefix="tfcheck-bench-"))
    try:
        jobs = [(name, None) for name in backends if name in TF_BACKENDS]
        jobs += [("tvm-tuned" if a.get("tuned") else "tvm", a) for a in artifacts if "tvm" in backends]
        for name, artifact in jobs:
            on_stage(name)
            request = _request(name, first, artifact, budget, work / name.replace(".", "_"))
            outcome = run_child("tfcheck.compiler.bench", request, work / name.replace(".", "_"),
                                on_stage=lambda _stage: None, timeout=timeout)
            result.measurements.append(_measurement(name, outcome, artifact))
        _compare(result, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _measurement(backend: str, outcome: Any, artifact: dict[str, Any] | None) -> Measurement:
    """A child's result (its event carries extra keys) or its error."""
    build_s = artifact.get("compile_seconds") if artifact else None
    if outcome.result is None:
        return Measurement(backend, error=outcome.error, build_s=build_s)
    known = {name: outcome.result[name] for name in ("median_ms", "p10_ms", "p90_ms", "runs", "setup_s")}
    return Measurement(backend, **known, build_s=build_s)


def _request(backend: str, manifest: dict[str, Any], artifact: dict[str, Any] | None, budget: Budget,
             work: Path) -> dict[str, Any]:
    return {
        "backend": backend,
        "module": manifest["module"],
        "qualname": manifest["qualname"].removeprefix(manifest["module"] + "."),
        "root": str(_import_root(manifest)),
        "inputs": manifest["inputs"],
        "artifact": artifact["_folder"] if artifact else None,
        "budget": asdict(budget),
        "outputs_path": str(work / "outputs.npz"),
    }


def _import_root(manifest: dict[str, Any]) -> Path:
    """The folder to put on sys.path so that `manifest["module"]` imports: the source file's
    folder, minus one level per dot in the module name."""
    source = Path(manifest["source_file"]).resolve()
    return source.parents[manifest["module"].count(".")]


def _compare(result: FunctionBench, work: Path) -> None:
    """Ratios to tf.function's median, and output differences from tf.function's outputs."""
    by_name = {m.backend: m for m in result.measurements}
    reference = by_name.get(REFERENCE)
    reference_outputs = _load_outputs(work / REFERENCE.replace(".", "_") / "outputs.npz")
    for measurement in result.measurements:
        if measurement.median_ms is None:
            continue
        if reference is not None and reference.median_ms:
            measurement.ratio = round(measurement.median_ms / reference.median_ms, 3)
        outputs = _load_outputs(work / measurement.backend.replace(".", "_") / "outputs.npz")
        if _comparable(outputs, reference_outputs):
            measurement.max_abs_diff = max(
                (float(np.max(np.abs(a.astype(np.float64) - b))) for a, b in zip(outputs, reference_outputs)),
                default=0.0,
            )


def _comparable(outputs: list[np.ndarray] | None, reference: list[np.ndarray] | None) -> bool:
    """Outputs can be compared when both exist with the same shapes in the same order."""
    if outputs is None or reference is None or len(outputs) != len(reference):
        return False
    return all(a.shape == b.shape for a, b in zip(outputs, reference))


def _load_outputs(path: Path) -> list[np.ndarray] | None:
    if not path.is_file():
        return None
    with np.load(path) as data:
        return [data[f"out{i}"] for i in range(len(data.files))]


# --- child process --------------------------------------------------------------------------------


def measure_backend(request: dict[str, Any], events: EventWriter) -> dict[str, Any]:
    """Child: prepare one backend, time it, save its outputs for the parent to compare."""
    budget = Budget(**request["budget"])
    arrays = _inputs(request["inputs"])
    started = time.perf_counter()
    events.stage("prepare")
    call = _prepare(request, arrays)
    setup = time.perf_counter() - started
    events.stage("measure")
    outputs = call()
    np.savez(request["outputs_path"], **{f"out{i}": o for i, o in enumerate(_to_numpy(outputs))})
    times = _time_calls(call, budget)
    return {
        "median_ms": round(statistics.median(times) * 1e3, 4),
        "p10_ms": round(float(np.percentile(times, 10)) * 1e3, 4),
        "p90_ms": round(float(np.percentile(times, 90)) * 1e3, 4),
        "runs": len(times),
        "setup_s": round(setup, 3),
    }


def _inputs(specs: list[dict[str, Any]]) -> list[np.ndarray]:
    """Random inputs of the artifact's shapes, the same in every child (fixed seed)."""
    rng = np.random.default_rng(SEED)
    arrays = []
    for spec in specs:
        dtype = np.dtype(spec["dtype"])
        if np.issubdtype(dtype, np.floating):
            arrays.append(rng.standard_normal(spec["shape"]).astype(dtype))
        else:
            arrays.append(rng.integers(0, 8, spec["shape"]).astype(dtype))
    return arrays


def _time_calls(call: Callable[[], Any], budget: Budget) -> list[float]:
    """Wall time of each call after the warm-up, within the budget."""
    for _ in range(budget.warmup):
        call()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < budget.max_runs:
        elapsed = time.perf_counter() - start
        if elapsed >= budget.max_seconds or (len(times) >= budget.min_runs and elapsed >= budget.min_seconds):
            break
        before = time.perf_counter()
        call()
        times.append(time.perf_counter() - before)
    return times


def _to_numpy(outputs: Any) -> list[np.ndarray]:
    """Flatten a backend's outputs (a tensor, a sequence, or a dict taken in key order) to arrays."""
    if isinstance(outputs, dict):
        values = [outputs[key] for key in sorted(outputs)]
    elif hasattr(outputs, "numpy"):
        values = [outputs]
    else:
        values = list(outputs)
    return [np.asarray(v.numpy() if hasattr(v, "numpy") else v) for v in values]


def _prepare(request: dict[str, Any], arrays: list[np.ndarray]) -> Callable[[], Any]:
    """A no-argument callable that runs the backend once on the prepared inputs."""
    backend = request["backend"]
    if backend.startswith("tvm"):
        return _prepare_tvm(Path(request["artifact"]), arrays)
    import tensorflow as tf

    function = _load_function(request)
    specs = [tf.TensorSpec(s["shape"], s["dtype"]) for s in request["inputs"]]
    tensors = [tf.constant(a) for a in arrays]
    if backend == "eager":
        python_function = function.python_function
        return lambda: python_function(*tensors)
    if backend == "tf.function":
        concrete = function.get_concrete_function(*specs)
        return lambda: concrete(*tensors)
    if backend == "xla":
        compiled = tf.function(function.python_function, input_signature=specs, jit_compile=True)
        return lambda: compiled(*tensors)
    if backend == "tflite":
        return _prepare_tflite(tf, function.get_concrete_function(*specs), arrays)
    raise StepError(f"unknown backend {backend!r}")


def _load_function(request: dict[str, Any]) -> Any:
    """The tf.function behind the annotated name (unwrapping `@tfcheck.aot`)."""
    sys.path.insert(0, request["root"])
    target: Any = importlib.import_module(request["module"])
    for part in request["qualname"].split("."):
        target = getattr(target, part)
    function = getattr(target, "tf_function", target)
    if not hasattr(function, "python_function"):
        raise StepError(f"{request['module']}.{request['qualname']} is not a tf.function")
    return function


def _prepare_tflite(tf: Any, concrete: Any, arrays: list[np.ndarray]) -> Callable[[], Any]:
    """Freeze, convert with builtin ops only (as the build does), run with XNNPACK on all cores."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    frozen = convert_variables_to_constants_v2(concrete)
    flatbuffer = tf.lite.TFLiteConverter.from_concrete_functions([frozen], concrete).convert()
    interpreter = tf.lite.Interpreter(model_content=flatbuffer, num_threads=os.cpu_count())
    interpreter.allocate_tensors()
    inputs = sorted(interpreter.get_input_details(), key=lambda d: d["index"])
    outputs = interpreter.get_output_details()

    def run() -> list[np.ndarray]:
        for detail, array in zip(inputs, arrays):
            interpreter.set_tensor(detail["index"], array)
        interpreter.invoke()
        return [interpreter.get_tensor(detail["index"]) for detail in outputs]

    return run


def _prepare_tvm(folder: Path, arrays: list[np.ndarray]) -> Callable[[], Any]:
    """Load the exported library with the TVM runtime and call its entry on device tensors, with
    the thread count production loading uses (`tfcheck.runtime.threads`)."""
    use_all_cores()
    import tvm
    from tvm import relax

    manifest = read_manifest(folder)  # refuses a library outside the artifact folder
    machine = relax.VirtualMachine(tvm.runtime.load_module(str(manifest.library_path)), tvm.cpu())
    entry = machine[manifest.entry]
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    return lambda: entry(*tensors)


if __name__ == "__main__":
    child_main(measure_backend)
