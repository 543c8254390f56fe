"""A keras.applications model, default build against tf.function and TFLite+XNNPACK, and its kernels.

Issue 15's coverage sweep timed each backend in its own process on a loaded machine, which put
DenseNet121 at 4.86x of tf.function in one run and 0.52x in another. This script times the three
backends interleaved in one process (`depthwise_kernels.bench_function`: rounds alternate between
backends, the best round counts), and with ``--kernels`` ranks each variant's kernels by the
time the Relax VM spends in them (`VirtualMachine.set_instrument`, wall time around each call
inside the whole model, so caches and threads are as the model has them), with the schedule rule
each one got (``tfcheck.schedule_rule``):

    .venv/bin/python benchmarks/app_kernels.py DenseNet121 [--size 224] [--rounds 10] [--calls 3]
        [--variants default,unpadded] [--targets avx512,avx2] [--kernels] [--top 20]

The model is built as the sweep builds it (``weights=None``, logits, batch norms calibrated on one
random batch: fixtures/aot/calibration.py), at batch 1.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import depthwise_kernels as bench  # noqa: E402  (sibling script; sets the thread count before TVM starts)

import tvm  # noqa: E402
from tvm import relax, tirx  # noqa: E402

from tfcheck.compiler.schedules import apply as schedules, compile_cpu  # noqa: E402
from tfcheck.compiler.schedules.rewrites import channel_padding  # noqa: E402
from tfcheck.compiler.build.targets import host_cpu_target  # noqa: E402
from tfcheck.compiler.trace.bridge import import_tensorflow  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "aot"))
from calibration import calibrate_batch_norm  # noqa: E402



def without_width_padding(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """The default build without the output-width padding of `channel_padding.py` (as before issue 15)."""
    saved = channel_padding.padded_rows
    channel_padding.padded_rows = lambda extent, _rows: extent
    try:
        return schedules.apply_default_schedules(mod, target)
    finally:
        channel_padding.padded_rows = saved


# Scheduling steps to compare with ``--variants``.
VARIANTS: dict[str, bench.Schedule] = {"default": schedules.apply_default_schedules,
                                        "unpadded": without_width_padding}


def application(tf: Any, keras: Any, name: str, size: int) -> tuple[Any, Any]:
    """``keras.applications.<name>`` as the coverage sweep has it, traced at batch 1, and the model
    (the caller keeps it: the traced function only holds weak references to its variables)."""
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3), classifier_activation=None)
    calibrate_batch_norm(model, (2, size, size, 3))
    spec = tf.TensorSpec([1, size, size, 3], tf.float32)
    function = tf.function(lambda images: model(images, training=False), input_signature=[spec])
    return function.get_concrete_function(), model


class KernelProfile:
    """A scheduled module's executable in a VM whose calls time each kernel (`VirtualMachine.set_instrument`): wall
    time around each VM call, inside the whole model, so caches and threads are as the model has them."""

    def __init__(self, scheduled: tvm.IRModule, executable: Any) -> None:
        self.scheduled = scheduled
        self.vm = relax.VirtualMachine(executable, tvm.cpu())
        self.inputs = [tvm.runtime.tensor(np.random.default_rng(1).standard_normal(
            [int(d) for d in p.ty.shape.values]).astype("float32")) for p in self.scheduled["main"].params]
        self.vm["main"](*self.inputs)
        self.spent: dict[str, float] = collections.defaultdict(float)
        self.count: collections.Counter[str] = collections.Counter()
        self.calls = 0
        started: list[float] = []

        def instrument(_func: Any, symbol: str, before: bool, _ret: Any, *_args: Any) -> int:
            if before:
                started.append(time.perf_counter())
            else:
                self.spent[symbol] += time.perf_counter() - started.pop()
                self.count[symbol] += 1
            return 0

        self.vm.set_instrument(instrument)

    def call(self) -> None:
        """One instrumented inference."""
        self.vm["main"](*self.inputs)
        self.calls += 1

    def rows(self) -> list[dict[str, Any]]:
        """Per kernel, slowest first: its calls per inference, ms per inference, the rule that
        scheduled it and its parameters' shapes (input, weights, output), to tell operators apart."""
        functions = {gvar.name_hint: func for gvar, func in self.scheduled.functions_items()}
        found = []
        for symbol, seconds in self.spent.items():
            func = functions.get(symbol)
            primfunc = isinstance(func, tirx.PrimFunc)
            rule = str((func.attrs or {}).get(schedules.RULE_ATTR, "unscheduled")) if primfunc else "-"
            shapes = " ".join("x".join(str(int(d)) for d in p.shape) for p in func.params if hasattr(p, "shape")) \
                if primfunc else ""
            found.append({"kernel": symbol, "calls": self.count[symbol] // self.calls,
                          "ms": seconds / self.calls * 1e3, "rule": rule, "shapes": shapes})
        return sorted(found, key=lambda row: -row["ms"])


def print_profile(rows: list[dict[str, Any]], top: int) -> None:
    """The kernel table, and the total by rule."""
    total = sum(row["ms"] for row in rows)
    print(f"\nkernel time per inference: {total:.2f} ms in {sum(row['calls'] for row in rows)} calls")
    by_rule: dict[str, float] = collections.defaultdict(float)
    for row in rows:
        by_rule[row["rule"]] += row["ms"]
    print("by rule: " + ", ".join(f"{rule} {ms:.2f} ms" for rule, ms in sorted(by_rule.items(), key=lambda i: -i[1])))
    print("| kernel | calls | ms per inference | share | rule | buffers |\n|---|---:|---:|---:|---|---|")
    for row in rows[:top]:
        print(f"| {row['kernel']} | {row['calls']} | {row['ms']:.3f} | {row['ms'] / total:.1%} | {row['rule']} | "
              f"{row['shapes']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a keras.applications name, e.g. DenseNet121")
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=3, help="calls per round")
    parser.add_argument("--variants", default="default", help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--targets", default="avx512", help="comma-separated, of avx512, avx2")
    parser.add_argument("--kernels", action="store_true", help="rank each variant's kernels instead (AVX-512)")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    tf = import_tensorflow()
    import keras

    concrete, _model = application(tf, keras, args.model, args.size)
    print(f"load before: {os.getloadavg()[0]:.2f}, TVM threads: {bench.THREADS}, TFLite threads: {bench.THREADS}")
    variants = {name: VARIANTS[name] for name in args.variants.split(",")}
    if args.kernels:
        relax_mod = bench.import_flatbuffer(bench.to_tflite(bench.freeze(concrete)))
        target = tvm.target.Target(host_cpu_target())
        scheduled = {name: schedule(relax_mod, target) for name, schedule in variants.items()}
        profiles = {name: KernelProfile(mod, compile_cpu(mod, target)) for name, mod in scheduled.items()}
        for _ in range(args.calls):  # interleaved, so that a change of load hits every variant alike
            for profile in profiles.values():
                profile.call()
        for name, profile in profiles.items():
            print(f"\n{name}:")
            print_profile(profile.rows(), args.top)
    else:
        targets = args.targets.split(",")
        times, error = bench.bench_function(tf, concrete, variants, targets, args.rounds, args.calls)
        columns = ["tflite", "tf.function"] + [f"{v}/{t}" for t in targets for v in variants]
        print("| model | " + " | ".join(columns) + " | max abs err |\n|---|" + "---:|" * (len(columns) + 1))
        print(f"| {args.model} | " + " | ".join(f"{times[c] / 1e3:.2f} ms" for c in columns) + f" | {error:.1e} |")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
