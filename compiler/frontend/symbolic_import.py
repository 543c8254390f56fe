"""Importing a TFLite flatbuffer with symbolic (unknown) dimensions into Relax.

TensorFlow's converter keeps an unknown dimension as -1 in each tensor's `shape_signature` (its
`shape` holds 1 there). TVM's TFLite frontend takes the input shapes from `shape_dict`, so giving
it `tir.Var`s there is most of the work: Relax infers every shape after that from the inputs'.
Four things in the frontend assume static shapes, and are handled here, for the import only:

- `to_int_list`, which its converters call on inferred shapes, calls `int()` on every dimension:
  during the import it keeps symbolic dimensions as they are (`symbolic_int_lists`);
- `get_tensor_shape` answers with TFLite's `shape`, so 1 for an unknown dimension: tfcheck's
  converter asks the tensor's Relax expression instead (`ShapeValues.tensor_shape`);
- TensorFlow computes reshape targets at run time from the input's shape (`SHAPE`, then
  `GATHER`, `CONCATENATION`, `UNSORTED_SEGMENT_PROD`, ... on the shape vector; MultiHeadAttention's
  einsums do). TVM's RESHAPE needs the target as a constant. `ShapeValues` evaluates such shape
  arithmetic on symbolic values (NumPy object arrays of `tir` expressions) while converting, and
  RESHAPE (and the shape ops themselves) then get the symbolic target;
- converters that read a size or a bound as a constant, or call `int()` on a shape, where users'
  models give them symbolic ones (docs/importer-fixes.md, "Unknown dimensions in users' models"):
  FILL, BROADCAST_TO, RESIZE_* and TRANSPOSE_CONV to a computed size, STRIDED_SLICE of a tensor
  with a symbolic dimension or with bounds computed from shapes (a U-Net's centre crops), and
  TILE (whose data TVM reads from the expression table, which holds no constants).

Any other operator that cannot take a symbolic size fails the import, naming the operator and its
TensorFlow node (`importer._named_error`), and the build falls back or says so (docs/build.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tfcheck.compiler.frontend.tflite_values import constant_value
from tfcheck.runtime.manifest import SymbolicDim, TensorSpec


def input_shapes(model: Any, inputs: list[TensorSpec]) -> dict[str, tuple[Any, ...]] | None:
    """`shape_dict` for `from_tflite`: each input tensor's shape with its named dimensions as
    `tir.Var`s (one per name, shared by the inputs that use it); None when all are static."""
    from tvm import tirx

    if not any(isinstance(dim, str) for spec in inputs for dim in spec.shape):
        return None
    subgraph = model.Subgraphs(0)
    variables: dict[str, Any] = {}
    shapes = {}
    for index, spec in zip(subgraph.InputsAsNumpy(), inputs):
        name = subgraph.Tensors(int(index)).Name().decode("utf-8")
        shapes[name] = tuple(variables.setdefault(dim, tirx.Var(dim, "int64")) if isinstance(dim, str) else dim
                             for dim in spec.shape)
    return shapes


def with_bounds(module: Any, dims: dict[str, SymbolicDim]) -> Any:
    """`main` with `tir_var_upper_bound` for the bounded dimensions (Relax plans memory with it) and
    `tir_var_lower_bound` for those with a minimum (the schedules estimate a kernel's work at it:
    `schedules.blocks.smallest_extent`)."""
    for attr, key in (("tir_var_upper_bound", "max"), ("tir_var_lower_bound", "min")):
        bounds = {name: int(getattr(dim, key)) for name, dim in dims.items() if getattr(dim, key) is not None}
        if bounds:
            module["main"] = module["main"].with_attr(attr, bounds)
    return module


def _int_or_symbolic(value: Any) -> Any:
    """`int(value)`, or a symbolic dimension as it is."""
    try:
        return int(value)
    except TypeError:
        return value


@contextlib.contextmanager
def symbolic_int_lists(enabled: bool) -> Iterator[None]:
    """While importing a module with symbolic inputs, the frontend's `to_int_list` keeps symbolic
    dimensions (it raised TypeError on them, e.g. FULLY_CONNECTED with `keep_num_dims`), and its
    `get_pad_value` pads them as `_same_padding` does (it called `float()` on them)."""
    from tvm.relax.frontend.tflite import tflite_frontend

    if not enabled:
        yield
        return
    originals = tflite_frontend.to_int_list, tflite_frontend.get_pad_value
    tflite_frontend.to_int_list = lambda values: [_int_or_symbolic(value) for value in values]
    tflite_frontend.get_pad_value = functools.partial(_same_padding, originals[1])
    try:
        yield
    finally:
        tflite_frontend.to_int_list, tflite_frontend.get_pad_value = originals


# Set while `ShapeValues._strided_same` converts a convolution whose input it has padded itself.
_PADDED_AHEAD: contextvars.ContextVar[bool] = contextvars.ContextVar("tfcheck_padded_ahead", default=False)


def _same_padding(static: Callable[[int, int, int], tuple[int, int]], size: Any, kernel: int,
                  stride: int) -> tuple[int, int]:
    """(before, after) of TensorFlow's 'SAME' padding of one axis: `static`'s for a known size. For
    a symbolic one at stride 1 it does not depend on the size (`kernel - 1`, the odd one after);
    at a larger stride it does (`(ceil(size / stride) - 1) * stride + kernel - size`: 1 or 2 for a
    3x3 window at stride 2), which a static padding attribute cannot hold: `_strided_same` pads
    such a convolution's or pooling's input ahead, and any other operator says so."""
    if isinstance(_int_or_symbolic(size), int):
        return static(size, kernel, stride)
    if stride == 1:
        return (kernel - 1) // 2, kernel - 1 - (kernel - 1) // 2
    if _PADDED_AHEAD.get():
        return 0, 0
    raise NotImplementedError(f"'SAME' padding at stride {stride} over a dimension of unknown size is only "
                              "supported for convolutions, max pooling and float average pooling")


def _padded_ahead(expr: Any, axis: int, size: Any, kernel: int, stride: int, fill: float) -> Any:
    """`expr` padded along `axis` as 'SAME' pads a symbolic `size`: `fill` for the largest padding
    any size can need (`kernel - 1`, split as TensorFlow splits it), then the slice that starts
    where this size's own padding starts (`most before - before` in) and holds the rows the
    windows read, `(outputs - 1) * stride + kernel`: a length TVM's analyzer sees the convolution
    cover, where `size + padding` (`h + 2 - (h + 1) % 2`) lost the kernel its schedule."""
    from tvm import relax, tirx

    outputs = (size + stride - 1) // stride
    total = tirx.max((outputs - 1) * stride + kernel - size, 0)
    most = kernel - 1
    widths = [0] * 8
    widths[2 * axis], widths[2 * axis + 1] = most // 2, most - most // 2
    padded = relax.op.nn.pad(expr, widths, pad_value=fill)
    start = most // 2 - total // 2
    return relax.op.strided_slice(padded, [axis], [start], [start + (outputs - 1) * stride + kernel],
                                  assume_inbound=True)


@dataclasses.dataclass(frozen=True)
class _Window:
    """What 'SAME' padding of a sliding window needs from its operator: the padding kind, the
    stride and the extent of the window (dilation included) on height and width, and the value
    the padding holds for the operator (0 for a convolution, the lowest value for a max pooling)."""

    padding: int
    strides: tuple[int, int]
    extents: tuple[int, int]
    fill: float


def _convolution_window(options_class: type, converter: Any, op: Any) -> _Window:
    """A CONV_2D's or DEPTHWISE_CONV_2D's window (`options_class`: Conv2DOptions or
    DepthwiseConv2DOptions: the dilations sit in different fields), from its weights' shape."""
    weights = converter.get_input_tensors(op)[1]
    options = options_class()
    options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    dilations = (options.DilationHFactor(), options.DilationWFactor())
    return _Window(options.Padding(), (options.StrideH(), options.StrideW()),
                   tuple((int(weights.tensor.Shape(axis)) - 1) * dilation + 1
                         for axis, dilation in zip((1, 2), dilations)), 0.0)


