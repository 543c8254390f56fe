"""MobileNetV2's depthwise layers one by one: the default build against TFLite+XNNPACK and tf.function.

MobileNetV2's default build trailed TFLite+XNNPACK by about 1.6x (docs/benchmarks.md), most of it
in the depthwise 3x3 convolutions. This script times each distinct depthwise layer of
``keras.applications.MobileNetV2`` (``weights=None``, batch 1, 224x224) alone, as the model has
it: ``ZeroPadding2D`` before the stride-2 layers, ``DepthwiseConv2D``, ``BatchNormalization`` and
``ReLU(6)``, traced as a tf.function, frozen and converted to TFLite (which folds the batch norm
into the depthwise weights and bias), then imported into Relax and compiled the way
``tfcheck build`` does (``compiler/frontend/importer.py``, ``apply_default_schedules``, ``tvm.compile``).

The backends of one layer are timed interleaved in this one process (the machine is shared:
rounds of calls alternate between backends, each round starting with the next one, the best round
counts), TVM with one thread per core
and TFLite with ``num_threads=2``:

    .venv/bin/python benchmarks/depthwise_kernels.py [--rounds 15] [--calls 20] [--layers 0,3]
        [--variants default,contraction,serial] [--targets avx512,avx2] [--whole-model]

``--whole-model`` times the whole MobileNetV2 the same way (one build per variant and target).

Variants are scheduling steps (``VARIANTS``: the default, or other schedule rule lists); the AVX2 target is the host's target with
``mcpu=znver3`` (8-float vectors, 16 registers), which runs on an AVX-512 CPU too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.runtime.threads import use_all_cores

THREADS = use_all_cores()  # before TVM's thread pool starts

import tvm  # noqa: E402
from tvm import relax, s_tir, tirx  # noqa: E402

from tfcheck.compiler.frontend.importer import import_tflite  # noqa: E402
from tfcheck.compiler.schedules import apply as schedules  # noqa: E402
from tfcheck.compiler.schedules.rules import depthwise  # noqa: E402
from tfcheck.compiler.build.targets import host_cpu_target  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, import_tensorflow, to_tflite  # noqa: E402


def schedule_depthwise_serial(func: tirx.PrimFunc, target: tvm.target.Target) -> s_tir.Schedule | None:
    """The depthwise rule with its tiles on one core (the default until 2026-11-28)."""
    return depthwise.schedule_depthwise(func, target, replace(depthwise.DEPTHWISE, parallel=False))


# A build's scheduling step: `apply_default_schedules` or a variant of it (relax module, target -> scheduled).
Schedule = Callable[[tvm.IRModule, tvm.target.Target], tvm.IRModule]


def with_rules(rules: tuple[schedules.Rule, ...]) -> Schedule:
    """`apply_default_schedules` with ``rules`` as the schedule rules."""
    def schedule(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
        saved = schedules.RULES
        schedules.RULES = rules
        try:
            return schedules.apply_default_schedules(mod, target)
        finally:
            schedules.RULES = saved

    return schedule


_OTHER_RULES = tuple(rule for rule in schedules.RULES if rule is not depthwise.schedule_depthwise)
# Schedule rules to compare: the default; without the depthwise rule (the contraction rule's
# kernel, as before issue 17); the depthwise rule on one core.
VARIANTS: dict[str, Schedule] = {
    "default": schedules.apply_default_schedules,
    "contraction": with_rules(_OTHER_RULES),
    "serial": with_rules((schedule_depthwise_serial, *_OTHER_RULES)),
}
TARGETS = {"avx512": {}, "avx2": {"mcpu": "znver3"}}


@dataclass(frozen=True)
class Layer:
    """One distinct depthwise layer of MobileNetV2: its input, stride, and how often the model has it."""

    height: int
    width: int
    channels: int
    stride: int
    zero_pad: bool  # a ZeroPadding2D((0, 1), (0, 1)) before a 'valid' depthwise (the stride-2 layers)
    count: int

    def label(self) -> str:
        pad = "pad+" if self.zero_pad else ""
        return f"{pad}{self.height}x{self.width}x{self.channels} s{self.stride}"


def distinct_layers(layer_type: Callable[..., Any], keys: Iterable[tuple]) -> list[Any]:
    """One ``layer_type(*key, count)`` per distinct key, in the order first seen, ``count`` the
    times it came (the layers of a model that a benchmark times once each)."""
    return [layer_type(*key, count) for key, count in Counter(keys).items()]


def mobilenet_layers(keras: Any) -> list[Layer]:
    """The distinct depthwise layers of Keras' MobileNetV2 (the Keras model only, nothing compiled)."""
    model = keras.applications.MobileNetV2(weights=None)

    def key(index: int, layer: Any) -> tuple[int, int, int, int, bool]:
        padded = isinstance(model.layers[index - 1], keras.layers.ZeroPadding2D)
        _, height, width, channels = (model.layers[index - 1].input if padded else layer.input).shape
        return height, width, channels, layer.strides[0], padded

    return distinct_layers(Layer, (key(index, layer) for index, layer in enumerate(model.layers)
                                   if isinstance(layer, keras.layers.DepthwiseConv2D)))


