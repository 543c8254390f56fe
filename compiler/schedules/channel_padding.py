"""Pad the output channels of convolutions to whole hardware vectors (a Relax rewrite before legalisation).

The micro-kernel's tiles divide the output-channel extent (`tiling.py`), so an extent that whole
vectors do not divide runs on narrower vectors: Xception's 1x1 convolutions over 728 channels
(728 = 8 x 91) ran on 8-wide vectors with AVX-512, at half the machine's width, 1.96 ms for the
14x14 map where the same convolution with 736 output channels took 0.91 ms. A convolution with
constant weights whose output channels are not a multiple of the lanes gets its weights padded
with zero filters up to the next multiple, and its output sliced back to the real channels: the
slice is a copy, fused with the bias and activation that follow, and costs far less than the
narrow vectors did. Only extents of at least `MIN_VECTORS` vectors are padded, so the padding adds
at most 1/8 of the work.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.target import Target

from . import target as cpu

# The fewest whole vectors of output channels worth padding (below, the extra work outweighs the gain).
MIN_VECTORS = 8


def padded_channels(channels: int, lanes: int) -> int:
    """The output channels to compute: the next multiple of `lanes`, or `channels` when it already
    is one or is too narrow for padding to pay."""
    if lanes <= 1 or channels % lanes == 0 or channels < MIN_VECTORS * lanes:
        return channels
    return -(-channels // lanes) * lanes


@relax.expr_functor.mutator
class _ChannelPadder(relax.PyExprMutator):
    """Rewrites `conv2d(x, W)` (NHWC, HWIO, constant W, no groups) into `conv2d(x, pad(W))[..., :N]`."""

    def __init__(self, mod: tvm.IRModule, lanes: int) -> None:
        super().__init__(mod)
        self.lanes = lanes

    def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: N802 - TVM's visitor name
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op) or call.op.name != "relax.nn.conv2d":
            return call
        data, weight = call.args
        attrs = call.attrs
        if (not isinstance(weight, tvm.ir.expr.Constant) or attrs.groups != 1 or attrs.data_layout != "NHWC"
                or attrs.kernel_layout != "HWIO" or attrs.out_layout != "NHWC"):
            return call
        kernel = weight.value.numpy()
        if kernel.dtype != np.float32:
            return call
        channels = kernel.shape[-1]
        padded = padded_channels(channels, self.lanes)
        if padded == channels:
            return call
        wide = np.pad(kernel, [(0, 0)] * (kernel.ndim - 1) + [(0, padded - channels)])
        convolution = self.builder_.emit(relax.op.nn.conv2d(
            data, relax.const(wide), attrs.strides, attrs.padding, attrs.dilation, attrs.groups,
            attrs.data_layout, attrs.kernel_layout, attrs.out_layout, attrs.out_dtype))
        return relax.op.strided_slice(convolution, axes=[3], begin=[0], end=[channels])


def pad_output_channels(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """Every Relax function of `mod` with its narrow-vector convolutions padded (see the module)."""
    lanes = cpu.vector_lanes(target, 32)
    padder = _ChannelPadder(mod, lanes)
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            padder.builder_.update_func(gvar, padder.visit_expr(func))
    return padder.builder_.get()
