"""A keras.applications model, default build against tf.function and TFLite+XNNPACK, and its kernels.

Issue 15's coverage sweep timed each backend in its own process on a loaded machine, which put
DenseNet121 at 4.86x of tf.function in one run and 0.52x in another. This script times the three
backends interleaved in one process (`depthwise_kernels.bench_function`: rounds alternate between
backends, the best round counts), and with ``--kernels`` ranks each variant's and target's kernels
by the time the Relax VM spends in them, with the schedule rule each one got and its GFLOP/s: the
table of `tfcheck bench --profile`, from the same code (`compiler/bench/profile.py`):

    .venv/bin/python benchmarks/app_kernels.py DenseNet121 [--size 224] [--rounds 10] [--calls 3]
        [--variants default,unpadded,direct] [--targets avx512,avx2] [--kernels] [--top 20]

Two commits' builds in the same rounds: ``--export DIR`` builds each variant and target as
``tfcheck build`` compiles (``compile_cpu``) and writes ``DIR/<model>-<variant>-<target>.so``;
``--libs before=A.so,after=B.so`` times such libraries beside TFLite and tf.function (building
nothing unless ``--targets`` is given). Run under ``benchmarks/avx2_only/run.py`` for AVX2 builds.
``--thread-cpu`` (with ``TVM_NUM_THREADS=1``) times the calling thread's CPU time, TVM and TFLite
on one thread and no tf.function, whose kernels run on threads of their own: on a loaded machine,
what a change of the build does, without the waits for a core.

The model is built as the sweep builds it (``weights=None``, logits, batch norms calibrated on one
random batch: fixtures/aot/calibration.py), at batch 1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

import depthwise_kernels as bench  # noqa: E402  (sibling script; sets the thread count before TVM starts)

import tvm  # noqa: E402

from tfcheck.compiler.bench.profile import FunctionProfile, KernelProfile, markdown  # noqa: E402
from tfcheck.compiler.process.messages import KernelRecord  # noqa: E402
from tfcheck.compiler.schedules import apply as schedules, compile_cpu  # noqa: E402
from tfcheck.compiler.schedules.rewrites import channel_padding, winograd  # noqa: E402
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


def direct_convolutions(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """The default build with every convolution direct: without Winograd's form (`winograd.py`)."""
    with mock.patch.object(winograd, "choose_transform", lambda *_args: None):
        return schedules.apply_default_schedules(mod, target)


# Scheduling steps to compare with ``--variants``.
VARIANTS: dict[str, bench.Schedule] = {"default": schedules.apply_default_schedules,
                                        "unpadded": without_width_padding, "direct": direct_convolutions}


def application(tf: Any, keras: Any, name: str, size: int) -> tuple[Any, Any]:
    """``keras.applications.<name>`` as the coverage sweep has it, traced at batch 1, and the model
    (the caller keeps it: the traced function only holds weak references to its variables)."""
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3), classifier_activation=None)
    calibrate_batch_norm(model, (2, size, size, 3))
    spec = tf.TensorSpec([1, size, size, 3], tf.float32)
    function = tf.function(lambda images: model(images, training=False), input_signature=[spec])
    return function.get_concrete_function(), model


def kernel_profile(scheduled: tvm.IRModule, target: tvm.target.Target) -> KernelProfile:
    """A timed VM of the scheduled module on random inputs, warmed up by one call."""
    rng = np.random.default_rng(1)
    inputs = [tvm.runtime.tensor(rng.standard_normal([int(d) for d in p.ty.shape.values]).astype("float32"))
              for p in scheduled["main"].params]
    profile = KernelProfile(compile_cpu(scheduled, target), inputs)
    profile.call()
    profile.reset()
    return profile