def layer_function(tf: Any, keras: Any, layer: Layer) -> Any:
    """The layer as a traced tf.function with random weights and batch-norm statistics."""
    rng = np.random.default_rng(0)
    inputs = keras.Input((layer.height, layer.width, layer.channels), batch_size=1)
    x = keras.layers.ZeroPadding2D(((0, 1), (0, 1)))(inputs) if layer.zero_pad else inputs
    conv = keras.layers.DepthwiseConv2D(3, strides=layer.stride, padding="valid" if layer.zero_pad else "same",
                                        use_bias=False)
    norm = keras.layers.BatchNormalization(epsilon=1e-3)
    outputs = keras.layers.ReLU(6.0)(norm(conv(x)))
    model = keras.Model(inputs, outputs)
    conv.set_weights([rng.standard_normal(w.shape).astype(np.float32) for w in conv.get_weights()])
    gamma, beta, mean, var = (rng.standard_normal(layer.channels).astype(np.float32) for _ in range(4))
    norm.set_weights([gamma, beta, mean, np.abs(var) + 0.5])
    spec = tf.TensorSpec([1, layer.height, layer.width, layer.channels], tf.float32)
    return tf.function(lambda images: model(images, training=False), input_signature=[spec]).get_concrete_function()


def tvm_call(relax_mod: tvm.IRModule, schedule: Schedule, target: tvm.target.Target,
             inputs: list[np.ndarray]) -> Callable[[], np.ndarray]:
    """Build the module as `tfcheck build` does, scheduled by ``schedule``; a call."""
    vm = relax.VirtualMachine(tvm.compile(schedule(relax_mod, target), target=target), tvm.cpu())
    data = [tvm.runtime.tensor(x) for x in inputs]
    return lambda: vm["main"](*data).numpy()


def library_call(path: str, inputs: list[np.ndarray]) -> Callable[[], np.ndarray]:
    """A build exported with ``export_library`` (another commit's, say: `app_kernels.py --export`), loaded
    into a VM; a call."""
    vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    data = [tvm.runtime.tensor(x) for x in inputs]
    return lambda: vm["main"](*data).numpy()


def tflite_call(tf: Any, flatbuffer: bytes, inputs: list[np.ndarray], threads: int = THREADS) -> Callable[[], np.ndarray]:
    """TFLite's interpreter with its default XNNPACK delegate on ``threads`` threads (inputs in signature order)."""
    interpreter = tf.lite.Interpreter(model_content=flatbuffer, num_threads=threads)
    interpreter.allocate_tensors()
    [taken] = interpreter.get_output_details()
    # The converter keeps the tf.function's arguments in order; their tensor indices follow it.
    given = sorted(interpreter.get_input_details(), key=lambda detail: detail["index"])

    def run() -> np.ndarray:
        for detail, x in zip(given, inputs):
            interpreter.set_tensor(detail["index"], x)
        interpreter.invoke()
        return interpreter.get_tensor(taken["index"])

    return run


