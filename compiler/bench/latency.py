"""Latency of one compiled function against every way TensorFlow can run it (`tfcheck bench`).

Each (function, backend) pair is measured in its own child process (`python -m
tfcheck.compiler.bench.latency request.json`, through `compiler/process/child.py`), so backends never share
thread pools, XLA caches or allocators, and the `tfcheck` process never imports TensorFlow. The
TVM backends load the exported `lib.so` with the TVM runtime alone, as production code would.
The children of one function run side by side but are timed in turns (`compiler/bench/turns.py`):
one child runs a slice of calls while the others wait, round after round, so that the ratios
compare backends under the same load.

Backends: `eager` (the Python function, op by op), `tf.function`, `xla`
(`tf.function(jit_compile=True)`), `tflite` (the frozen graph converted to TFLite, run by the
interpreter with its default XNNPACK delegate), and one `tvm` or `tvm-tuned` entry per artifact.
The TensorFlow side (the seeded module, inputs, freezing, conversion) is the build's own
(`compiler/trace/bridge.py`), and artifacts are loaded by `tfcheck.runtime`, as production loads them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.compiler.process.child import ChildOutcome, EventWriter, StepError, child_main, run_child, stop_children
from tfcheck.compiler.process.error_metric import scaled_error
from tfcheck.compiler.process.messages import BenchRequest, BenchResult, Budget
from tfcheck.compiler.trace.bridge import (flat_outputs, freeze, generate_inputs, import_tensorflow, load_function,
                                      tflite_runner, to_tflite)
from tfcheck.compiler.bench.turns import ROUNDS, Turns, timed_turns
from tfcheck.runtime.manifest import Manifest, TensorSpec, find_artifact_folders, read_manifest

_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")

TF_BACKENDS = ("eager", "tf.function", "xla", "tflite")
REFERENCE = "tf.function"

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
    max_rel_diff: float | None = None  # the same, relative to each output's scale (`scaled_error`), as the build's
    setup_s: float | None = None  # conversion, compilation or loading before the first call
    build_s: float | None = None  # TVM artifacts: compile (and tuning) time from the manifest
    error: str | None = None


@dataclass
class FunctionBench:
    """All backends for one artifact's function and input shapes."""

    function: str  # the manifest's qualname: module + "." + name in the module
    inputs: list[TensorSpec]  # concrete shapes
    measurements: list[Measurement] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "inputs": [spec.to_json() for spec in self.inputs],
                "measurements": [asdict(m) for m in self.measurements]}


# --- main process ---------------------------------------------------------------------------------


def find_artifacts(folder: Path) -> list[Manifest]:
    """Manifests of the artifact at `folder` or in its sub-folders (an `--out` folder or the
    cache), read by the runtime, sorted by function."""
    manifests = [read_manifest(found) for found in find_artifact_folders(folder)]
    return sorted(manifests, key=lambda m: (m.qualname, _shapes_key(m), m.tuned))


def _shapes_key(manifest: Manifest) -> str:
    return json.dumps([spec.to_json() for spec in manifest.inputs])


def group_by_function(manifests: list[Manifest]) -> list[list[Manifest]]:
    """Artifacts of the same function and input shapes go in one comparison: the newest default
    one and the newest tuned one (a cache can hold older builds of an edited function)."""
    groups: dict[tuple[str | None, str, str], dict[bool, Manifest]] = {}
    for manifest in manifests:
        if manifest.device != "cpu":
            continue
        key = (manifest.module, manifest.qualname, _shapes_key(manifest))
        kept = groups.setdefault(key, {}).get(manifest.tuned)
        if kept is None or manifest.created > kept.created:
            groups[key][manifest.tuned] = manifest
    return [[by_kind[k] for k in sorted(by_kind)] for by_kind in groups.values()]


