"""Transposed convolutions as ordinary convolutions over the input, one per output phase.

TVM 0.27 lowers `conv2d_transpose` and `conv3d_transpose` only in NCHW/NCDHW, through TOPI
kernels that the default CPU schedules do not recognise as convolutions: the coverage sweep's
`Conv3DTranspose(8, 3, strides=2)` on a 1x4x8x8x4 input took 957 us on one thread (TFLite 27 us,
`tf.function` 217 us), a `Conv2DTranspose(8, 4, strides=2)` 570 us. Each output element `o` of a
transposed convolution of stride `s` (per axis) is `o = q*s + r`: its phase `r` fixes which taps of
the kernel reach it (those `k = r + padding (mod s)`), and `q` which window of the input they
read. So each phase is an ordinary convolution over the input with those taps alone, and a
depth-to-space (concatenate, reshape, transpose, reshape) interleaves the phases' outputs (the
sub-pixel decomposition):

    conv_transpose(x, W)[q*s + r] = conv(x, V_r, padding_r)[q],   V_r[t] = W[r + padding - s*(low_r + t)]

A 5x5 stride-2 kernel's four phases have 3x3, 3x2, 2x3 and 2x2 taps: 6.25 multiply-adds per
output, where a convolution over the input spread out by the stride (zeros between its elements),
which this module did before, took 25: deezer/spleeter's 2-stem U-Nets (six 5x5 stride-2
`Conv2DTranspose` each over a 512x1024 spectrogram) spent 80% of their time there, 3.5x
tf.function's time in all (docs/build.md, "Users' models"). One convolution of all phases' taps
(3x3 for each, their outputs as its channels) was the other way; its zero taps made it 1.1-1.7x
slower than the phases apart (the spleeter shapes, one thread). The phases start at the crop that
the padding makes, so a 'same' transposed convolution (output `N*s`) needs no crop at all, and each
convolution's width is the input's (a power of two in a U-Net), not one more.

The rewrite takes the frontend's forms (NHWC data, IOHW kernel; NDHWC, DHWOI) with one group,
static channels and kernel (the batch and the spatial sizes may be symbolic); anything else keeps
TVM's lowering (`importer._lowerable_transposed_convolutions`). A constant kernel (frozen weights)
is cut into phases here with NumPy, so that the schedules' rewrites see constants
(`channel_padding.py` pads only those); weights that are inputs are cut by Relax ops, which
`importer.bind_weights` lifts out of the inference.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
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

# Fewer output channels than this (one AVX-512 vector of float32) and the phases are one convolution
# over the window that covers them all, their outputs its channels: spleeter's last transposed
# convolution (32 -> 1 channel, 5x5, stride 2) took 187 ms as four convolutions of one channel
# (2-2.6 GFLOP/s) and 65 ms as one of four, the zero taps included (the profile at load 11).
NARROW = 16


@dataclass(frozen=True)
class _Axis:
    """One spatial axis of a transposed convolution: stride, kernel taps, dilation, the padding
    before and after and the output padding."""

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
    def more(self) -> int:
        """How many more output steps (`q`) than input elements: ceil(output / s) - input."""
        return -((self.stride + self.before + self.after - self.extra - self.extent) // self.stride)

    @property
    def surplus(self) -> int:
        """How many of the depth-to-space's last elements are past the output."""
        return self.stride * (self.more + 1) - self.extent + self.before + self.after - self.extra

    @property
    def convolution_dilation(self) -> int:
        """A stride-1 axis keeps its dilation; a strided one's phases take the taps that reach them."""
        return self.dilation if self.stride == 1 else 1

    def window(self, r: int) -> tuple[int, int]:
        """Phase `r`'s window of the input: output `q*s + r` reads input `q + low` onwards, `span`
        taps (at least one: a zero where no tap reaches the phase)."""
        if self.stride == 1:
            return self.before - self.extent + 1, self.taps
        low = -((self.extent - 1 - r - self.before) // self.stride)  # ceil((r + before - extent + 1) / s)
        return low, max((r + self.before) // self.stride - low + 1, 1)

    def taps_of(self, r: int, low: int, span: int) -> list[int]:
        """Phase `r`'s kernel over the window (`low`, `span`): indices into the taps, `taps` for a zero."""
        if self.stride == 1:
            return list(range(self.taps - 1, -1, -1))
        spread = [r + self.before - self.stride * (low + t) for t in range(span)]
        return [k // self.dilation if 0 <= k < self.extent and k % self.dilation == 0 else self.taps for k in spread]

    def padding(self, low: int, span: int) -> tuple[int, int]:
        """The convolution's padding of the input for the window (`low`, `span`), before and after
        (negative: a crop), so that it gives `input + more` outputs."""
        return -low, self.more + low + (span - 1) * self.convolution_dilation


@relax.expr_functor.mutator
class _AsConvolution(relax.PyExprMutator):
    """Rewrites each transposed convolution it can (see the module) into one convolution per
    output phase and a depth-to-space."""

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
        base = self._base_kernel(weight, [given.index(axis) for axis in kernel_layout])
        channels = kernel[given.index("O")]
        offsets = list(itertools.product(*(range(axis.stride) for axis in axes)))
        groups = [offsets] if channels < NARROW else [[phase] for phase in offsets]
        convolution = functools.partial(convolve, groups=1, data_layout=layout, kernel_layout=kernel_layout,
                                        out_layout=layout, out_dtype=attrs.out_dtype)
        outputs = [self._phases(convolution, data, shape, base, axes, group) for group in groups]
        return self._interleave(outputs, shape, axes, channels)

    def _phases(self, convolution: Callable[..., relax.Expr], data: relax.Expr, shape: tuple[Any, ...],
                base: np.ndarray | relax.Expr, axes: list[_Axis], group: list[tuple[int, ...]]) -> relax.Expr:
        """One convolution of the phases in `group` (offsets per axis), over the window that
        covers them all, their outputs its channels in order."""
        windows = [_union([axis.window(phase[i]) for phase in group]) for i, axis in enumerate(axes)]
        pads = [axis.padding(*window) for axis, window in zip(axes, windows)]
        kernels = [self._phase_kernel(base, [axis.taps_of(phase[i], *windows[i]) for i, axis in enumerate(axes)])
                   for phase in group]
        return self.builder_.emit(convolution(
            self._cropped(data, shape, pads), self._joined(kernels), strides=[1] * len(axes),
            padding=[max(b, 0) for b, _ in pads] + [max(a, 0) for _, a in pads],
            dilation=[axis.convolution_dilation for axis in axes]))

    def _base_kernel(self, weight: relax.Expr, order: list[int]) -> np.ndarray | relax.Expr:
        """The kernel in the convolution's layout with a zero after the last tap of each spatial
        axis (what a phase's missing taps take): a NumPy array for a constant kernel."""
        spatial = len(order) - 2
        widths = [(0, 1)] * spatial + [(0, 0), (0, 0)]
        if isinstance(weight, tvm.ir.expr.Constant):
            return np.pad(np.transpose(weight.value.numpy(), order), widths)
        permuted = self.builder_.emit(relax.op.permute_dims(weight, order))
        return self.builder_.emit(relax.op.nn.pad(permuted, [w for pair in widths for w in pair]))

    def _phase_kernel(self, base: np.ndarray | relax.Expr, taps: list[list[int]]) -> np.ndarray | relax.Expr:
        """One phase's kernel: the taps of each spatial axis taken from `base`, computed now from
        a constant, else by Relax ops."""
        if isinstance(base, np.ndarray):
            for axis, indices in enumerate(taps):
                base = np.take(base, indices, axis)
            return base
        for axis, indices in enumerate(taps):
            base = self.builder_.emit(relax.op.take(base, relax.const(np.array(indices, "int64")), axis))
        return base

    def _joined(self, kernels: list[np.ndarray | relax.Expr]) -> relax.Expr:
        """Phase kernels over one window as one kernel, their output channels phase by phase."""
        if isinstance(kernels[0], np.ndarray):
            return relax.const(np.ascontiguousarray(np.concatenate(kernels, axis=-1)))
        return kernels[0] if len(kernels) == 1 else self.builder_.emit(relax.op.concat(kernels, axis=-1))

    def _cropped(self, data: relax.Expr, shape: tuple[Any, ...], pads: list[tuple[int, int]]) -> relax.Expr:
        """The input less what a convolution's padding crops (a negative padding: more padding than
        the kernel reaches); the convolution pads the rest itself."""
        return self._pad_or_crop(data, shape, [(0, 0), *((min(b, 0), min(a, 0)) for b, a in pads), (0, 0)])

    def _interleave(self, phases: list[relax.Expr], shape: tuple[Any, ...], axes: list[_Axis],
                    channels: int) -> relax.Expr:
        """The convolutions' outputs, each [N, Q..., k*O] for k of the phases in order,
        interleaved into [N, Q1*s1, Q2*s2, ..., O] (depth-to-space), less the surplus past the output."""
        spatial = len(axes)
        steps = [n + axis.more for n, axis in zip(shape[1:-1], axes)]
        strides = [axis.stride for axis in axes]
        out = phases[0]
        if any(s > 1 for s in strides):
            joined = self.builder_.emit(relax.op.concat(phases, axis=1 + spatial)) if len(phases) > 1 else out
            split = self.builder_.emit(relax.op.reshape(joined, [shape[0], *steps, *strides, channels]))
            order = [0, *(n for i in range(spatial) for n in (1 + i, 1 + spatial + i)), 1 + 2 * spatial]
            moved = self.builder_.emit(relax.op.permute_dims(split, order))
            out = self.builder_.emit(relax.op.reshape(moved, [shape[0], *(q * s for q, s in zip(steps, strides)),
                                                              channels]))
        full = (shape[0], *(q * s for q, s in zip(steps, strides)), channels)
        return self._pad_or_crop(out, full, [(0, 0), *((0, -axis.surplus) for axis in axes), (0, 0)])

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


def _union(windows: list[tuple[int, int]]) -> tuple[int, int]:
    """The window (low, span) that covers all of `windows`."""
    low = min(w[0] for w in windows)
    return low, max(w[0] + w[1] for w in windows) - low


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
    """`mod` with its transposed convolutions rewritten as convolutions where the module says.
    The rewrite binds each transposed convolution's variable to the last one it emits (`y = lv`):
    `CanonicalizeBindings` removes those aliases, which otherwise kept `FuseOps` from fusing the
    convolution with the bias and activation after it (keras.io's U-Net, stride 1)."""
    rewriter = _AsConvolution(mod)
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            rewriter.builder_.update_func(gvar, rewriter.visit_expr(func))
    return relax.transform.CanonicalizeBindings()(rewriter.builder_.get())


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
