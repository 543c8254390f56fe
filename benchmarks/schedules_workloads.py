"""Time TVM builds of the schedule workloads: untuned ``tvm.compile`` against ``apply_default_schedules``.

First export the workloads with TensorFlow (once; it also times tf.function):

    .venv/bin/python benchmarks/schedules_models.py --out /tmp/tfcheck_schedules

then, without TensorFlow in the process:

    .venv/bin/python benchmarks/schedules_workloads.py --models /tmp/tfcheck_schedules [--only mlp,cnn] [--skip-untuned]

Prints one markdown table row per workload: median wall time of tf.function, untuned TVM and the
default schedules with the ratio to tf.function; the same for process CPU time per call (all
threads; on a shared machine wall time mostly measures the wait for a core); the build time
(schedules + ``tvm.compile``); and the largest difference from TensorFlow's output, relative to its
largest magnitude.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Callable

import numpy as np
import tflite
import tvm
import tvm.relax.frontend.tflite  # noqa: F401  (registers from_tflite)
from tvm import relax

from tfcheck.compiler.schedules import apply_default_schedules
from tfcheck.compiler.build.targets import host_cpu_target


def load_relax(path: Path) -> tvm.IRModule:
    """Import a TFLite flatbuffer as a Relax module, the way the build does."""
    buf = path.read_bytes()
    return relax.frontend.tflite.from_tflite(tflite.Model.GetRootAsModel(buf, 0))


def times_ms(fn: Callable[[], object], repeat: int, budget_s: float) -> dict[str, list[float]]:
    """Wall and process CPU times of ``fn`` in ms over ``repeat`` runs (fewer if they exceed ``budget_s``)."""
    fn()
    times: dict[str, list[float]] = {"wall": [], "cpu": []}
    deadline = time.perf_counter() + budget_s
    while len(times["wall"]) < repeat and (not times["wall"] or time.perf_counter() < deadline):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        times["wall"].append((time.perf_counter() - start) * 1000.0)
        times["cpu"].append((time.process_time() - start_cpu) * 1000.0)
    return times


def build_and_time(
    mod: tvm.IRModule, data: np.ndarray, scheduled: bool, repeat: int
) -> tuple[float, dict[str, list[float]], np.ndarray]:
    """(build seconds, run times in ms, output) of one build of ``mod``."""
    target = tvm.target.Target(host_cpu_target())
    start = time.perf_counter()
    if scheduled:
        mod = apply_default_schedules(mod, target)
    executable = tvm.compile(mod, target=target)
    build_s = time.perf_counter() - start
    vm = relax.VirtualMachine(executable, tvm.cpu())
    arg = tvm.runtime.tensor(data)
    output = vm["main"](arg)
    result = (output if hasattr(output, "numpy") else output[0]).numpy()
    return build_s, times_ms(lambda: vm["main"](arg), repeat, budget_s=20.0), result


def row(name: str, models: Path, tf_ms: dict[str, float], args: argparse.Namespace) -> str:
    """One markdown table row for a workload."""
    mod = load_relax(models / f"{name}.tflite")
    data = np.load(models / f"{name}.inputs.npz")["x"]
    expected = np.load(models / f"{name}.expected.npz")["y"]
    untuned = "skipped"
    if not args.skip_untuned:
        _, untuned_times, _ = build_and_time(mod, data, scheduled=False, repeat=args.repeat)
        untuned_ms = statistics.median(untuned_times["wall"])
        untuned = f"{untuned_ms:.2f} ms ({untuned_ms / tf_ms['wall']:.1f}x)"
    build_s, times, result = build_and_time(mod, data, scheduled=True, repeat=args.repeat)
    wall, cpu = statistics.median(times["wall"]), statistics.median(times["cpu"])
    error = float(np.max(np.abs(result.reshape(expected.shape) - expected)) / (np.max(np.abs(expected)) or 1.0))
    return (
        f"| {name} | {tf_ms['wall']:.2f} ms | {untuned} | {wall:.2f} ms | {wall / tf_ms['wall']:.2f}x "
        f"| {tf_ms['cpu']:.2f} ms | {cpu:.2f} ms | {cpu / tf_ms['cpu']:.2f}x | {build_s:.1f} s | {error:.1e} |"
    )


def main() -> None:
    """Print the comparison table for the chosen workloads."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, default=Path("/tmp/tfcheck_schedules"))
    parser.add_argument("--only", default="mlp,cnn,mobilenet_v2,resnet50,mha,lstm")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--skip-untuned", action="store_true", help="do not build and time plain tvm.compile")
    args = parser.parse_args()
    tf_times = json.loads((args.models / "tf_times.json").read_text())
    print(
        "| workload | tf.function wall | TVM untuned wall (vs tf) | default schedules wall | ratio "
        "| tf.function CPU | default schedules CPU | ratio | build | max rel err |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.only.split(","):
        print(row(name, args.models, tf_times[name], args), flush=True)


if __name__ == "__main__":
    main()
