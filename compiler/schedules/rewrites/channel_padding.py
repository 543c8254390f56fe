"""Pad the output channels of convolutions to whole hardware vectors (a Relax rewrite before legalisation).

The micro-kernel's tiles divide the output-channel extent (`tiling.py`), so an extent that whole
vectors do not divide runs on narrower vectors: Xception's 1x1 convolutions over 728 channels
(728 = 8 x 91) ran on 8-wide vectors with AVX-512, at half the machine's width, 1.96 ms for the
14x14 map where the same convolution with 736 output channels took 0.91 ms. A convolution with
constant weights whose output channels are not a multiple of the lanes gets its weights padded
with zero filters up to the next multiple, and its output sliced back to the real channels: the
slice is a copy, fused with the bias and activation that follow, and costs far less than the
narrow vectors did. Only extents of at least `MIN_VECTORS` vectors are padded, so the padding adds
at most 1/8 of the work. Whole vectors can still allow only narrow tiles: with AVX2's 8 lanes the
same 728 channels are 91 vectors (7 x 13), no tile of 2 to 6 vectors divides them, and the tile of
one vector ran at two thirds of the speed of 2 vectors; such an extent gets up to an eighth more
channels where a better tile pays for them (`tiling.padded_cols`: 736).

An output narrower than one vector whose width is not a power of two (a 10-class classifier) is cut
into several narrow vectors (10 = five 2-wide ones); padded to one full vector it issues a fifth
of the FMAs. That applies to convolutions and to `matmul` with constant weights (a dense layer):
the benchmark MLP's last layer, 32 x 512 -> 10, took 3.4 us instead of 11.1 us.

The output width is the register tile's rows, and tiles divide it too: a prime width (InceptionV3's
17x17 and 71x71 maps) got a tile of one row, so every weight vector loaded fed one FMA. Such a
convolution gets extra zero padding on the right of its input, enough for `tiling.padded_rows`
output columns (18 for 17: two tiles of 9 rows), and its output sliced back, by each register tile
as it writes its output (`contraction._is_crop`) where the channels are not sliced too. The
same holds for NDHWC 3-D convolutions (keras.io's CT-scan classifier), whose width is also the
axis before the channels; a wider tile is only taken where it pays (`_width_worth_padding`).
A window one step tall and wider than one column (InceptionV3's 1x7) has the rows over the height
instead (`_rows_axis`, as `contraction._rows_loop` chooses them), and the height is what is padded.

A `matmul`'s register tiles divide its rows (the second-to-last axis of its left operand) the same
way: ViT-B/16's 197 tokens, a prime, gave every dense layer and both of attention's products tiles
of one row. A static row count whose tiles are under half as tall as they can be gets zero rows
appended to the left operand, up to the count `tiling.padded_matmul_rows` finds faster (198 for
197), and the product sliced back; the right operand need not be a constant. The encoder block ran
in 42 ms instead of 99-106 on one Zen 3 core (benchmarks/vit_encoder.py).

A 1x1 stride-1 convolution need not take its rows from one line of the image: with AVX-512 and a
long reduction it runs over all the pixels in a row (`_flattened_pointwise`), whose count a tall
tile nearly divides (Xception's 361 as 364 in tiles of 7, where 19 columns took tiles of 5). A
depthwise convolution's width is padded the same way as a convolution's (`_padded_depthwise`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tvm
from tvm import relax
from tvm.target import Target

from tfcheck.compiler.schedules import cpu
from tfcheck.compiler.schedules.tiling import (DEPTHWISE_MAX_ROWS, max_rows, padded_cols, padded_matmul_rows,
                                                padded_rows, register_tile, rows_for_wider_tile, tile_rate)

# The convolutions padded: Relax op -> (its constructor, the data/output and kernel layouts taken).
_CONVOLUTIONS = {
    "relax.nn.conv2d": (relax.op.nn.conv2d, "NHWC", "HWIO"),
    "relax.nn.conv3d": (relax.op.nn.conv3d, "NDHWC", "DHWIO"),
}

# A convolution's width is padded when each output sums at least this many products, or when its
# output fits in this many bytes (about the two cores' L2): `_width_worth_padding`.
MIN_PADDED_REDUCTION = 64
CACHED_OUTPUT_BYTES = 4 << 20

# The fewest whole vectors of output channels worth padding (below, the extra work outweighs the gain).
MIN_VECTORS = 8


def padded_channels(channels: int, lanes: int) -> int:
    """The output channels to compute: the next multiple of `lanes`, or `channels` when it already
    is one or is too narrow for padding to pay.

    Under one vector, a width that is not a power of two (a 10-class classifier) is cut into
    several narrow vectors (10 = five 2-wide ones): one full vector instead issues a fifth of the
    FMAs for 1.6x the work (docs/schedules.md, "Narrow outputs").
    """
    if lanes <= 1 or channels % lanes == 0:
        return channels
    if channels < lanes:
        return lanes if channels & (channels - 1) else channels
    if channels < MIN_VECTORS * lanes:
        return channels
    return -(-channels // lanes) * lanes


@relax.expr_functor.mutator
class _ChannelPadder(relax.PyExprMutator):
    """Rewrites `conv2d(x, W)` (NHWC, HWIO, constant W, no groups) into `conv2d(x, pad(W))[..., :N]`,
    a convolution (2-D or 3-D) of an awkward output width `Wo` into one of more columns sliced back,
    and a `matmul` of a narrow constant W or of awkward rows into one padded and sliced back."""

    def __init__(self, mod: tvm.IRModule, lanes: int, registers: int) -> None:
        super().__init__(mod)
        self.lanes = lanes
        self.registers = registers
        self.rows = max_rows(registers)
        self._flat_columns: int | None = None  # the columns of the flattened 1x1 convolution being padded

    def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: N802 - TVM's visitor name
        call = super().visit_call_(call)
        name = call.op.name if isinstance(call.op, tvm.ir.Op) else None
        if name == "relax.matmul":
            return self._padded_matmul(call)
        form = _CONVOLUTIONS.get(name)
        if form is None:
            return call
        convolve, data_layout, kernel_layout = form
        data, weight = call.args
        attrs = call.attrs
        if _is_depthwise(call, data_layout):
            return self._padded_depthwise(call, convolve)
        if self._flat_columns is None:
            flattened = self._flattened_pointwise(call)
            if flattened is not None:
                return flattened
        if (not isinstance(weight, tvm.ir.expr.Constant) or attrs.groups != 1 or attrs.data_layout != data_layout
                or attrs.kernel_layout != kernel_layout or attrs.out_layout != data_layout):
            return call
        kernel = weight.value.numpy()
        normalized = self.builder_.normalize(call)
        axis = _rows_axis(normalized, kernel.shape)
        width = _static_extent(normalized, axis)
        if kernel.dtype != np.float32 or width is None:
            return call
        channels = kernel.shape[-1]
        wider = width > 1 and _width_worth_padding(normalized, kernel.shape)
        columns = padded_rows(width, self.rows) if wider else width
        if self._flat_columns is not None:
            columns = self._flat_columns
        padded = padded_channels(channels, self.lanes)
        if padded >= MIN_VECTORS * self.lanes:
            padded = padded_cols(padded, columns, self.lanes, self.registers)
        if wider and self._flat_columns is None:
            columns = rows_for_wider_tile(columns, padded, self.lanes, self.registers)
        if (padded, columns) == (channels, width):
            return call
        wide = np.pad(kernel, [(0, 0)] * (kernel.ndim - 1) + [(0, padded - channels)])
        # Padding is [before each spatial axis..., after each...]: spatial axis `axis - 1`'s "after"
        # is at `spatial + axis - 1`.
        padding = [int(p) for p in attrs.padding]
        padding[len(attrs.strides) + axis - 1] += (columns - width) * int(attrs.strides[axis - 1])
        convolution = self.builder_.emit(convolve(
            data, relax.const(wide), attrs.strides, padding, attrs.dilation, attrs.groups,
            attrs.data_layout, attrs.kernel_layout, attrs.out_layout, attrs.out_dtype))
        last = len(data_layout) - 1  # the channels' axis
        return relax.op.strided_slice(convolution, axes=[axis, last], begin=[0, 0], end=[width, channels])

    def _flattened_pointwise(self, call: relax.Call) -> relax.Expr | None:
        """A 1x1 stride-1 convolution as one over the image's pixels in a row where that gives a
        better register tile (`flat_columns`): `reshape(conv2d(reshape(x, [N, 1, H*W, C]), W), [N,
        H, W, O])`, the H*W rows computed in whole tiles and sliced back. Over its width, Xception's
        19 columns are computed as 20 in tiles of 5 rows; its 361 pixels as 364 in tiles of 7 with
        AVX-512. The reshapes are views, and the steps after the convolution (bias, activation, a
        residual add) move before the one after it (`flat_steps.py`), into the kernel's epilogue."""
        data, weight = call.args
        attrs = call.attrs
        shape, kernel = static_shape(data), static_shape(weight)
        if (call.op.name != "relax.nn.conv2d" or shape is None or kernel is None or len(shape) != 4
                or kernel[:2] != (1, 1) or attrs.groups != 1 or attrs.data_layout != "NHWC"
                or attrs.kernel_layout != "HWIO" or attrs.out_layout != "NHWC"
                or any(int(v) != 1 for v in [*attrs.strides, *attrs.dilation]) or any(int(p) for p in attrs.padding)
                or shape[1] < 2 or not isinstance(weight, tvm.ir.expr.Constant)):
            return None
        n, h, w, c = shape
        columns = flat_columns(h * w, w, c, padded_channels(kernel[-1], self.lanes), self.lanes, self.registers)
        if columns is None:
            return None
        self._flat_columns = columns
        try:
            flat = self.builder_.emit(relax.op.reshape(data, [n, 1, h * w, c]))
            product = self.builder_.emit(self.visit_call_(relax.Call(call.op, [flat, weight], attrs)))
        finally:
            self._flat_columns = None
        return relax.op.reshape(product, [n, h, w, kernel[-1]])

    def _padded_depthwise(self, call: relax.Call, convolve: Callable[..., relax.Expr]) -> relax.Expr:
        """A depthwise convolution over a width that no tile of several columns divides, computed
        over `padded_rows` columns and sliced back (the slice joins the tile: `contraction._is_crop`).
        Its tile is up to `DEPTHWISE_MAX_ROWS` columns dividing the width, so Xception's 19- and
        37-wide maps got one column, each input loaded for one output; over 20 and 40 columns
        (tiles of 5), one core took 0.11 against 0.21 ms and 0.46 against 0.73 ms at 728 channels,
        with AVX2 and with AVX-512 (docs/schedules.md, "Depthwise rule"). Only while the output
        stays in cache: a window's few products per output pay for an extra column on nothing
        larger (`_width_worth_padding`)."""
        data, weight = call.args
        attrs = call.attrs
        normalized = self.builder_.normalize(call)
        axis = len(attrs.strides)  # the width: the axis before the channels
        width, kernel = _static_extent(normalized, axis), static_shape(weight)
        if width is None or kernel is None:
            return call
        window = kernel[: len(attrs.strides)]
        if width < 2 or not _width_worth_padding(normalized, (*window, 1, 1)):  # a product per window step
            return call
        columns = padded_rows(width, DEPTHWISE_MAX_ROWS)
        if columns == width:
            return call
        padding = [int(p) for p in attrs.padding]
        padding[len(attrs.strides) + axis - 1] += (columns - width) * int(attrs.strides[axis - 1])
        convolution = self.builder_.emit(convolve(
            data, weight, attrs.strides, padding, attrs.dilation, attrs.groups,
            attrs.data_layout, attrs.kernel_layout, attrs.out_layout, attrs.out_dtype))
        return relax.op.strided_slice(convolution, axes=[axis], begin=[0], end=[width])

    def _padded_matmul(self, call: relax.Call) -> relax.Expr:
        """`matmul(x, W)` as `matmul(pad(x), pad(W))[..., :M, :N]`: with constant float32 weights
        `W[K, N]`, N narrower than one vector padded as `padded_channels` pads it (FoldConstant
        computes the padded weights at build time); with any `W` (attention's `softmax(q k) v`
        too), a static row count M that allows only narrow tiles padded as `padded_matmul_rows`
        pads it (zero rows of `x`, a copy of it)."""
        data, weight = call.args
        shape = static_shape(weight)
        if shape is None or len(shape) < 2 or weight.ty.dtype != "float32":
            return call
        channels = padded = shape[-1]
        # Only a width under one vector: an ImageNet classifier's 1000 columns padded to 1008 ran
        # no faster at batch 1 (docs/schedules.md, "Narrow outputs").
        if len(shape) == 2 and channels < self.lanes and self._is_constant(weight):
            padded = padded_channels(channels, self.lanes)
        rows = _static_extent(data, -2)
        wanted = rows if rows is None else padded_matmul_rows(rows, padded, self.lanes, self.registers)
        if (padded, wanted) == (channels, rows):
            return call
        if padded != channels:
            weight = self.builder_.emit(relax.op.nn.pad(weight, [0, 0, 0, padded - channels]))
        rows_axis = data.ty.ndim - 2
        if wanted != rows:
            widths = [0] * (2 * data.ty.ndim)
            widths[2 * rows_axis + 1] = wanted - rows
            data = self.builder_.emit(relax.op.nn.pad(data, widths))
        product = self.builder_.emit(relax.op.matmul(data, weight, out_dtype=call.attrs.out_dtype))
        last = product.ty.ndim - 1  # the legalised strided_slice takes no negative axis
        axes, ends = zip(*[(axis, end) for axis, end, computed in ((last - 1, rows, wanted), (last, channels, padded))
                           if end != computed])
        return relax.op.strided_slice(product, axes=list(axes), begin=[0] * len(axes), end=list(ends))

    def _is_constant(self, expr: relax.Expr) -> bool:
        """Whether `expr` is a constant or computed from constants alone (the importer's
        `permute_dims` of a fully connected layer's weights)."""
        if isinstance(expr, tvm.ir.expr.Constant):
            return True
        bound = self.lookup_binding(expr) if isinstance(expr, relax.Var) else None
        return isinstance(bound, relax.Call) and all(self._is_constant(arg) for arg in bound.args)


