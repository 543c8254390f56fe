"""Importing a TFLite flatbuffer with symbolic (unknown) dimensions into Relax.

TensorFlow's converter keeps an unknown dimension as -1 in each tensor's `shape_signature` (its
`shape` holds 1 there). TVM's TFLite frontend takes the input shapes from `shape_dict`, so giving
it `tir.Var`s there is most of the work: Relax infers every shape after that from the inputs'.
Three things in the frontend assume static shapes, and are handled here, for the import only:

- `to_int_list`, which its converters call on inferred shapes, calls `int()` on every dimension:
  during the import it keeps symbolic dimensions as they are (`symbolic_int_lists`);
- `get_tensor_shape` answers with TFLite's `shape`, so 1 for an unknown dimension: tfcheck's
  converter asks the tensor's Relax expression instead (`ShapeValues.tensor_shape`);
- TensorFlow computes reshape targets at run time from the input's shape (`SHAPE`, then
  `GATHER`, `CONCATENATION`, `UNSORTED_SEGMENT_PROD`, ... on the shape vector; MultiHeadAttention's
  einsums do). TVM's RESHAPE needs the target as a constant. `ShapeValues` evaluates such shape
  arithmetic on symbolic values (NumPy object arrays of `tir` expressions) while converting, and
  RESHAPE (and the shape ops themselves) then get the symbolic target.

Any other operator that cannot take a symbolic size fails the import, naming the operator and its
TensorFlow node (`importer._named_error`), and the build falls back or says so (docs/build.md).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tfcheck.compiler.tflite_values import constant_value


def input_shapes(model: Any, inputs: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]] | None:
    """`shape_dict` for `from_tflite`: each input tensor's shape with its named dimensions as
    `tir.Var`s (one per name, shared by the inputs that use it); None when all are static."""
    from tvm import tirx

    if not any(isinstance(dim, str) for spec in inputs for dim in spec["shape"]):
        return None
    subgraph = model.Subgraphs(0)
    variables: dict[str, Any] = {}
    shapes = {}
    for index, spec in zip(subgraph.InputsAsNumpy(), inputs):
        name = subgraph.Tensors(int(index)).Name().decode("utf-8")
        shapes[name] = tuple(variables.setdefault(dim, tirx.Var(dim, "int64")) if isinstance(dim, str) else dim
                             for dim in spec["shape"])
    return shapes


def with_upper_bounds(module: Any, dims: dict[str, Any]) -> Any:
    """`main` with `tir_var_upper_bound` for the bounded dimensions (Relax plans memory with it)."""
    bounds = {name: int(dim["max"]) for name, dim in dims.items() if dim.get("max") is not None}
    if bounds:
        module["main"] = module["main"].with_attr("tir_var_upper_bound", bounds)
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
    dimensions (it raised TypeError on them, e.g. FULLY_CONNECTED with `keep_num_dims`)."""
    from tvm.relax.frontend.tflite import tflite_frontend

    if not enabled:
        yield
        return
    original = tflite_frontend.to_int_list
    tflite_frontend.to_int_list = lambda values: [_int_or_symbolic(value) for value in values]
    try:
        yield
    finally:
        tflite_frontend.to_int_list = original


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
    return np.array(list(parts), dtype=object)


def _segment_product(converter: Any, op: Any, data: np.ndarray, ids: np.ndarray, count: np.ndarray) -> np.ndarray:
    if data.ndim != 1:
        raise _NotShapeArithmetic
    return np.array([functools.reduce(lambda a, b: a * b, data[ids == segment], 1) for segment in range(int(count))],
                    dtype=object)


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
    return sliced[0] if options.ShrinkAxisMask() & 1 else sliced


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
    "STRIDED_SLICE": _strided_slice,
    "MUL": _elementwise(lambda a, b: a * b),
    "ADD": _elementwise(lambda a, b: a + b),
    "SUB": _elementwise(lambda a, b: a - b),
    "FLOOR_DIV": _elementwise(_floor_div),
    "CAST": _cast,
}


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

    def _value(self, tensor: Any) -> np.ndarray | None:
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
        values = [self._value(tensor) for tensor in tensors]
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

    def _reshape(self, upstream: Callable[..., Any], op: Any) -> Any:
        """RESHAPE to a target computed from shapes: the evaluated (symbolic) target."""
        from tvm import relax

        tensors = self._converter.get_input_tensors(op)
        if len(tensors) < 2 or tensors[1].tensor_idx not in self._values:
            return upstream(op=op)
        target = list(self._values[tensors[1].tensor_idx].reshape(-1))
        return relax.op.reshape(self._converter.get_tensor_expr(tensors[0]), relax.ShapeExpr(target))