def print_profiles(relax_mod: tvm.IRModule, variants: dict[str, bench.Schedule], targets: list[str], calls: int,
                   top: int) -> None:
    """Each variant's and target's kernels, slowest first, timed in interleaved calls (a change of
    load hits every build alike), with the rule that scheduled each (`compiler/bench/profile.py`)."""
    host = host_cpu_target()
    built = {}
    for target_name in targets:
        target = tvm.target.Target({**host, **bench.TARGETS[target_name]})
        for name, schedule in variants.items():
            scheduled = schedule(relax_mod, target)
            records = {entry["kernel"]: KernelRecord(**entry) for entry in schedules.kernel_table(scheduled)}
            built[f"{name}/{target_name}"] = (kernel_profile(scheduled, target), records)
    times: dict[str, list[float]] = {label: [] for label in built}
    for _ in range(calls):
        for label, (profile, _) in built.items():
            started = time.perf_counter()
            profile.call()
            times[label].append(time.perf_counter() - started)
    for label, (profile, records) in built.items():
        table = FunctionProfile(label, [], "tvm", statistics.median(times[label]) * 1e3, calls, profile.kernels(records))
        print("\n" + markdown(table, top))


def export_builds(concrete: Any, variants: dict[str, bench.Schedule], targets: list[str], folder: Path,
                  model: str) -> None:
    """Build each variant for each target as `tfcheck build` compiles, and export the library."""
    relax_mod = bench.import_flatbuffer(bench.to_tflite(bench.freeze(concrete)))
    folder.mkdir(parents=True, exist_ok=True)
    for target_name in targets:
        target = tvm.target.Target({**host_cpu_target(), **bench.TARGETS[target_name]})
        for name, schedule in variants.items():
            path = folder / f"{model}-{name}-{target_name}.so"
            compile_cpu(schedule(relax_mod, target), target).export_library(str(path))
            print(f"exported {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a keras.applications name, e.g. DenseNet121")
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=3, help="calls per round")
    parser.add_argument("--variants", default="default", help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--targets", help="comma-separated, of avx512, avx2 (default avx512; none with --libs)")
    parser.add_argument("--export", type=Path, help="write each variant's and target's library here instead")
    parser.add_argument("--libs", help="NAME=PATH,...: exported libraries to time beside TFLite and tf.function")
    parser.add_argument("--thread-cpu", action="store_true",
                        help="thread CPU time, TVM and TFLite on one thread, no tf.function (TVM_NUM_THREADS=1)")
    parser.add_argument("--kernels", action="store_true", help="rank each variant's and target's kernels instead")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    tf = import_tensorflow()
    import keras

    concrete, _model = application(tf, keras, args.model, args.size)
    print(f"load before: {os.getloadavg()[0]:.2f}, TVM threads: {bench.THREADS}, TFLite threads: {bench.THREADS}")
    variants = {name: VARIANTS[name] for name in args.variants.split(",")}
    targets = args.targets.split(",") if args.targets else [] if args.libs else ["avx512"]
    if args.export:
        export_builds(concrete, variants, targets, args.export, args.model)
    elif args.kernels:
        relax_mod = bench.import_flatbuffer(bench.to_tflite(bench.freeze(concrete)))
        print_profiles(relax_mod, variants, targets, args.calls, args.top)
    else:
        libraries = dict(item.split("=", 1) for item in args.libs.split(",")) if args.libs else {}
        clock = bench.thread_cpu_clock(parser, args.thread_cpu)
        times, error = bench.bench_function(tf, concrete, variants, targets, args.rounds, args.calls,
                                            (1,) if args.thread_cpu else (bench.THREADS,), clock,
                                            time_tf_function=not args.thread_cpu, libraries=libraries)
        theirs = [next(name for name in times if name.startswith("tflite"))] + ([] if args.thread_cpu else ["tf.function"])
        columns = theirs + [f"{v}/{t}" for t in targets for v in variants] + list(libraries)
        print("| model | " + " | ".join(columns) + " | max abs err |\n|---|" + "---:|" * (len(columns) + 1))
        print(f"| {args.model} | " + " | ".join(f"{times[c] / 1e3:.2f} ms" for c in columns) + f" | {error:.1e} |")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
