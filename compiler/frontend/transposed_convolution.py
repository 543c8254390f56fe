"""Transposed convolutions as ordinary convolutions over the input, one output phase per channel group.

TVM 0.27 lowers `conv2d_transpose` and `conv3d_transpose` only in NCHW/NCDHW, through TOPI
kernels that the default CPU schedules do not recognise as convolutions: the coverage sweep's
`Conv3DTranspose(8, 3, strides=2)` on a 1x4x8x8x4 input took 957 us on one thread (TFLite 27 us,
`tf.function` 217 us), a `Conv2DTranspose(8, 4, strides=2)` 570 us. Each output element `o` of a
transposed convolution of stride `s` (per axis) is `o = q*s + r`: its phase `r` fixes which taps of
the kernel reach it (those `k` with `k = r + padding (mod s)`), and `q` which window of the input
they read. So all `s` phases are one ordinary convolution over the input, whose output channels
are the phases' (`s*s*O` in 2-D), followed by a depth-to-space (reshape, transpose, reshape) that
interleaves them (the sub-pixel decomposition):

    conv_transpose(x, W)[q*s + r] = conv(pad(x), V)[q, r],  V[t, r] = W[r + padding - s*(d_min + t)]

`V` has `ceil(K/s)` taps per axis, or one more (`_Axis`), so a 5x5 stride-2 kernel costs 9
multiply-adds per output instead of the 25 of a convolution over the input spread out by the stride
(zeros between its elements), which this module did before: deezer/spleeter's 2-stem U-Nets (six
5x5 stride-2 `Conv2DTranspose` each over a 512x1024 spectrogram) spent 80% of their time there,
3.5x tf.function's time in all (docs/build.md, "Users' models"). The window starts at the crop that
the padding makes, so a 'same' transposed convolution (output `N*s`) needs no crop at all, and its
convolution's width is the input's (a power of two in a U-Net) rather than one more.

The rewrite takes the frontend's forms (NHWC data, IOHW kernel; NDHWC, DHWOI) with one group,
static channels and kernel (the batch and the spatial sizes may be symbolic); anything else keeps
TVM's lowering (`importer._lowerable_transposed_convolutions`). A constant kernel (frozen weights)
is rearranged here with NumPy, so that the schedules' rewrites see a constant
(`channel_padding.py` pads only those); weights that are inputs are rearranged by Relax ops, which
`importer.bind_weights` lifts out of the inference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
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


@dataclass(frozen=True)
class _Axis:
    """One spatial axis of a transposed convolution: stride, the kernel's extent with its dilation
    (`extent`), the padding before and after and the output padding. Output element `o = q*s + r`
    sums input elements `q + d` for the window offsets `d` in [`low`, `high`]."""

    stride: int
    taps: int
    dilation: int
    before: int
    after: int
    extra: int

    @property
    def extent(self) -> int:
        return self.dilation * (self.taps - 1) + 1

    @property
    def low(self) -> int:
        return -((self.extent - 1 - self.before) // self.stride)  # ceil((before - extent + 1) / s)

    @property
    def high(self) -> int:
        return (self.stride - 1 + self.before) // self.stride

    @property
    def window(self) -> int:
        """The phase kernel's taps (with the convolution's dilation on a stride-1 axis)."""
        return self.taps if self.stride == 1 else self.high - self.low + 1

    @property
    def more(self) -> int:
        """How many more output steps (`q`) than input elements: ceil(output / s) - input."""
        return -((self.stride + self.before + self.after - self.extra - self.extent) // self.stride)

    @property
    def surplus(self) -> int:
        """How many of the depth-to-space's last elements are past the output."""
        return self.stride * (self.more + 1) - self.extent + self.before + self.after - self.extra


