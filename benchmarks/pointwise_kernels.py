"""MobileNetV2's 1x1 (pointwise) convolutions one by one: the default build against TFLite+XNNPACK.

With the depthwise rule, what MobileNetV2's default build still lost to TFLite+XNNPACK was its 1x1
convolutions at batch 1 (docs/schedules.md, "Depthwise convolutions"). This script times each
distinct 1x1 convolution of ``keras.applications.MobileNetV2`` (``weights=None``, batch 1,
224x224) alone, as the model has it: ``Conv2D`` (no bias), ``BatchNormalization``, then ``ReLU(6)``
(the expansions and the last 1x1 convolution), the residual ``Add`` (a projection whose block
keeps its shape; the block's input is a second argument) or nothing (the other projections). Each
is traced, frozen, converted to TFLite and compiled as ``tfcheck build`` does, with the machinery
of ``benchmarks/depthwise_kernels.py``; all backends of a layer are timed interleaved in this one
process. TFLite runs with XNNPACK on 1 and on 2 threads, TVM on one thread per core (set
``TVM_NUM_THREADS=1`` for one):

    .venv/bin/python benchmarks/pointwise_kernels.py [--rounds 15] [--calls 20] [--layers 0,3]
        [--variants default,before] [--targets avx512,avx2] [--whole-model] [--thread-cpu]

``--thread-cpu`` (with ``TVM_NUM_THREADS=1``) times the calling thread's CPU time instead of wall
time, TFLite on one thread only: both then run every kernel in the calling thread, so the figures
leave out the waits for a core that other jobs cause. On this shared 2-core machine at load 5,
best-of wall times favoured the faster backends (a shorter round more often runs undisturbed).

Variants: ``default`` (the rules as they are) and ``before``, the contraction rule with the
register tile it chose before issue 17's 1x1 work (``previous_register_tile``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

import depthwise_kernels as bench  # noqa: E402 - sets the thread count before TVM starts

from tvm import s_tir, tirx  # noqa: E402
from tvm.target import Target  # noqa: E402

from tfcheck.compiler.schedules import apply as schedules, tiling  # noqa: E402
from tfcheck.compiler.schedules.rules import contraction  # noqa: E402
from tfcheck.compiler.trace.bridge import import_tensorflow  # noqa: E402


def previous_register_tile(rows_extent: int, cols_extent: int, lanes: int, registers: int) -> tuple[int, int]:
    """The register tile before this work: up to 28 (AVX-512) or 12 (AVX2) accumulators, rows up
    to half of them, then up to 4 vectors (8 for a single row), whatever the weights' registers."""
    budget = registers - 4
    rows = tiling.row_tile(rows_extent, max_rows=max(1, budget // 2))
    vectors = max(1, min(budget // rows, 8 if rows == 1 else 4))
    return rows, tiling.vector_tile(cols_extent, lanes, vectors)


def schedule_contraction_before(func: tirx.PrimFunc, target: Target) -> s_tir.Schedule | None:
    """The contraction rule with the previous register tile."""
    return contraction.schedule_contraction(func, target,
                                            replace(contraction.CONTRACTION, tile_size=previous_register_tile))


VARIANTS: dict[str, bench.Schedule] = {
    "default": schedules.apply_default_schedules,
    "before": bench.with_rules(tuple(schedule_contraction_before if rule is contraction.schedule_contraction
                                     else rule for rule in schedules.RULES)),
}
TFLITE_THREADS = (1, 2)


@dataclass(frozen=True)
class Layer:
    """One distinct 1x1 convolution of MobileNetV2, what follows it, and how often the model has it."""

    size: int  # height = width
    channels: int
    filters: int
    epilogue: str  # "relu6", "add" (residual) or "none"
    count: int

    def label(self) -> str:
        return f"{self.size}x{self.size}x{self.channels}->{self.filters} {self.epilogue}"


def _epilogue(keras: Any, model: Any, index: int) -> str:
    """What follows the batch norm after layer ``index``: ReLU6, the residual add, or nothing."""
    after = model.layers[index + 2] if index + 2 < len(model.layers) else None
    if isinstance(after, keras.layers.ReLU):
        return "relu6"
    return "add" if isinstance(after, keras.layers.Add) else "none"


def mobilenet_layers(keras: Any) -> list[Layer]:
    """The distinct 1x1 convolutions of Keras' MobileNetV2 (the Keras model only, nothing compiled)."""
    model = keras.applications.MobileNetV2(weights=None)

    def key(index: int, layer: Any) -> tuple[int, int, int, str]:
        _, size, _, channels = layer.input.shape
        return size, channels, layer.filters, _epilogue(keras, model, index)

    return bench.distinct_layers(Layer, (key(index, layer) for index, layer in enumerate(model.layers)
                                         if isinstance(layer, keras.layers.Conv2D) and tuple(layer.kernel_size) == (1, 1)
                                         and not isinstance(layer, keras.layers.DepthwiseConv2D)))


def layer_function(tf: Any, keras: Any, layer: Layer) -> Any:
    """The layer as a traced tf.function with random weights and batch-norm statistics."""
    rng = np.random.default_rng(0)
    inputs = keras.Input((layer.size, layer.size, layer.channels), batch_size=1)
    conv = keras.layers.Conv2D(layer.filters, 1, use_bias=False)
    norm = keras.layers.BatchNormalization(epsilon=1e-3)
    x = norm(conv(inputs))
    specs = [tf.TensorSpec([1, layer.size, layer.size, layer.channels], tf.float32)]
    arguments = [inputs]
    if layer.epilogue == "relu6":
        x = keras.layers.ReLU(6.0)(x)
    elif layer.epilogue == "add":
        residual = keras.Input((layer.size, layer.size, layer.filters), batch_size=1)
        x = keras.layers.Add()([x, residual])
        specs.append(tf.TensorSpec([1, layer.size, layer.size, layer.filters], tf.float32))
        arguments.append(residual)
    model = keras.Model(arguments, x)
    conv.set_weights([rng.standard_normal(w.shape).astype(np.float32) / np.sqrt(layer.channels)
                      for w in conv.get_weights()])
    gamma, beta, mean, var = (rng.standard_normal(layer.filters).astype(np.float32) for _ in range(4))
    norm.set_weights([gamma, beta, mean, np.abs(var) + 0.5])
    return tf.function(lambda *tensors: model(list(tensors) if len(tensors) > 1 else tensors[0], training=False),
                       input_signature=specs).get_concrete_function()


def main() -> None:
    parser = bench.arguments(__doc__, "default,before")
    parser.add_argument("--thread-cpu", action="store_true", help="thread CPU time, one thread (TVM_NUM_THREADS=1)")
    args = parser.parse_args()
    clock = bench.thread_cpu_clock(parser, args.thread_cpu)
    tflite_threads = (1,) if args.thread_cpu else TFLITE_THREADS
    tf = import_tensorflow()
    import keras

    variants = {name: VARIANTS[name] for name in args.variants.split(",")}
    targets = args.targets.split(",")
    print(f"load before: {os.getloadavg()[0]:.2f}, TVM threads: {bench.THREADS}")
    tflite = ["tflite" if n == bench.THREADS else f"tflite/{n}" for n in tflite_threads]
    # TensorFlow runs its kernels on threads of its own: the calling thread's CPU time says nothing
    # of them, and its threads would disturb the caches of the backends timed after it.
    columns = tflite + ([] if args.thread_cpu else ["tf.function"]) + [f"{v}/{t}" for t in targets for v in variants]

    def bench_one(concrete: Any) -> tuple[dict[str, float], float]:
        return bench.bench_function(tf, concrete, variants, targets, args.rounds, args.calls, tflite_threads, clock,
                                    time_tf_function=not args.thread_cpu)

    layers = [] if args.whole_model else mobilenet_layers(keras)
    if args.layers:
        layers = [layers[int(i)] for i in args.layers.split(",")]
    bench.print_table(columns, bench_one, bench.whole_model(tf, keras) if args.whole_model else None,
                      ((layer, layer_function(tf, keras, layer)) for layer in layers))

if __name__ == "__main__":
    main()
