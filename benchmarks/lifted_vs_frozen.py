"""One keras.applications model built with its weights frozen and with its weights as inputs, timed
interleaved with tf.function and TFLite+XNNPACK at one TVM thread and at two, and its kernels.

Issue 15's largest models (over 64 MB of weights, so built with their weights as inputs by
default) ran slower than tf.function in the coverage sweep, which times each backend in its own
process. This script builds the model the way `tfcheck build` does for each route, in one process:
frozen (`bridge.freeze`, the converter folds batch norm into the convolutions) and lifted
(`bridge.lift_weights`, then `importer.import_variant` on a variant folder with `weights.npz`,
which binds the weights and folds what follows the convolutions into them), and as lifted before
that fold (``lifted-unfolded``: `importer.bind_weights` alone). Then it times them in rounds that
alternate between backends (`depthwise_kernels.interleaved_us`), switching TVM's thread pool
between one and two threads (`runtime.config_threadpool`; tf.function keeps TensorFlow's own
threads, TFLite runs on as many threads as TVM), and ranks each build's kernels by the time the
Relax VM spends in them (`app_kernels.KernelProfile`'s instrument):

    .venv/bin/python benchmarks/lifted_vs_frozen.py ResNet101V2 [--size 224] [--rounds 8] [--calls 2]
        [--builds frozen,lifted,lifted-unfolded] [--threads 1,2] [--top 12] [--thread-cpu]

``--thread-cpu`` compares the TVM builds alone, on one thread, by the calling thread's CPU time
(`time.thread_time`; all of a one-thread build's work runs on it), which the machine's load
moves far less than wall time: waiting for a core does not count.

The model is built as the coverage sweep builds it (``weights=None``, logits, batch norms calibrated
on one random batch), at batch 1.
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import app_kernels  # noqa: E402  (sibling script; its import sets the thread count before TVM starts)
import depthwise_kernels as bench  # noqa: E402

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

from tfcheck.compiler.frontend.importer import bind_weights, import_tflite, import_variant  # noqa: E402
from tfcheck.compiler.schedules import apply_default_schedules, compile_cpu  # noqa: E402
from tfcheck.compiler.build.targets import host_cpu_target  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, import_tensorflow, lift_weights, to_tflite, weight_values  # noqa: E402
from tfcheck.compiler.process.weights_file import WEIGHTS_FILE, save_weights  # noqa: E402


def frozen_module(concrete: Any, folder: Path) -> tvm.IRModule:
    """The frozen route's Relax module (`weights="constants"`)."""
    (folder / "model.tflite").write_bytes(to_tflite(freeze(concrete)))
    return import_variant(folder)


def lifted_variant(concrete: Any, folder: Path) -> int:
    """Write the lifted route's variant folder (`weights="inputs"`): model.tflite and weights.npz;
    the number of weights."""
    lifted = lift_weights(concrete)
    (folder / "model.tflite").write_bytes(to_tflite(lifted.function))
    return save_weights(weight_values(lifted), folder / WEIGHTS_FILE)


def build_modules(concrete: Any, names: list[str], work: Path) -> dict[str, tvm.IRModule]:
    """Each requested build's imported Relax module, with the seconds each import took."""
    modules: dict[str, tvm.IRModule] = {}
    weights = 0
    for name in names:
        folder = work / name.split("-")[0]
        folder.mkdir(exist_ok=True)
        started = time.monotonic()
        if name == "frozen":
            modules[name] = frozen_module(concrete, folder)
        else:
            if not (folder / "model.tflite").exists():
                weights = lifted_variant(concrete, folder)
            modules[name] = (import_variant(folder, weights=weights) if name == "lifted" else
                             bind_weights(import_tflite(folder / "model.tflite"), folder / WEIGHTS_FILE, weights))
        print(f"{name}: imported in {time.monotonic() - started:.1f} s", flush=True)
    return modules


class Build:
    """One compiled module: a plain VM to time and an instrumented one to rank kernels."""

    def __init__(self, mod: tvm.IRModule, target: tvm.target.Target, inputs: list[np.ndarray]) -> None:
        started = time.monotonic()
        self.scheduled = apply_default_schedules(mod, target)
        self.executable = compile_cpu(self.scheduled, target)
        self.seconds = time.monotonic() - started
        self.vm = relax.VirtualMachine(self.executable, tvm.cpu())
        self.data = [tvm.runtime.tensor(x) for x in inputs]
        self.kernels = sum(1 for _, func in self.scheduled.functions_items() if isinstance(func, tvm.tirx.PrimFunc))

    def call(self) -> np.ndarray:
        return self.vm["main"](*self.data).numpy()

    def profile(self, calls: int) -> list[dict[str, Any]]:
        """`app_kernels.KernelProfile`'s rows for this build (in a VM of its own, instrumented)."""
        profile = app_kernels.KernelProfile(self.scheduled, self.executable)
        for _ in range(calls):
            profile.call()
        return profile.rows()


