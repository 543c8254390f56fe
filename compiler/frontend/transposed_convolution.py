"""Transposed convolutions as ordinary convolutions over a zero-dilated input.

TVM 0.27 lowers `conv2d_transpose` and `conv3d_transpose` only in NCHW/NCDHW, through TOPI
kernels that the default CPU schedules do not recognise as convolutions: the coverage sweep's
`Conv3DTranspose(8, 3, strides=2)` on a 1x4x8x8x4 input took 957 us on one thread (TFLite 27 us,
`tf.function` 217 us: 2.2x slower than TensorFlow), a `Conv2DTranspose(8, 4, strides=2)` 570 us.
A transposed convolution is the convolution of the input spread out by the stride (zeros between
the elements), padded by the kernel's extent less the padding, with the kernel flipped in space
and its channel axes swapped:

    conv_transpose(x, W)[o] = conv(pad(dilate(x, s), d*(k-1) - p, d*(k-1) - p' + op), flip(W)^T)

which runs on the NHWC convolution schedules of `compiler/schedules/` (packed weights, register
tiles). The zeros cost multiplications (3/4 of them for a 2-D stride of 2, 7/8 in 3-D), which
those schedules make up for many times over. The rewrite takes the frontend's forms (NHWC data,
IOHW kernel; NDHWC, DHWOI) with one group, static channels and kernel (the batch and the spatial
sizes may be symbolic); anything else keeps TVM's lowering (`importer._lowerable_transposed_convolutions`).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import relax

from tfcheck.compiler.schedules.rewrites.channel_padding import static_shape

# Transposed convolution -> (its data layout, the convolution that replaces it, that one's kernel
# layout); the transposed one's kernel may come in any order of the same axes (the frontend gives
# IOHW in 2-D, DHWOI in 3-D).
_FORMS = {
    "relax.nn.conv2d_transpose": ("NHWC", relax.op.nn.conv2d, "HWIO"),
    "relax.nn.conv3d_transpose": ("NDHWC", relax.op.nn.conv3d, "DHWIO"),
}


@relax.expr_functor.mutator
class _AsConvolution(relax.PyExprMutator):
    """Rewrites each transposed convolution it can (see the module) into dilate, pad, convolve."""

    def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: N802 - TVM's visitor name
        call = super().visit_call_(call)
        name = call.op.name if isinstance(call.op, tvm.ir.Op) else None
        form = _FORMS.get(name)
        if form is None:
            return call
        layout, convolve, kernel_layout = form
        data, weight = call.args
        shape, kernel = _shape_with_channels(data), static_shape(weight)
        attrs = call.attrs
        if (shape is None or kernel is None or attrs.groups != 1 or attrs.data_layout != layout
                or attrs.out_layout != layout or sorted(attrs.kernel_layout) != sorted(kernel_layout)):
            return call
        spatial = len(shape) - 2
        given = str(attrs.kernel_layout)
        sizes = [kernel[given.index(axis)] for axis in kernel_layout[:spatial]]
        padded = self._pad(self._spread(data, shape, [int(s) for s in attrs.strides]), shape, sizes, attrs)
        flipped = weight
        for axis in kernel_layout[:spatial]:
            flipped = self.builder_.emit(relax.op.flip(flipped, given.index(axis)))
        # The transposed convolution's I (its input channels) is the convolution's I, its O the O.
        ordered = self.builder_.emit(relax.op.permute_dims(flipped, [given.index(axis) for axis in kernel_layout]))
        return convolve(padded, ordered, strides=[1] * spatial, padding=[0] * (2 * spatial),
                        dilation=[int(d) for d in attrs.dilation], groups=1, data_layout=layout,
                        kernel_layout=kernel_layout, out_layout=layout, out_dtype=attrs.out_dtype)

    def _spread(self, data: relax.Expr, shape: tuple[Any, ...], strides: list[int]) -> relax.Expr:
        """`data` [N, S..., C] with `stride - 1` zeros after each element along each spatial
        axis, the trailing zeros included ([N, S*s..., C]): a reshape that gives each spatial
        axis a unit axis after it, a pad of those to the stride, and a reshape back."""
        if all(s == 1 for s in strides):
            return data
        spatial = shape[1:-1]
        unit = [shape[0], *(n for size in spatial for n in (size, 1)), shape[-1]]
        widths = [0, 0, *(w for s in strides for w in (0, 0, 0, s - 1)), 0, 0]
        spread = self.builder_.emit(relax.op.nn.pad(self.builder_.emit(relax.op.reshape(data, unit)), widths))
        return self.builder_.emit(relax.op.reshape(spread, [shape[0], *(n * s for n, s in zip(spatial, strides)),
                                                            shape[-1]]))

    def _pad(self, spread: relax.Expr, shape: tuple[Any, ...], kernel: list[int], attrs: Any) -> relax.Expr:
        """The spread input padded for a stride-1 convolution that gives the transposed one's
        output; a negative pad (more padding than the kernel's extent) is a crop."""
        spatial = len(kernel)
        strides = [int(s) for s in attrs.strides]
        begins = [int(p) for p in attrs.padding[:spatial]]
        ends = [int(p) for p in attrs.padding[spatial:]]
        extra = [int(p) for p in attrs.output_padding] or [0] * spatial
        before, after = [], []
        for axis in range(spatial):
            reach = int(attrs.dilation[axis]) * (kernel[axis] - 1)
            before.append(reach - begins[axis])
            # `_spread` already put stride - 1 zeros after the last element.
            after.append(reach - ends[axis] + extra[axis] - (strides[axis] - 1))
        if any(w > 0 for w in before + after):
            widths = [0, 0, *(w for b, a in zip(before, after) for w in (max(b, 0), max(a, 0))), 0, 0]
            spread = self.builder_.emit(relax.op.nn.pad(spread, widths))
        if all(w >= 0 for w in before + after):
            return spread
        sizes = [n * s + max(b, 0) + max(a, 0) for n, s, b, a in zip(shape[1:-1], strides, before, after)]
        return self.builder_.emit(relax.op.strided_slice(
            spread, axes=list(range(1, 1 + spatial)), begin=[max(-b, 0) for b in before],
            end=[size - max(-a, 0) for size, a in zip(sizes, after)]))


def _shape_with_channels(expr: relax.Expr) -> tuple[Any, ...] | None:
    """The shape of a channels-last tensor expression, its batch and spatial sizes as they are,
    constant or symbolic (a `Conv2DTranspose` over an unknown batch or an image of any size: the
    spread's reshapes and the padding carry them), its channels as an int; None unless those are
    a constant."""
    values = getattr(getattr(expr.ty, "shape", None), "values", None)
    if not values or not isinstance(values[-1], tvm.tirx.IntImm):
        return None
    return (*(int(value.value) if isinstance(value, tvm.tirx.IntImm) else value for value in values[:-1]),
            int(values[-1].value))


def as_convolutions(mod: tvm.IRModule) -> tvm.IRModule:
    """`mod` with its transposed convolutions rewritten as convolutions where the module says."""
    rewriter = _AsConvolution(mod)
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            rewriter.builder_.update_func(gvar, rewriter.visit_expr(func))
    return rewriter.builder_.get()


def has_transposed_convolutions(mod: tvm.IRModule) -> bool:
    """Whether any Relax function of `mod` still calls a transposed convolution."""
    found = []

    @relax.expr_functor.visitor
    class _Finder(relax.PyExprVisitor):
        def visit_call_(self, call: relax.Call) -> None:  # noqa: N802 - TVM's visitor name
            super().visit_call_(call)
            if isinstance(call.op, tvm.ir.Op) and call.op.name in _FORMS:
                found.append(call)

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            _Finder().visit_expr(func)
    return bool(found)