def flat_columns(pixels: int, width: int, inputs: int, channels: int, lanes: int, registers: int) -> int | None:
    """The rows to compute for a 1x1 convolution's `pixels` (H*W) taken in a row, or None where the
    tiles over its width do as well: the next multiple of the tallest register tile for the output
    `channels` (`register_tile` over an extent every height divides), where that advances the real
    pixels faster than the tile over the width padded as `padded_rows` pads it.

    Measured on one core of the Xeon, interleaved, the convolution with its bias and ReLU over the
    pixels against the width (docs/schedules.md, "Pixels in a row"): with AVX-512, 19x19x728 -> 728
    2.98 against 3.27 ms, 37x37x728 -> 728 12.5 against 13.6, 17x17x768 -> 192 0.64 against 0.73;
    but 73x73x64 -> 80, a reduction of 64, 0.61 against 0.48 (`FLAT_MIN_INPUTS`). With AVX2's 16
    registers it was as often slower as faster (19x19x728: 4.20 against 4.56 ms; 17x17x768 -> 192:
    0.99 against 0.92), so it is only done with 32 (`FLAT_MIN_REGISTERS`)."""
    if registers < FLAT_MIN_REGISTERS or inputs < FLAT_MIN_INPUTS:
        return None
    best = register_tile(_ANY_HEIGHT, channels, lanes, registers)[0]
    columns = -(-pixels // best) * best
    padded = padded_rows(width, max_rows(registers))

    def useful(computed: int, real: int) -> float:
        return tile_rate(computed, channels, lanes, registers) * real / computed

    return columns if useful(columns, pixels) > useful(padded, width) else None


# An extent every tile height up to 10 divides (5040 = 7!).
_ANY_HEIGHT = 5040
# The vector registers and the input channels (the reduction) from which a 1x1 convolution's pixels
# are taken in a row (`flat_columns`).
FLAT_MIN_REGISTERS = 32
FLAT_MIN_INPUTS = 256


def _is_depthwise(call: relax.Call, data_layout: str) -> bool:
    """Whether `call` is a depthwise convolution in `data_layout`: a group per input channel, each
    giving one output channel, as TVM's importer makes TFLite's DEPTHWISE_CONV_2D."""
    attrs = call.attrs
    data, output = static_shape(call.args[0]), static_shape(call)
    return (attrs.groups > 1 and attrs.data_layout == data_layout and attrs.out_layout == data_layout
            and data is not None and output is not None and data[-1] == output[-1] == attrs.groups)


def _width_worth_padding(call: relax.Call, kernel: tuple[int, ...]) -> bool:
    """Whether a wider register tile pays for what padding costs: the extra columns and a bound
    check on each load of the padded input, small next to a long reduction or while the output
    stays in cache. keras.io's CT-scan Conv3D over 1 input channel (27 multiply-adds per output, a
    256 MB output) ran 3.3x slower padded when the slice was a pass of its own, still 1.10-1.15x
    with the slice in the tile (`contraction._is_crop`); its next, over 64 channels, 2x faster
    (445 -> 202 ms); InceptionV3's first convolution (27 per output, 2.8 MB) 0.58 -> 0.46 ms.
    The output's size is one example's: a symbolic batch counts as 1."""
    reduction = int(np.prod(kernel[:-1]))
    values = call.ty.shape.values
    example = np.prod([int(v.value) for v in values if isinstance(v, tvm.tirx.IntImm)], dtype=np.int64)
    return reduction >= MIN_PADDED_REDUCTION or int(example) * 4 <= CACHED_OUTPUT_BYTES


def _rows_axis(call: relax.Call, kernel: tuple[int, ...]) -> int:
    """The output axis the register tile's rows run over (`contraction._rows_loop`): the width (the
    axis before the channels); or the axis before it where the window is one step along it, more
    than one across the width, and the output more than one long on it: a 1x7 convolution's height."""
    spatial = len(kernel) - 2  # kernel axes: spatial..., input channels, output channels
    width = spatial  # output axes: batch, spatial..., channels; output axis d is kernel axis d - 1
    outside = _static_extent(call, width - 1) if spatial > 1 else None
    if kernel[width - 1] > 1 and kernel[width - 2] == 1 and outside is not None and outside > 1:
        return width - 1
    return width


def _static_extent(expr: relax.Expr, axis: int) -> int | None:
    """The extent of a tensor expression along ``axis`` (negative from the end), or None when it
    is not a constant or the tensor has no such axis."""
    values = getattr(getattr(expr.ty, "shape", None), "values", None)
    value = values[axis] if values is not None and -len(values) <= axis < len(values) else None
    return int(value.value) if isinstance(value, tvm.tirx.IntImm) else None


def static_shape(expr: relax.Expr) -> tuple[int, ...] | None:
    """The shape of a tensor expression, or None unless every dimension is a constant."""
    shape = getattr(expr.ty, "shape", None)
    values = getattr(shape, "values", None)
    if values is None or not all(isinstance(value, tvm.tirx.IntImm) for value in values):
        return None
    return tuple(int(value.value) for value in values)


def pad_output_channels(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """Every Relax function of `mod` with its narrow-vector and awkward-width convolutions and its
    narrow dense layers padded (see the module)."""
    padder = _ChannelPadder(mod, cpu.vector_lanes(target, 32), cpu.vector_registers(target))
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            padder.builder_.update_func(gvar, padder.visit_expr(func))
    return padder.builder_.get()
