"""MobileNetV2's expansions and the depthwise convolutions that read them: one fused kernel against two.

Each distinct pair of ``keras.applications.MobileNetV2`` (``weights=None``, batch 1, 224x224): a
1x1 ``Conv2D`` (no bias), ``BatchNormalization``, ``ReLU(6)``, then (stride 2) ``ZeroPadding2D``
and a 'valid' ``DepthwiseConv2D`` or (stride 1) a 'same' one, ``BatchNormalization``, ``ReLU(6)``.
Each is traced, frozen, converted to TFLite and compiled as ``tfcheck build`` does, with the
machinery of ``benchmarks/depthwise_kernels.py``; all backends of a layer are timed interleaved in
this one process, TVM on one thread per core (``TVM_NUM_THREADS=1`` for one):

    .venv/bin/python benchmarks/expansion_kernels.py [--rounds 15] [--calls 20] [--layers 0,3]
        [--variants fused,apart] [--targets avx512,avx2] [--whole-model]

Variants: ``fused`` (the default build: `compiler/schedules/rules/expansion_depthwise.py` merges the
pairs it judges worth it), ``apart`` (no pair merged), and ``fused2`` / ``apart2``, second builds of
the same, to see how much two builds of one schedule differ in one process. ``--whole-model``
times all of MobileNetV2 instead (its softmax output, as ``depthwise_kernels.py`` has it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import depthwise_kernels as bench  # noqa: E402 - sets the thread count before TVM starts

import tvm  # noqa: E402

from tfcheck.compiler.schedules import apply as schedules  # noqa: E402
from tfcheck.compiler.schedules.rules import expansion_depthwise as fusion  # noqa: E402


def schedule_apart(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """The default schedules with no expansion merged into its depthwise convolution."""
    saved = fusion.CHEAP_RECOMPUTE, fusion.MAX_RECOMPUTE
    fusion.CHEAP_RECOMPUTE = fusion.MAX_RECOMPUTE = 0.0  # no band recomputes that little: every pair stays apart
    try:
        return schedules.apply_default_schedules(mod, target)
    finally:
        fusion.CHEAP_RECOMPUTE, fusion.MAX_RECOMPUTE = saved


VARIANTS: dict[str, bench.Schedule] = {
    "fused": schedules.apply_default_schedules, "apart": schedule_apart,
    "fused2": schedules.apply_default_schedules, "apart2": schedule_apart,
}


@dataclass(frozen=True)
class Layer:
    """One distinct expansion + depthwise pair of MobileNetV2 and how often the model has it."""

    size: int  # height = width of the expansion's input
    channels: int
    expanded: int
    stride: int
    count: int

    def label(self) -> str:
        return f"{self.size}x{self.size}x{self.channels}->{self.expanded} s{self.stride}"


def mobilenet_layers(keras: Any) -> list[Layer]:
    """The distinct expansion + depthwise pairs of Keras' MobileNetV2 (the Keras model only): each
    ``block_N_depthwise`` and its ``block_N_expand`` (the first block has no expansion)."""
    model = keras.applications.MobileNetV2(weights=None)
    expansions = {layer.name: layer for layer in model.layers if layer.name.endswith("_expand")}

    def key(layer: Any, expand: Any) -> tuple[int, int, int, int]:
        _, size, _, channels = expand.input.shape
        return size, channels, expand.filters, layer.strides[0]

    return bench.distinct_layers(Layer, (key(layer, expansions[layer.name.replace("_depthwise", "_expand")])
                                         for layer in model.layers if isinstance(layer, keras.layers.DepthwiseConv2D)
                                         and layer.name.replace("_depthwise", "_expand") in expansions))


def layer_function(tf: Any, keras: Any, layer: Layer) -> Any:
    """The pair as a traced tf.function with random weights and batch-norm statistics."""
    rng = np.random.default_rng(0)
    inputs = keras.Input((layer.size, layer.size, layer.channels), batch_size=1)
    expand = keras.layers.Conv2D(layer.expanded, 1, use_bias=False)
    depthwise = keras.layers.DepthwiseConv2D(3, layer.stride, "valid" if layer.stride == 2 else "same", use_bias=False)
    norms = [keras.layers.BatchNormalization(epsilon=1e-3) for _ in range(2)]
    x = keras.layers.ReLU(6.0)(norms[0](expand(inputs)))
    if layer.stride == 2:
        x = keras.layers.ZeroPadding2D(((0, 1), (0, 1)))(x)
    model = keras.Model(inputs, keras.layers.ReLU(6.0)(norms[1](depthwise(x))))
    for conv, fan_in in ((expand, layer.channels), (depthwise, 9)):
        conv.set_weights([rng.standard_normal(w.shape).astype(np.float32) / np.sqrt(fan_in) for w in conv.get_weights()])
    for norm in norms:
        gamma, beta, mean, var = (rng.standard_normal(layer.expanded).astype(np.float32) for _ in range(4))
        norm.set_weights([gamma, beta, mean, np.abs(var) + 0.5])
    spec = tf.TensorSpec([1, layer.size, layer.size, layer.channels], tf.float32)
    return tf.function(lambda tensor: model(tensor, training=False), input_signature=[spec]).get_concrete_function()


def main() -> None:
    bench.run_layers(__doc__, "fused,apart", VARIANTS, mobilenet_layers, layer_function)


if __name__ == "__main__":
    main()