def _kernel_steps(given: str, kernel: tuple[int, ...], layout: str, axes: list[_Axis]) -> list[tuple[str, Any]]:
    """How the transposed convolution's kernel (laid out as `given`) becomes the convolution's
    (`layout`, its O the phases' channels, phase-major): permute to `layout`, then per axis spread
    the taps by a dilation (when strided), pad before by the window's offset and after to whole
    windows, split into (window, stride) and flip the window; last, move the strides beside O."""
    spatial = len(axes)
    order = [given.index(axis) for axis in layout]
    shape = [kernel[i] for i in order]
    steps: list[tuple[str, Any]] = [("permute", order)]
    for i, axis in enumerate(axes):
        if axis.stride == 1:
            continue
        if axis.dilation > 1:
            steps += [("reshape", [*shape[:i], axis.taps, 1, *shape[i + 1:]]),
                      ("pad", [(0, 0)] * (i + 1) + [(0, axis.dilation - 1)] + [(0, 0)] * (len(shape) - i - 1)),
                      ("reshape", [*shape[:i], axis.taps * axis.dilation, *shape[i + 1:]])]
        start = axis.before - axis.stride * axis.high  # in (-s, 0]: the window's first tap
        size = axis.taps * axis.dilation if axis.dilation > 1 else axis.taps
        widths = [(0, 0)] * len(shape)
        widths[i] = (-start, axis.window * axis.stride - size + start)
        steps.append(("pad", widths))
        shape[i] = axis.window * axis.stride
    # Split each spatial axis into (window, stride), flip the windows, and gather the strides before O.
    split = [n for axis, size in zip(axes, shape) for n in (size // axis.stride, axis.stride)] + shape[spatial:]
    strides = [axis.stride for axis in axes]
    steps += [("reshape", split), ("flip", [2 * i for i in range(spatial)]),
              ("permute", [2 * i for i in range(spatial)] + [2 * spatial] + [2 * i + 1 for i in range(spatial)]
               + [2 * spatial + 1]),
              ("reshape", [*(size // s for size, s in zip(shape, strides)), shape[spatial],
                           math.prod(strides) * shape[spatial + 1]])]
    return steps


def _numpy_kernel(kernel: np.ndarray, steps: list[tuple[str, Any]]) -> np.ndarray:
    """`_kernel_steps` applied to a constant kernel."""
    for step, value in steps:
        if step == "permute":
            kernel = np.transpose(kernel, value)
        elif step == "reshape":
            kernel = np.reshape(kernel, value)
        elif step == "flip":
            kernel = np.flip(kernel, value)
        else:
            kernel = np.pad(kernel, [(max(b, 0), max(a, 0)) for b, a in value])
            kernel = kernel[tuple(slice(max(-b, 0), n - max(-a, 0)) for (b, a), n in zip(value, kernel.shape))]
    return np.ascontiguousarray(kernel)


@relax.expr_functor.mutator
class _AsConvolution(relax.PyExprMutator):
    """Rewrites each transposed convolution it can (see the module) into one convolution of all
    its output phases and a depth-to-space."""

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
        given = str(attrs.kernel_layout)
        axes = _axes(attrs, [kernel[given.index(axis)] for axis in kernel_layout[:len(shape) - 2]])
        steps = _kernel_steps(given, kernel, kernel_layout, axes)
        phases = self._convolve(convolve, self._window(data, shape, axes), self._kernel(weight, steps), axes,
                                layout, kernel_layout, attrs.out_dtype)
        return self._interleave(phases, shape, axes, kernel[given.index("O")])

    def _kernel(self, weight: relax.Expr, steps: list[tuple[str, Any]]) -> relax.Expr:
        """The convolution's kernel: computed now from a constant, else by Relax ops."""
        if isinstance(weight, tvm.ir.expr.Constant):
            return relax.const(_numpy_kernel(weight.value.numpy(), steps))
        for step, value in steps:
            if step == "permute":
                weight = self.builder_.emit(relax.op.permute_dims(weight, value))
            elif step == "reshape":
                weight = self.builder_.emit(relax.op.reshape(weight, value))
            elif step == "flip":
                for axis in value:
                    weight = self.builder_.emit(relax.op.flip(weight, axis))
            else:
                weight = self._pad_or_crop(weight, static_shape(weight), value)
        return weight

    def _window(self, data: relax.Expr, shape: tuple[Any, ...], axes: list[_Axis]) -> relax.Expr:
        """The input padded (or cropped) so that each convolution output `q` reads the window
        [q + low, q + high] of it."""
        widths = [(0, 0), *((-axis.low, axis.more + axis.high) for axis in axes), (0, 0)]
        return self._pad_or_crop(data, shape, widths)

    def _convolve(self, convolve: Any, data: relax.Expr, kernel: relax.Expr, axes: list[_Axis], layout: str,
                  kernel_layout: str, out_dtype: str) -> relax.Expr:
        spatial = len(axes)
        return self.builder_.emit(convolve(
            data, kernel, strides=[1] * spatial, padding=[0] * (2 * spatial),
            dilation=[axis.dilation if axis.stride == 1 else 1 for axis in axes], groups=1, data_layout=layout,
            kernel_layout=kernel_layout, out_layout=layout, out_dtype=out_dtype))

    def _interleave(self, phases: relax.Expr, shape: tuple[Any, ...], axes: list[_Axis], channels: int) -> relax.Expr:
        """The phases' channels [N, Q..., s1*s2*...*O] interleaved into [N, Q1*s1, Q2*s2, ..., O]
        (depth-to-space), less the surplus past the output."""
        spatial = len(axes)
        steps = [n + axis.more for n, axis in zip(shape[1:-1], axes)]
        strides = [axis.stride for axis in axes]
        if any(s > 1 for s in strides):
            split = self.builder_.emit(relax.op.reshape(phases, [shape[0], *steps, *strides, channels]))
            order = [0, *(n for i in range(spatial) for n in (1 + i, 1 + spatial + i)), 1 + 2 * spatial]
            moved = self.builder_.emit(relax.op.permute_dims(split, order))
            phases = self.builder_.emit(relax.op.reshape(moved, [shape[0], *(q * s for q, s in zip(steps, strides)),
                                                                 channels]))
        widths = [(0, 0), *((0, -axis.surplus) for axis in axes), (0, 0)]
        full = (shape[0], *(q * s for q, s in zip(steps, strides)), channels)
        return self._pad_or_crop(phases, full, widths)

    def _pad_or_crop(self, expr: relax.Expr, shape: tuple[Any, ...], widths: list[tuple[int, int]]) -> relax.Expr:
        """`expr` padded with zeros by the positive (before, after) widths per axis and cropped
        by the negative ones; `shape` may hold symbolic sizes."""
        if any(w > 0 for pair in widths for w in pair):
            expr = self.builder_.emit(relax.op.nn.pad(expr, [max(w, 0) for pair in widths for w in pair]))
        cropped = [i for i, pair in enumerate(widths) if min(pair) < 0]
        if not cropped:
            return expr
        sizes = [n + max(b, 0) + max(a, 0) for n, (b, a) in zip(shape, widths)]
        return self.builder_.emit(relax.op.strided_slice(
            expr, axes=cropped, begin=[max(-widths[i][0], 0) for i in cropped],
            end=[sizes[i] - max(-widths[i][1], 0) for i in cropped]))


def _axes(attrs: Any, taps: list[int]) -> list[_Axis]:
    """The spatial axes of a transposed convolution's attributes, with its kernel's taps per axis."""
    spatial = len(taps)
    extra = [int(p) for p in attrs.output_padding] or [0] * spatial
    return [_Axis(stride=int(attrs.strides[i]), taps=taps[i], dilation=int(attrs.dilation[i]),
                  before=int(attrs.padding[i]), after=int(attrs.padding[spatial + i]), extra=extra[i])
            for i in range(spatial)]


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