TARGET = tvm.target.Target(host_cpu_target())
set_threads: Callable[[int, int], None] = tvm.get_global_func("runtime.config_threadpool")


def time_all(calls: dict[str, Callable[[], Any]], threads: list[int], rounds: int, per_round: int,
             clock: Callable[[], float] = time.perf_counter) -> dict[int, dict[str, float]]:
    """Best ms per call of each backend at each TVM thread count; the counts alternate round by round."""
    best: dict[int, dict[str, float]] = {count: {name: float("inf") for name in calls} for count in threads}
    for index in range(rounds):
        for count in threads[index % len(threads):] + threads[:index % len(threads)]:
            set_threads(1, count)
            timed = {name: call for name, call in calls.items() if not name.startswith("tflite/") or
                     name == f"tflite/{count}"}
            for name, us in bench.interleaved_us(timed, 1, per_round, clock).items():
                best[count][name] = min(best[count][name], us / 1e3)
    return best


def print_kernels(name: str, rows: list[dict[str, Any]], top: int) -> None:
    """Total, by rule, and the slowest kernels of one build."""
    total = sum(row["ms"] for row in rows)
    by_rule: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    for row in rows:
        by_rule[row["rule"]][0] += row["ms"]
        by_rule[row["rule"]][1] += row["calls"]
    print(f"\n{name}: kernel time {total:.1f} ms in {sum(r['calls'] for r in rows)} calls; by rule: "
          + ", ".join(f"{rule} {ms:.1f} ms ({calls} calls)" for rule, (ms, calls) in
                      sorted(by_rule.items(), key=lambda item: -item[1][0])))
    print("| kernel | calls | ms | rule | buffers |\n|---|---:|---:|---|---|")
    for row in rows[:top]:
        print(f"| {row['kernel']} | {row['calls']} | {row['ms']:.2f} | {row['rule']} | {row['shapes']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a keras.applications name, e.g. ResNet101V2")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=2, help="calls per round and backend")
    parser.add_argument("--builds", default="frozen,lifted,lifted-unfolded")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--thread-cpu", action="store_true", help="the TVM builds alone, one thread, thread CPU time")
    args = parser.parse_args()
    if args.thread_cpu:
        args.threads = "1"
    tf = import_tensorflow()
    import keras

    print(f"uptime before: {os.popen('uptime').read().strip()}", flush=True)
    concrete, _model = app_kernels.application(tf, keras, args.model, args.size)
    inputs = [np.random.default_rng(1).standard_normal([1, args.size, args.size, 3]).astype(np.float32)]
    tensor = tf.constant(inputs[0])
    expected = concrete(tensor).numpy()
    with tempfile.TemporaryDirectory() as work:
        modules = build_modules(concrete, args.builds.split(","), Path(work))
        flatbuffer = (Path(work) / "frozen" / "model.tflite").read_bytes() if "frozen" in modules else None
    builds = {}
    for name in list(modules):
        builds[name] = Build(modules.pop(name), TARGET, inputs)
        error = float(np.max(np.abs(builds[name].call() - expected)))
        print(f"{name}: scheduled and compiled in {builds[name].seconds:.1f} s, {builds[name].kernels} kernels, "
              f"max abs error {error:.1e}", flush=True)
    threads = [int(count) for count in args.threads.split(",")]
    calls: dict[str, Callable[[], Any]] = {} if args.thread_cpu else {"tf.function": lambda: concrete(tensor)}
    if flatbuffer is not None and not args.thread_cpu:
        calls.update({f"tflite/{count}": bench.tflite_call(tf, flatbuffer, inputs, count) for count in threads})
    calls.update({name: build.call for name, build in builds.items()})
    print(f"uptime before timing: {os.popen('uptime').read().strip()}", flush=True)
    best = time_all(calls, threads, args.rounds, args.calls, time.thread_time if args.thread_cpu else time.perf_counter)
    print(f"uptime after timing: {os.popen('uptime').read().strip()}")
    columns = [*builds] if args.thread_cpu else ["tf.function", "tflite", *builds]
    print(f"\n| {args.model} | " + " | ".join(columns) + " |\n|---|" + "---:|" * len(columns))
    for count in threads:
        row = {**best[count], "tflite": best[count].get(f"tflite/{count}", float("nan"))}
        print(f"| TVM and TFLite on {count} thread(s) | " + " | ".join(f"{row[c]:.1f} ms" for c in columns) + " |")
    set_threads(1, max(threads))
    for name, build in builds.items():
        print_kernels(f"{name} ({max(threads)} threads)", build.profile(args.calls), args.top)
    print(f"uptime after: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
