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

The output width is the register tile's rows, and tiles divide it too: a prime width (InceptionV3's
17x17 and 71x71 maps) got a tile of one row, so every weight vector loaded fed one FMA. Such a
convolution gets extra zero padding on the right of its input, enough for `tiling.padded_rows`
output columns (18 for 17: two tiles of 9 rows), and its output sliced back the same way.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.target import Target

from . import target as cpu
from .tiling import max_rows, padded_rows

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
    """Rewrites `conv2d(x, W)` (NHWC, HWIO, constant W, no groups) into `conv2d(x, pad(W))[..., :N]`,
    and a convolution of an awkward output width `Wo` into one of more columns sliced to `[:, :, :Wo]`."""

    def __init__(self, mod: tvm.IRModule, lanes: int, rows: int) -> None:
        super().__init__(mod)
        self.lanes = lanes
        self.rows = rows

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
        width = _static_width(self.builder_.normalize(call))
        if kernel.dtype != np.float32 or width is None:
            return call
        channels = kernel.shape[-1]
        padded = padded_channels(channels, self.lanes)
        columns = padded_rows(width, self.rows) if width > 1 else width
        if (padded, columns) == (channels, width):
            return call
        wide = np.pad(kernel, [(0, 0)] * (kernel.ndim - 1) + [(0, padded - channels)])
        top, left, bottom, right = (int(p) for p in attrs.padding)
        right += (columns - width) * int(attrs.strides[1])
        convolution = self.builder_.emit(relax.op.nn.conv2d(
            data, relax.const(wide), attrs.strides, [top, left, bottom, right], attrs.dilation, attrs.groups,
            attrs.data_layout, attrs.kernel_layout, attrs.out_layout, attrs.out_dtype))
        return relax.op.strided_slice(convolution, axes=[2, 3], begin=[0, 0], end=[width, channels])


def _static_width(call: relax.Call) -> int | None:
    """The output width of a convolution, or None when it is not a constant."""
    shape = getattr(call.ty, "shape", None)
    value = shape.values[2] if shape is not None and len(shape.values) == 4 else None
    return int(value.value) if isinstance(value, tvm.tirx.IntImm) else None


def pad_output_channels(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """Every Relax function of `mod` with its narrow-vector and awkward-width convolutions padded
    (see the module)."""
    padder = _ChannelPadder(mod, cpu.vector_lanes(target, 32), max_rows(cpu.vector_registers(target)))
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            padder.builder_.update_func(gvar, padder.visit_expr(func))
    return padder.builder_.get()