def interleaved_us(calls: dict[str, Callable[[], Any]], rounds: int, per_round: int,
                   clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Best per-call time (us, wall time unless ``clock`` says otherwise) over ``rounds`` rounds of
    ``per_round`` calls, backends alternating.

    Each round starts one backend further along: in a fixed order the backend timed right after
    the tf.function ran 14-66% slower than the same kernel timed later in the round (TensorFlow's
    threads still busy, presumably), which decided comparisons between TVM variants
    (docs/schedules.md).
    """
    for call in calls.values():
        call()
    best = {name: float("inf") for name in calls}
    names = list(calls)
    for index in range(rounds):
        first = index % len(names)
        for name in names[first:] + names[:first]:
            call = calls[name]
            start = clock()
            for _ in range(per_round):
                call()
            best[name] = min(best[name], (clock() - start) / per_round * 1e6)
    return best


def import_flatbuffer(flatbuffer: bytes) -> tvm.IRModule:
    """The Relax module `tfcheck build` imports from a TFLite flatbuffer."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.tflite"
        path.write_bytes(flatbuffer)
        return import_tflite(path)


def bench_function(tf: Any, concrete: Any, variants: dict[str, Schedule], targets: list[str], rounds: int,
                   per_round: int, tflite_threads: tuple[int, ...] = (THREADS,),
                   clock: Callable[[], float] = time.perf_counter,
                   time_tf_function: bool = True,
                   libraries: dict[str, str] | None = None) -> tuple[dict[str, float], float]:
    """Times of every backend for one traced function of float32 inputs, and the largest
    difference of a TVM build from TensorFlow; ``variants`` names the scheduling steps to build
    with (one TVM build per variant and target), ``libraries`` exported builds to time beside them
    (column name -> path). TFLite's columns are ``tflite`` for ``THREADS`` threads, ``tflite/N``
    for other counts."""
    flatbuffer = to_tflite(freeze(concrete))
    relax_mod = import_flatbuffer(flatbuffer)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal([int(d) for d in spec.shape]).astype(np.float32)
              for spec in concrete.structured_input_signature[0]]
    tensors = [tf.constant(x) for x in inputs]
    calls: dict[str, Callable[[], Any]] = {
        "tflite" if threads == THREADS else f"tflite/{threads}": tflite_call(tf, flatbuffer, inputs, threads)
        for threads in tflite_threads}
    if time_tf_function:
        calls["tf.function"] = lambda: concrete(*tensors)
    host = host_cpu_target()
    for name in targets:
        target = tvm.target.Target({**host, **TARGETS[name]})
        for variant, schedule in variants.items():
            calls[f"{variant}/{name}"] = tvm_call(relax_mod, schedule, target, inputs)
    for name, path in (libraries or {}).items():
        calls[name] = library_call(path, inputs)
    expected = concrete(*tensors).numpy()
    built = [f"{v}/{t}" for v in variants for t in targets] + list(libraries or {})
    error = max(float(np.max(np.abs(calls[name]() - expected))) for name in built)
    return interleaved_us(calls, rounds, per_round, clock), error


def whole_model(tf: Any, keras: Any) -> Any:
    """MobileNetV2 with random weights and its softmax (as `benchmarks/compiled/imagenet_models.py` had it
    before it returned calibrated logits: the figures of docs/schedules.md were taken so), traced."""
    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(weights=None)
    spec = tf.TensorSpec([1, 224, 224, 3], tf.float32)
    return tf.function(lambda images: model(images, training=False), input_signature=[spec]).get_concrete_function()