def _pool_window(lowest: bool, converter: Any, op: Any) -> _Window:
    """A MAX_POOL_2D's (``lowest``: padded with its input type's lowest value, which TensorFlow's
    'SAME' max pooling never takes) or AVERAGE_POOL_2D's window (padded with zeros)."""
    from tflite.Pool2DOptions import Pool2DOptions

    options = Pool2DOptions()
    options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    dtype = np.dtype(converter.get_tensor_type_str(converter.get_input_tensors(op)[0].tensor.Type()))
    fill = 0.0 if not lowest else float("-inf") if dtype.kind == "f" else float(np.iinfo(dtype).min)
    return _Window(options.Padding(), (options.StrideH(), options.StrideW()),
                   (options.FilterHeight(), options.FilterWidth()), fill)


# Shape arithmetic on 1-D int vectors that ShapeValues evaluates; the value is (inputs -> output).
def _gather(converter: Any, op: Any, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    from tflite.GatherOptions import GatherOptions

    options = GatherOptions()
    options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    if options.Axis() != 0 or data.ndim != 1:
        raise _NotShapeArithmetic
    return data[indices.astype(np.int64)]


def _concatenation(converter: Any, op: Any, *parts: np.ndarray) -> np.ndarray:
    if any(part.ndim != 1 for part in parts):
        raise _NotShapeArithmetic
    return np.concatenate(parts)


def _pack(converter: Any, op: Any, *parts: np.ndarray) -> np.ndarray:
    if any(part.ndim != 0 for part in parts):
        raise _NotShapeArithmetic
    packed = np.empty(len(parts), dtype=object)  # the elements themselves, not 0-d arrays of them
    packed[:] = [part[()] for part in parts]
    return packed


def _segment_product(converter: Any, op: Any, data: np.ndarray, ids: np.ndarray, count: np.ndarray) -> np.ndarray:
    if data.ndim != 1:
        raise _NotShapeArithmetic
    return np.array([functools.reduce(lambda a, b: a * b, data[ids == segment], 1) for segment in range(int(count))],
                    dtype=object)


def _reduce_product(converter: Any, op: Any, data: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """The product of a shape vector's elements (`tf.tensordot`'s row count, `Dense` on a rank-3 input)."""
    from tflite.ReducerOptions import ReducerOptions

    options = ReducerOptions()
    options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    if data.ndim != 1 or [int(axis) for axis in np.ravel(axes)] not in ([0], [-1]):
        raise _NotShapeArithmetic
    product = np.empty(1 if options.KeepDims() else (), dtype=object)  # bare elements, as `_pack` keeps them
    product.flat[0] = functools.reduce(lambda a, b: a * b, data, 1)
    return product


def _strided_slice(converter: Any, op: Any, data: np.ndarray, begin: np.ndarray, end: np.ndarray,
                   strides: np.ndarray) -> np.ndarray:
    from tflite.StridedSliceOptions import StridedSliceOptions

    options = StridedSliceOptions()
    options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    if data.ndim != 1 or options.EllipsisMask() or options.NewAxisMask():
        raise _NotShapeArithmetic
    start = None if options.BeginMask() & 1 else int(begin[0])
    stop = None if options.EndMask() & 1 else int(end[0])
    sliced = data[slice(start, stop, int(strides[0]))]
    if not options.ShrinkAxisMask() & 1:
        return sliced
    scalar = np.empty((), dtype=object)  # a 0-d array: indexing an object array gives the bare element
    scalar[()] = sliced[0]
    return scalar


def _slice(converter: Any, op: Any, data: np.ndarray, begin: np.ndarray, size: np.ndarray) -> np.ndarray:
    if data.ndim != 1:
        raise _NotShapeArithmetic
    start, count = int(begin[0]), int(size[0])
    return data[start:] if count == -1 else data[start:start + count]


def _elementwise(combine: Callable[[Any, Any], Any]) -> Callable[..., np.ndarray]:
    def evaluate(converter: Any, op: Any, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return np.vectorize(combine, otypes=[object])(left, right)

    return evaluate


def _floor_div(a: Any, b: Any) -> Any:
    from tvm import tirx

    return a // b if isinstance(a, int) and isinstance(b, int) else tirx.floordiv(a, b)


def _cast(converter: Any, op: Any, data: np.ndarray) -> np.ndarray:
    return data


EVALUATORS: dict[str, Callable[..., np.ndarray]] = {
    "GATHER": _gather,
    "CONCATENATION": _concatenation,
    "PACK": _pack,
    "UNSORTED_SEGMENT_PROD": _segment_product,
    "REDUCE_PROD": _reduce_product,
    "STRIDED_SLICE": _strided_slice,
    "SLICE": _slice,
    "MUL": _elementwise(lambda a, b: a * b),
    "ADD": _elementwise(lambda a, b: a + b),
    "SUB": _elementwise(lambda a, b: a - b),
    "FLOOR_DIV": _elementwise(_floor_div),
    "CAST": _cast,
}


# An end beyond any axis, clipped to the axis by `strided_slice` (negated: before its first element).
_PAST_THE_END = 1 << 62


def _axis_bounds(dim: Any, start: int, stop: int | None, step: int, masked: tuple[int, int]) -> tuple[Any, Any]:
    """One axis of a strided slice as (start, stop) for Relax's `strided_slice`: with a
    positive step, clipped to `[0, dim]` as TensorFlow clips (`dim` may be symbolic), so that
    Relax knows the extent; with a negative one, `_PAST_THE_END` for a masked bound, which Relax
    clips itself (`assume_inbound=False`)."""
    from tvm import tirx

    def clip(index: int) -> Any:
        if isinstance(dim, int):
            return min(max(index + dim if index < 0 else index, 0), dim)
        return tirx.max(dim + index, 0) if index < 0 else (0 if index == 0 else tirx.min(index, dim))

    if step < 0:
        return (_PAST_THE_END if masked[0] else start), (-_PAST_THE_END if masked[1] or stop is None else stop)
    return (0 if masked[0] else clip(start)), (dim if masked[1] or stop is None else clip(stop))


def _shown(value: Any) -> str:
    """A size, a bound or a list of them as a message shows it: `rows_1 // 2 - 2`, not TVMScript's
    `rows_1 // T.int64(2) - T.int64(2)`."""
    text = f"[{', '.join(map(_shown, value))}]" if isinstance(value, (list, tuple)) else str(value)
    return re.sub(r"T\.int64\((-?\d+)\)", r"\1", text)


def _axis_slice(dim: Any, start: Any, stop: Any, step: int, masked: tuple[int, int], shrink: bool) -> tuple[Any, Any] | None:
    """(start, stop) of one axis of a strided slice for Relax's `strided_slice`, None where the
    slice keeps the whole axis; a shrunk axis is the one element at `start` (-1: the last).
    Bounds known only at run time go through `_run_time_bounds`."""
    if not (isinstance(start, int) and isinstance(stop, int)):
        return _run_time_bounds(dim, start, stop, step, masked, shrink)
    if shrink:
        stop, step, masked = (start + 1) or None, 1, (0, 0)
    whole = step == 1 and (masked[0] or start == 0) and (
        masked[1] or stop is None or (isinstance(dim, int) and stop >= dim))
    return None if whole else _axis_bounds(dim, start, stop, step, masked)


def _run_time_bounds(dim: Any, start: Any, stop: Any, step: int, masked: tuple[int, int],
                     shrink: bool) -> tuple[Any, Any]:
    """(start, stop) of an axis sliced by bounds computed from shapes, where they provably lie in
    `[0, dim]` at a step of 1, so that TensorFlow's clipping changes nothing (a centre crop:
    `(h - crop) // 2` to that plus `crop`, with `crop <= h` for every `h`). Otherwise the clipping
    would depend on the size, which the result's shape cannot hold: refused, saying so."""
    from tvm import sym

    first, last = 0 if masked[0] else start, dim if masked[1] else stop
    analyzer, strength = sym.Analyzer(), sym.ProofStrength.SYMBOLIC_BOUND  # floor divisions of one size
    if step != 1 or shrink or not (analyzer.can_prove(first >= 0, strength) and analyzer.can_prove(last <= dim, strength)):
        raise NotImplementedError(
            f"a slice of an axis of size {_shown(dim)} from {_shown(first)} to {_shown(last)} (step {step}), bounds "
            "computed at run time "
            "from the input's shape that tfcheck cannot prove lie inside the axis at every size, as it can for a "
            "centre crop (x[:, d:d + h] with d = (tf.shape(x)[1] - h) // 2): the result's size would depend on "
            "TensorFlow's clipping. Give the input's dimensions fixed sizes")
    return first, last


def _tiled(expr: Any, shape: list[Any], reps: list[Any]) -> Any:
    """`tf.tile(expr, reps)` for multiples that may be symbolic: each tiled axis of size `d` gets a
    new axis of size 1 before it, broadcast to the multiple `m`, and the pair is merged into `m * d`
    (where `d` is 1, the axis itself is broadcast); TensorFlow's tile repeats the whole axis, which
    is what the new outer axis holds."""
    from tvm import relax

    expanded, broadcast, merged, reshaped = [], [], [], False
    for dim, rep in zip(shape, reps):
        if isinstance(rep, int) and rep == 1:
            expanded.append(dim)
            broadcast.append(dim)
            merged.append(dim)
        elif isinstance(dim, int) and dim == 1:
            expanded.append(1)
            broadcast.append(rep)
            merged.append(rep)
        else:
            expanded += [1, dim]
            broadcast += [rep, dim]
            merged.append(rep * dim)
            reshaped = True
    if reshaped:
        expr = relax.op.reshape(expr, relax.ShapeExpr(expanded))
    tiled = relax.op.broadcast_to(expr, relax.ShapeExpr(broadcast))
    return relax.op.reshape(tiled, relax.ShapeExpr(merged)) if reshaped else tiled


class _NotShapeArithmetic(Exception):
    """The operator is not shape arithmetic this module evaluates: convert it as usual."""


class ShapeValues:
    """The values of the int tensors that hold (parts of) shapes, as NumPy object arrays whose
    elements are ints or `tir` expressions of the symbolic dimensions, for one converter."""

    def __init__(self, converter: Any) -> None:
        self._converter = converter
        self._values: dict[int, np.ndarray] = {}

    def wrap(self, convert_map: dict[str, Callable[..., Any]]) -> None:
        """Route SHAPE, RESHAPE and the shape arithmetic of `EVALUATORS` through this table."""
        convert_map["SHAPE"] = functools.partial(self._shape, convert_map["SHAPE"])
        convert_map["RESHAPE"] = functools.partial(self._reshape, convert_map["RESHAPE"])
        convert_map["BATCH_MATMUL"] = functools.partial(self._batch_matmul, convert_map["BATCH_MATMUL"])
        convert_map["FILL"] = functools.partial(self._fill, convert_map["FILL"])
        convert_map["BROADCAST_TO"] = functools.partial(self._broadcast, convert_map["BROADCAST_TO"])
        convert_map["TILE"] = functools.partial(self._tile, convert_map["TILE"])
        convert_map["RANGE"] = functools.partial(self._range, convert_map["RANGE"])
        convert_map["STRIDED_SLICE"] = functools.partial(self._sliced, convert_map["STRIDED_SLICE"])
        convert_map["SLICE"] = functools.partial(self._sized_slice, convert_map["SLICE"])
        for name in ("RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"):
            convert_map[name] = functools.partial(self._resize, convert_map[name])
        convert_map["TRANSPOSE_CONV"] = functools.partial(self._transposed_convolution, convert_map["TRANSPOSE_CONV"])
        from tflite.Conv2DOptions import Conv2DOptions
        from tflite.DepthwiseConv2DOptions import DepthwiseConv2DOptions

        for name, window_of in (("CONV_2D", functools.partial(_convolution_window, Conv2DOptions)),
                                ("DEPTHWISE_CONV_2D", functools.partial(_convolution_window, DepthwiseConv2DOptions)),
                                ("MAX_POOL_2D", functools.partial(_pool_window, True))):
            convert_map[name] = functools.partial(self._strided_same, window_of, convert_map[name])
        convert_map["AVERAGE_POOL_2D"] = functools.partial(self._strided_average, convert_map["AVERAGE_POOL_2D"])
        for name, evaluate in EVALUATORS.items():
            if name in convert_map:
                convert_map[name] = functools.partial(self._arithmetic, evaluate, convert_map[name])

    def tensor_shape(self, tensor: Any) -> list[Any] | None:
        """The symbolic shape of a tensor whose TFLite shape signature has an unknown dimension
        and that has a Relax expression already; None otherwise."""
        signature = tensor.tensor.ShapeSignatureAsNumpy() if tensor.tensor.ShapeSignatureLength() else []
        converter = self._converter
        if not any(dim < 0 for dim in signature) or not converter.has_expr(tensor.tensor_idx):
            return None
        shape = converter._infer_shape(converter.get_tensor_expr(tensor))  # noqa: SLF001 - the frontend's own helper
        return None if shape is None else [_int_or_symbolic(dim) for dim in shape]

    def value(self, tensor: Any) -> np.ndarray | None:
        """A shape value already evaluated, or a constant int tensor's value; None otherwise."""
        if tensor.tensor_idx in self._values:
            return self._values[tensor.tensor_idx]
        constant = constant_value(self._converter, tensor)
        if constant is None or constant.dtype.kind not in "iu":
            return None
        return np.vectorize(int, otypes=[object])(constant) if constant.size else constant.astype(object)

    def _record(self, op: Any, value: np.ndarray) -> Any:
        """Remember `op`'s output value and return it as a Relax tensor of the output's dtype."""
        from tvm import relax

        output = self._converter.get_output_tensors(op)[0]
        self._values[output.tensor_idx] = value
        dtype = self._converter.get_tensor_type_str(output.tensor.Type())
        flat = list(value.reshape(-1))
        if all(isinstance(item, int) for item in flat):
            return relax.const(np.array(flat, dtype=dtype).reshape(value.shape), dtype)
        tensor = relax.op.shape_to_tensor(relax.ShapeExpr(flat))
        if value.ndim != 1:
            tensor = relax.op.reshape(tensor, list(value.shape))
        return relax.op.astype(tensor, dtype)

    def _shape(self, upstream: Callable[..., Any], op: Any) -> Any:
        """SHAPE of a tensor with a known (possibly symbolic) shape: its dimensions."""
        [tensor] = self._converter.get_input_tensors(op)
        shape = self._converter._infer_shape(self._converter.get_tensor_expr(tensor))  # noqa: SLF001
        if shape is None:
            return upstream(op=op)
        return self._record(op, np.array([_int_or_symbolic(dim) for dim in shape] or [], dtype=object))

    def _arithmetic(self, evaluate: Callable[..., np.ndarray], upstream: Callable[..., Any], op: Any) -> Any:
        """Evaluate shape arithmetic whose inputs are all shape values or constants, and whose
        inputs include a shape value (plain constant arithmetic is left to the converter)."""
        tensors = self._converter.get_input_tensors(op)
        values = [self.value(tensor) for tensor in tensors]
        if any(value is None for value in values) or not any(t.tensor_idx in self._values for t in tensors):
            return upstream(op=op)
        try:
            return self._record(op, evaluate(self._converter, op, *values))
        except _NotShapeArithmetic:
            return upstream(op=op)

    def _batch_matmul(self, upstream: Callable[..., Any], op: Any) -> Any:
        """BATCH_MATMUL with a symbolic dimension, or operands of different ranks: Relax's
        `matmul`, which broadcasts the batch axes itself. TVM's converter broadcasts them with
        `int()` of each dimension, and for different ranks reads the shape of an expression it has
        not normalised ("'Type' object has no attribute 'shape'": a Keras Dense on a 3-D or 4-D
        input whose weight is an input of the model, as with `weights="inputs"`)."""
        from tflite.BatchMatMulOptions import BatchMatMulOptions
        from tvm import relax

        converter = self._converter
        tensors = converter.get_input_tensors(op)
        operands = [converter.get_tensor_expr(tensor) for tensor in tensors]
        shapes = [converter._infer_shape(operand) for operand in operands]  # noqa: SLF001
        static = all(isinstance(_int_or_symbolic(d), int) for shape in shapes for d in shape)
        if converter.is_quantized(op) or (static and len(shapes[0]) == len(shapes[1])):
            return upstream(op=op)
        options = BatchMatMulOptions()
        options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
        for index, transposed in enumerate((options.AdjX(), options.AdjY())):
            if transposed:
                rank = len(shapes[index])
                operands[index] = relax.op.permute_dims(operands[index], [*range(rank - 2), rank - 1, rank - 2])
        return relax.op.matmul(*operands)

    def _fill(self, upstream: Callable[..., Any], op: Any) -> Any:
        """FILL to a shape computed from shapes (`tf.zeros([batch, units])`: an RNN's first
        state): a tensor of the evaluated (symbolic) shape. TVM's converter reads the shape as a
        constant."""
        from tvm import relax

        dims, value = self._converter.get_input_tensors(op)
        if dims.tensor_idx not in self._values:
            return upstream(op=op)
        shape = relax.ShapeExpr(list(self._values[dims.tensor_idx].reshape(-1)))
        return relax.op.full(shape, self._converter.get_tensor_expr(value))

    def _broadcast(self, upstream: Callable[..., Any], op: Any) -> Any:
        """BROADCAST_TO a shape computed from shapes (`tf.broadcast_to(class_emb, [batch_size, 1,
        d_model])`: a vision transformer's class token, emla2805/vision-transformer): the data
        broadcast to the evaluated (symbolic) shape. TVM's converter makes a shape of the shape
        tensor at run time, so the result's shape, and that of everything after it, was unknown
        but for its rank, and the build failed later with a bare AssertionError."""
        from tvm import relax

        data, dims = self._converter.get_input_tensors(op)
        if dims.tensor_idx not in self._values:
            return upstream(op=op)
        shape = relax.ShapeExpr(list(self._values[dims.tensor_idx].reshape(-1)))
        return relax.op.broadcast_to(self._converter.get_tensor_expr(data), shape)

    def _tile(self, upstream: Callable[..., Any], op: Any) -> Any:
        """TILE with multiples known here: constants, or shape arithmetic, of any tensor. TVM's
        converter reads the data from the expression table, where a constant (YOLOv3's anchors
        tiled to 8112 rows, too big for TensorFlow's converter to fold) is not (``KeyError``), and
        the multiples as a constant. Static multiples go to Relax's `tile`; symbolic ones (tfts'
        `CreateDecoderFeature`, LongxingTan/Time-series-prediction: `tf.tile(tf.reshape(tf.range(8),
        (1, 8, 1)), (batch_size, 1, 1))`) to `_tiled`, which Relax's `tile` (ints only) cannot take."""
        from tvm import relax

        data, multiples = self._converter.get_input_tensors(op)
        value = self.value(multiples)
        if value is None:
            return upstream(op=op)
        reps = list(value.reshape(-1))
        expr = self._converter.get_tensor_expr(data)
        if all(isinstance(item, int) for item in reps):
            return relax.op.tile(expr, [int(item) for item in reps])
        shape = self._converter._infer_shape(expr)  # noqa: SLF001 - the frontend's own helper
        if shape is None or len(shape) != len(reps):
            return upstream(op=op)
        return _tiled(expr, [_int_or_symbolic(dim) for dim in shape], reps)

    def _range(self, upstream: Callable[..., Any], op: Any) -> Any:
        """RANGE to a limit (or from a start) computed from shapes, at a constant positive step
        (`tf.range(tf.shape(x)[1])`; `tf.linalg.band_part` over a matrix of unknown size makes two:
        GPT-2's causal mask, akanyaani/gpt-2-tensorflow2.0): Relax's `arange` over the evaluated
        (symbolic) bounds, so its length is `limit - start` in the input's sizes. TVM's converter
        takes bounds computed at run time as data, and gives the result a length of its own
        (`range_len`) that nothing relates to the input's: the mask's shape, and every shape after
        it, was then unknown but for its rank."""
        from tvm import relax

        converter = self._converter
        tensors = converter.get_input_tensors(op)
        values = [self.value(tensor) for tensor in tensors]
        if (any(value is None or value.size != 1 for value in values)
                or not any(tensor.tensor_idx in self._values for tensor in tensors)):
            return upstream(op=op)
        start, limit, delta = (value.reshape(-1)[0] for value in values)
        if not isinstance(delta, int) or delta <= 0:
            return upstream(op=op)
        dtype = converter.get_tensor_type_str(converter.get_output_tensors(op)[0].tensor.Type())
        return relax.op.arange(start, limit, delta, dtype)

    def _sliced(self, upstream: Callable[..., Any], op: Any) -> Any:
        """STRIDED_SLICE of a tensor with a symbolic dimension (`mask[:, :3]`, `images[..., ::-1]`
        under an unknown batch), with constant begin, end and strides, or bounds computed from
        shapes (a U-Net's centre crop, `x[:, d:d + h]` with `d = (tf.shape(x)[1] - h) // 2`):
        Relax's `strided_slice` on the axes it changes, with bounds clipped to each axis as
        TensorFlow clips them (`_axis_slice`), so that the result's shape is known (symbolically).
        TVM's converter calls `int()` on the input's shape, and reads the bounds as constants.
        New axes (`scores[:, tf.newaxis]` over a sequence of unknown length) are inserted after
        the slice; ellipsis masks are left to TVM."""
        from tflite.StridedSliceOptions import StridedSliceOptions
        from tvm import relax

        converter = self._converter
        data, *bounds = converter.get_input_tensors(op)
        begin, end, strides = (self.value(tensor) for tensor in bounds)
        options = StridedSliceOptions()
        options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
        shape = self.tensor_shape(data)
        new_axes = options.NewAxisMask()
        if shape is None or begin is None or end is None or strides is None or options.EllipsisMask():
            return upstream(op=op)
        entries = begin.size
        if entries - bin(new_axes & ((1 << entries) - 1)).count("1") > len(shape):
            return upstream(op=op)
        axes, starts, stops, steps, shrunk, inserted = [], [], [], [], [], []
        axis = kept = 0  # the data's axis the next entry slices; the result's axes made so far
        for entry, (start, stop, step) in enumerate(zip(begin.tolist(), end.tolist(), strides.tolist())):
            if new_axes >> entry & 1:
                inserted.append(kept)
                kept += 1
                continue
            masked = (options.BeginMask() >> entry & 1, options.EndMask() >> entry & 1)
            shrink = bool(options.ShrinkAxisMask() >> entry & 1)
            if shrink:
                shrunk.append(axis)
            else:
                kept += 1
            sliced = _axis_slice(shape[axis], start, stop, int(step), masked, shrink)
            if sliced is not None:
                axes.append(axis)
                starts.append(sliced[0])
                stops.append(sliced[1])
                steps.append(int(step))
            axis += 1
        expr = converter.get_tensor_expr(data)
        if axes:
            # Bounds for positive steps are clipped above; Relax clips those of negative ones.
            expr = relax.op.strided_slice(expr, axes, starts, stops, steps, assume_inbound=min(steps) > 0)
        if shrunk:
            expr = relax.op.squeeze(expr, shrunk)
        return relax.op.expand_dims(expr, inserted) if inserted else expr

    def _sized_slice(self, upstream: Callable[..., Any], op: Any) -> Any:
        """SLICE of a tensor with a symbolic dimension, by a constant begin and size (a size of -1:
        to the axis' end): Relax's `strided_slice` on the axes it changes. TensorFlow's converter
        writes `x[:, 2:]` over an unknown batch so (faustomorales/keras-ocr's recognizer drops its
        first two steps after its LSTMs), and TVM's converter calls `int()` on the input's shape."""
        from tvm import relax

        converter = self._converter
        data, *bounds = converter.get_input_tensors(op)
        begin, size = (self.value(tensor) for tensor in bounds)
        shape = self.tensor_shape(data)
        if shape is None or begin is None or size is None or not all(
                isinstance(value, int) for value in [*begin.tolist(), *size.tolist()]):
            return upstream(op=op)
        changed = [(axis, start, shape[axis] if count == -1 else start + count)
                   for axis, (start, count) in enumerate(zip(begin.tolist(), size.tolist()))
                   if start != 0 or (count != -1 and count != shape[axis])]
        expr = converter.get_tensor_expr(data)
        if not changed:
            return expr
        axes, starts, stops = (list(column) for column in zip(*changed))
        return relax.op.strided_slice(expr, axes, starts, stops, assume_inbound=True)

    def _strided_same(self, window_of: Callable[[Any, Any], _Window], upstream: Callable[..., Any], op: Any) -> Any:
        """A convolution or max pooling with 'SAME' padding at a stride over 1 on an image of
        unknown height or width (every Keras `Conv2D(strides=2, padding="same")`: MobileNetV2's
        first layer; `MaxPooling2D(padding="same")`): its input padded ahead for that size
        (`_padded_ahead`), then TVM's conversion without padding on those axes. The padding
        depends on the size's parity, which the operator's static padding attribute cannot hold:
        TVM's converter failed on `float()` of the size."""
        converter = self._converter
        data = converter.get_input_tensors(op)[0]
        window = window_of(converter, op)
        axes = self._padded_axes(data, window)
        if not axes:
            return upstream(op=op)
        prepared = self._padded_input(data, axes, window.fill)
        read = converter.get_expr
        converter.get_expr = lambda index, *args, **kwargs: (
            prepared if index == data.tensor_idx else read(index, *args, **kwargs))
        padded = _PADDED_AHEAD.set(True)
        try:
            return upstream(op=op)
        finally:
            _PADDED_AHEAD.reset(padded)
            del converter.get_expr  # the class's method again

    def _padded_axes(self, data: Any, window: _Window) -> list[tuple[int, Any, int, int]]:
        """(axis, size, window extent, stride) of each axis of `data` that a 'SAME' window pads
        by the size's parity: a symbolic height or width at a stride over 1."""
        from tflite.Padding import Padding

        shape = self.tensor_shape(data)
        if window.padding != Padding.SAME or shape is None:
            return []
        return [(axis, shape[axis], extent, stride) for axis, stride, extent in zip((1, 2), window.strides, window.extents)
                if stride > 1 and not isinstance(shape[axis], int)]

    def _padded_input(self, data: Any, axes: list[tuple[int, Any, int, int]], fill: float) -> Any:
        """`data`'s expression padded ahead (`_padded_ahead`) on each of `axes` (`_padded_axes`)."""
        prepared = self._converter.get_expr(data.tensor_idx)
        for axis, size, extent, stride in axes:
            prepared = _padded_ahead(prepared, axis, size, extent, stride, fill)
        return prepared

    def _strided_average(self, upstream: Callable[..., Any], op: Any) -> Any:
        """A float average pooling with 'SAME' padding at a stride over 1 on an image of unknown
        height or width: its input padded ahead with zeros (`_padded_ahead`), each window's mean
        divided by the share of it that lay on the image (TensorFlow's 'SAME' mean leaves the
        padding out, and the padding ahead made it part of the image): the mean of ones padded
        the same way, over those axes alone (the other axes' padding stays in the pooling, which
        leaves it out); the fused activation after that."""
        from tflite.Pool2DOptions import Pool2DOptions
        from tvm import relax
        from tvm.relax.frontend.tflite import tflite_frontend

        converter = self._converter
        data = converter.get_input_tensors(op)[0]
        window = _pool_window(False, converter, op)
        axes = self._padded_axes(data, window)
        dtype = converter.get_tensor_type_str(data.tensor.Type())
        if not axes or not dtype.startswith("float"):
            return upstream(op=op)
        options = Pool2DOptions()
        options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
        shape = self.tensor_shape(data)
        ahead = {axis: (size, extent, stride) for axis, size, extent, stride in axes}
        pads = [(0, 0) if axis in ahead else tflite_frontend.get_pad_value(shape[axis], extent, stride)
                for axis, extent, stride in zip((1, 2), window.extents, window.strides)]
        mean = relax.op.nn.avg_pool2d(self._padded_input(data, axes, 0.0), pool_size=window.extents,
                                      strides=window.strides, padding=[pads[0][0], pads[1][0], pads[0][1], pads[1][1]],
                                      layout="NHWC", count_include_pad=False)
        ones = relax.op.ones(relax.ShapeExpr([1, *(ahead[axis][0] if axis in ahead else 1 for axis in (1, 2)), 1]), dtype)
        for axis, size, extent, stride in axes:
            ones = _padded_ahead(ones, axis, size, extent, stride, 0.0)
        share = relax.op.nn.avg_pool2d(ones, pool_size=[ahead[axis][1] if axis in ahead else 1 for axis in (1, 2)],
                                       strides=[ahead[axis][2] if axis in ahead else 1 for axis in (1, 2)], layout="NHWC")
        return converter.convert_fused_activation_function(relax.op.divide(mean, share),
                                                           options.FusedActivationFunction())

    def _resize(self, upstream: Callable[..., Any], op: Any) -> Any:
        """RESIZE_* to a size computed from a symbolic shape (Keras `UpSampling2D` on an image of
        unknown height and width: AdaIN's decoder): TVM's own conversion, handed the evaluated
        (symbolic) size where it reads the size tensor's buffer."""
        _, size = self._converter.get_input_tensors(op)
        if size.tensor_idx not in self._values:
            return upstream(op=op)
        return self._handed(upstream, op, size)

    def _transposed_convolution(self, upstream: Callable[..., Any], op: Any) -> Any:
        """TRANSPOSE_CONV to an output shape computed from symbolic sizes (Keras `Conv2DTranspose`
        over an unknown batch: `tf.shape(x)[0]` packed with the static height, width and channels;
        over an image of unknown size: `h * stride` too). TVM's converter reads the output shape
        as a constant (`TypeError: a bytes-like object is required, not 'int'`), for the padding
        of 'SAME' and a check of the channels only: Relax infers the result's shape from the
        input. So it is handed the evaluated shape, with a stand-in for a symbolic height or
        width (`_padding_stand_in`), and the result's shape must be provably TFLite's."""
        from tvm import sym

        output_shape = self._converter.get_input_tensors(op)[0]
        if output_shape.tensor_idx not in self._values:
            return upstream(op=op)
        wanted = list(self._values[output_shape.tensor_idx].reshape(-1))
        handed = [wanted[0], *(self._padding_stand_in(op, axis, wanted[axis]) for axis in (1, 2)), wanted[3]]
        converted = self._converter.bb.normalize(self._handed(upstream, op, output_shape, handed))
        analyzer = sym.Analyzer()
        got = self._converter._infer_shape(converted)  # noqa: SLF001 - the frontend's own helper
        if got is None or not all(analyzer.can_prove_equal(g, w) for g, w in zip(got, wanted)):
            raise NotImplementedError(
                f"a transposed convolution (Keras Conv2DTranspose, tf.nn.conv2d_transpose) to an output of shape "
                f"{_shown(wanted)} known only at run time, which tfcheck cannot prove TVM's {_shown(got)} equals; "
                "give the input's dimensions sizes")
        return converted

    def _padding_stand_in(self, op: Any, axis: int, size: Any) -> Any:
        """An output `size` (axis 1 or 2) for TVM's converter: itself when known, else a number
        that gives the same 'SAME' padding, which TFLite computes from the output's size
        (`max((ceil(size / s) - 1) * s + k - size, 0)`): for a multiple of the stride, as Keras
        makes it (`h * s`), that is `max(k - s, 0)` at every size, as at the stride itself. 'VALID'
        reads no size."""
        from tflite.TransposeConvOptions import TransposeConvOptions
        from tvm import sym, tirx

        if isinstance(size, int):
            return size
        options = TransposeConvOptions()
        options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
        stride = options.StrideH() if axis == 1 else options.StrideW()
        if not sym.Analyzer().can_prove_equal(tirx.floormod(size, stride), 0):
            raise NotImplementedError(
                f"a transposed convolution (Keras Conv2DTranspose, tf.nn.conv2d_transpose) to an output size {_shown(size)} "
                f"known only at run time that is not a multiple of its stride {stride}: its 'SAME' padding would "
                "depend on the size; give the input's dimensions sizes")
        return stride

    def _handed(self, upstream: Callable[..., Any], op: Any, tensor: Any, value: list[Any] | None = None) -> Any:
        """TVM's conversion of `op`, handed `value` (by default the evaluated, symbolic value of its
        input `tensor`) where it reads that tensor's buffer as a constant."""
        converter = self._converter
        value = list(self._values[tensor.tensor_idx].reshape(-1)) if value is None else value
        read = converter.get_tensor_value
        converter.get_tensor_value = lambda wanted, *args, **kwargs: (
            value if wanted.tensor_idx == tensor.tensor_idx else read(wanted, *args, **kwargs))
        try:
            return upstream(op=op)
        finally:
            del converter.get_tensor_value  # the class's method again

    def _reshape(self, upstream: Callable[..., Any], op: Any) -> Any:
        """RESHAPE to a target computed from shapes: the evaluated (symbolic) target. A shape
        value reshaped (a scalar made a 1-vector before a CONCATENATION: Keras 3's `tf.repeat`
        in `UpSampling2D`) stays a shape value."""
        from tvm import relax

        tensors = self._converter.get_input_tensors(op)
        if len(tensors) < 2:
            return upstream(op=op)
        data, target_value = self._values.get(tensors[0].tensor_idx), self.value(tensors[1])
        if data is not None and target_value is not None and tensors[1].tensor_idx not in self._values:
            return self._record(op, data.reshape([int(dim) for dim in target_value.reshape(-1)]))
        if tensors[1].tensor_idx not in self._values:
            return upstream(op=op)
        target = list(self._values[tensors[1].tensor_idx].reshape(-1))
        return relax.op.reshape(self._converter.get_tensor_expr(tensors[0]), relax.ShapeExpr(target))