def bench_function(artifacts: list[Manifest], backends: tuple[str, ...], budget: Budget,
                   on_stage: Callable[[str], None], timeout: float = 1800.0) -> FunctionBench:
    """Measure the TensorFlow backends and every artifact of one function, one child each."""
    first = artifacts[0]
    result = FunctionBench(first.qualname, timed_inputs(first))
    jobs = [(name, None) for name in backends if name in TF_BACKENDS]
    jobs += [("tvm-tuned" if a.tuned else "tvm", a) for a in artifacts if "tvm" in backends]
    work = Path(tempfile.mkdtemp(prefix="tfcheck-bench-"))
    try:
        result.measurements = _measure_in_turns(jobs, first, budget, work, on_stage, timeout)
        _compare(result, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


Job = tuple[str, Manifest | None]  # a backend's name, and its artifact for the TVM backends


def _measure_in_turns(jobs: list[Job], manifest: Manifest, budget: Budget, work: Path,
                      on_stage: Callable[[str], None], timeout: float) -> list[Measurement]:
    """One child per job, started side by side and timed in turns (`compiler/bench/turns.py`), so that
    every backend runs under the same load; the measurements in the jobs' order."""
    # Turns is left first: closing its pipes stops any child still waiting for a turn, which the
    # pool then waits for.
    with ThreadPoolExecutor(max(1, len(jobs))) as pool, Turns(len(jobs), budget) as turns:
        started = [_start(pool, turns, index, job, manifest, budget, work, timeout) for index, job in enumerate(jobs)]
        on_stage(f"preparing {', '.join(name for name, _ in jobs)}")
        try:
            turns.run(lambda number: on_stage(f"round {number} of about {ROUNDS}"))
        except BaseException:  # Ctrl-C: the children are in sessions of their own
            stop_children()
            raise
        return [item if isinstance(item, Measurement) else item.result() for item in started]


def _start(pool: ThreadPoolExecutor, turns: Turns, index: int, job: Job, manifest: Manifest, budget: Budget,
           work: Path, timeout: float) -> Future[Measurement] | Measurement:
    """Start job `index`'s child on a thread of `pool`; a job whose request cannot be made is its
    error at once, and gets no turns."""
    name, artifact = job
    folder = work / name.replace(".", "_")
    try:
        request = _request(name, manifest, artifact, budget, folder, turns.child_ends[index])
    except ValueError as error:  # a manifest whose module and source file do not agree
        turns.leave(index)
        return Measurement(name, error=str(error))

    def measure() -> Measurement:
        outcome = run_child("tfcheck.compiler.bench.latency", request, BenchResult, folder, on_stage=lambda _stage: None,
                            timeout=timeout, pass_fds=turns.child_ends[index])
        return _measurement(name, outcome, artifact)

    return pool.submit(measure)


def _measurement(backend: str, outcome: ChildOutcome[BenchResult], artifact: Manifest | None) -> Measurement:
    """A child's result or its error."""
    build_s = artifact.compile_seconds if artifact else None
    if outcome.result is None:
        return Measurement(backend, error=outcome.error, build_s=build_s)
    return Measurement(backend, **asdict(outcome.result), build_s=build_s)


def _request(backend: str, manifest: Manifest, artifact: Manifest | None, budget: Budget,
             work: Path, turns: tuple[int, int]) -> BenchRequest:
    module = str(manifest.module)
    return BenchRequest(backend=backend, module=module, qualname=manifest.qualname.removeprefix(module + "."),
                        root=str(_import_root(manifest)), inputs=timed_inputs(manifest),
                        budget=budget, outputs_path=str(work / "outputs.npz"), turns=list(turns),
                        artifact=str(artifact.folder) if artifact else None,
                        input_values=list(manifest.input_values) if manifest.input_values else None)


def timed_inputs(manifest: Manifest) -> list[TensorSpec]:
    """The inputs every backend is timed on: an artifact's unknown dimensions at their smallest
    size (the first the build verified against TensorFlow; batch 1, say). Without it the inputs
    of a symbolic artifact (YOLOv3 for any batch) could not be made: "'str' object cannot be
    interpreted as an integer"."""
    sizes = {name: dim.min for name, dim in (manifest.dims or {}).items()}
    return [replace(spec, shape=tuple(sizes.get(dim, dim) if isinstance(dim, str) else dim for dim in spec.shape))
            for spec in manifest.inputs]


def _import_root(manifest: Manifest) -> Path:
    """The folder to put on sys.path so that `manifest.module` imports: the source file's
    folder, minus one level per dot in the module name.

    The manifest names what bench imports, so both are checked against each other (names are
    identifiers, never paths): the module must be a dotted name and the source file the file that
    name denotes (`pkg/m.py` or `pkg/m/__init__.py` for `pkg.m`); ValueError otherwise.
    """
    module = str(manifest.module)
    if _DOTTED.fullmatch(module) is None:
        raise ValueError(f"{manifest.folder}: 'module' {module!r} is not a dotted module name")
    source = Path(str(manifest.source_file)).resolve()
    parts = tuple(module.split("."))
    if source.suffix != ".py" or (source.with_suffix("").parts[-len(parts):] != parts
                                  and (source.name, *source.parent.parts[-len(parts):]) != ("__init__.py", *parts)):
        raise ValueError(f"{manifest.folder}: 'source_file' {manifest.source_file!r} is not the file of "
                         f"module {module!r}")
    return source.parents[len(parts) if source.name == "__init__.py" else len(parts) - 1]


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
            pairs = list(zip(outputs, reference_outputs))
            measurement.max_abs_diff = max(
                (float(np.max(np.abs(a.astype(np.float64) - b), initial=0.0)) for a, b in pairs), default=0.0)
            measurement.max_rel_diff = max((scaled_error(a, b) for a, b in pairs), default=0.0)


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


def measure_backend(request: BenchRequest, events: EventWriter) -> BenchResult:
    """Child: prepare one backend in its first turn, time it in the others, save its outputs for
    the parent to compare."""
    arrays = generate_inputs(request.inputs, request.input_values)
    setup: list[float] = []

    def prepare() -> Callable[[], Any]:
        started = time.perf_counter()
        events.stage("prepare")
        call = _prepare(request, arrays)
        setup.append(time.perf_counter() - started)
        events.stage("measure")
        outputs = call()
        np.savez(request.outputs_path, **{f"out{i}": o for i, o in enumerate(flat_outputs(outputs))})
        return call

    times = timed_turns(prepare, request.budget, request.turns, time.perf_counter)
    if not times:
        raise StepError("stopped before it was timed (the bench was interrupted)")
    return BenchResult(
        median_ms=round(statistics.median(times) * 1e3, 4),
        p10_ms=round(float(np.percentile(times, 10)) * 1e3, 4),
        p90_ms=round(float(np.percentile(times, 90)) * 1e3, 4),
        runs=len(times),
        setup_s=round(setup[0], 3),
    )


def time_calls(call: Callable[[], Any], budget: Budget) -> list[float]:
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


def _prepare(request: BenchRequest, arrays: list[np.ndarray]) -> Callable[[], Any]:
    """A no-argument callable that runs the backend once on the prepared inputs."""
    backend = request.backend
    if backend.startswith("tvm"):
        return prepare_tvm(Path(str(request.artifact)), arrays)
    tf = import_tensorflow()
    function, _ = load_function(request.root, request.module, request.qualname)
    specs = [tf.TensorSpec(list(s.shape), s.dtype) for s in request.inputs]
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
        return _prepare_tflite(function.get_concrete_function(*specs), arrays)
    raise StepError(f"unknown backend {backend!r}")


def _prepare_tflite(concrete: Any, arrays: list[np.ndarray]) -> Callable[[], Any]:
    """Freeze and convert as the build does, run with XNNPACK on all cores."""
    return tflite_runner(to_tflite(freeze(concrete)), arrays, threads=os.cpu_count())


def prepare_tvm(folder: Path, arrays: list[np.ndarray]) -> Callable[[], Any]:
    """Load the artifact with `tfcheck.load`, as production code does (SHA-256 and machine
    checks, the bundled or installed TVM runtime, its thread count), check the inputs once, and
    time the artifact's own call."""
    from tfcheck.runtime import load

    [compiled] = load(folder).functions.values()
    artifact, checked = compiled.select(arrays, {})
    return lambda: artifact.run(checked)


if __name__ == "__main__":
    child_main(measure_backend, BenchRequest)