def thread_cpu_clock(parser: argparse.ArgumentParser, thread_cpu: bool) -> Callable[[], float]:
    """The clock of ``--thread-cpu``: the calling thread's CPU time, which leaves out the waits for a
    core that other jobs cause, and counts all of TVM's work only on one thread (TVM_NUM_THREADS=1);
    wall time otherwise."""
    if thread_cpu and THREADS != 1:
        parser.error("--thread-cpu needs TVM_NUM_THREADS=1: TVM's other threads' time would not be counted")
    return time.thread_time if thread_cpu else time.perf_counter


def arguments(description: str, variants: str) -> argparse.ArgumentParser:
    """The options of the per-layer benchmarks (this one and ``pointwise_kernels.py``)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20, help="calls per round")
    parser.add_argument("--layers", help="comma-separated indices into the layer list (default: all)")
    parser.add_argument("--whole-model", action="store_true", help="time the whole MobileNetV2 instead")
    parser.add_argument("--variants", default=variants)
    parser.add_argument("--targets", default="avx512,avx2")
    return parser


def run_layers(description: str, default_variants: str, all_variants: dict[str, Schedule],
               layers_of: Callable[[Any], list[Any]], function_of: Callable[[Any, Any, Any], Any]) -> None:
    """The command line of the per-layer benchmarks (this one and ``expansion_kernels.py``): each
    layer ``layers_of(keras)`` finds, traced by ``function_of(tf, keras, layer)``, or the whole
    model, timed with the chosen variants and targets."""
    args = arguments(description, default_variants).parse_args()
    tf = import_tensorflow()
    import keras

    variants = {name: all_variants[name] for name in args.variants.split(",")}
    targets = args.targets.split(",")
    print(f"load before: {os.getloadavg()[0]:.2f}, TVM threads: {THREADS}, TFLite threads: {THREADS}")
    columns = ["tflite", "tf.function"] + [f"{v}/{t}" for t in targets for v in variants]

    def bench_one(concrete: Any) -> tuple[dict[str, float], float]:
        return bench_function(tf, concrete, variants, targets, args.rounds, args.calls)

    layers = [] if args.whole_model else layers_of(keras)
    if args.layers:
        layers = [layers[int(i)] for i in args.layers.split(",")]
    print_table(columns, bench_one, whole_model(tf, keras) if args.whole_model else None,
                ((layer, function_of(tf, keras, layer)) for layer in layers))


def main() -> None:
    run_layers(__doc__, "default,contraction,serial", VARIANTS, mobilenet_layers, layer_function)


def print_table(columns: list[str], bench_one: Callable[[Any], tuple[dict[str, float], float]], whole: Any | None,
                layers: Iterable[tuple[Any, Any]]) -> None:
    """Time the traced whole model (``whole``, in ms) or each traced layer (in us; a layer has a
    ``label()`` and a ``count`` in the model) with ``bench_one``, printing a Markdown row as each is
    done, then the sum over the model's layers. ``layers`` is traced lazily: a concrete function
    outlives its Keras model's variables only while the model is referenced."""
    print("| layer | in model | " + " | ".join(columns) + " | max abs err |")
    print("|---|---:|" + "---:|" * (len(columns) + 1))
    if whole is not None:
        times, error = bench_one(whole)
        print("| MobileNetV2 | 1x | " + " | ".join(f"{times[c] / 1e3:.2f} ms" for c in columns) + f" | {error:.1e} |")
    else:
        totals = {name: 0.0 for name in columns}
        count = 0
        for layer, concrete in layers:
            count += layer.count
            times, error = bench_one(concrete)
            for name in columns:
                totals[name] += times[name] * layer.count
            print(f"| {layer.label()} | {layer.count}x | " + " | ".join(f"{times[c]:.1f} us" for c in columns)
                  + f" | {error:.1e} |", flush=True)
        print(f"| **sum over the model's layers** | {count} | "
              + " | ".join(f"{totals[c]:.0f} us" for c in columns) + " | |")
    print(f"load after: {os.getloadavg()[0]:.2f}")

if __name__ == "__main__":
    main()
