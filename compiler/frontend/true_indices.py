"""TFLite's WHERE with one input: the indices of the true elements, a size the data decide.

`tf.where(condition)` and `tf.boolean_mask` (WHERE, then GATHER_ND at those indices) return as many
rows as the condition has true elements: YOLOv4's `filter_boxes` keeps the boxes over a score
threshold that way (hunglc007/tensorflow-yolov4-tflite, issue 42). TVM's converter takes only the
three-input WHERE (`tf.where(c, x, y)`, a select) and failed on it with an AssertionError.

The count becomes a fresh `tir` variable, so everything after it (the gather, reshapes computed from
its SHAPE, concatenations) is imported over that size as over an unknown input dimension
(`symbolic_import.py`), and the VM allocates the outputs at the size each call finds. The indices are
computed from operators every backend lowers (a cumulative sum, a scatter, a take): TVM's own
`relax.op.nonzero` runs through a NumPy function registered by TVM's Python package, which the
build's verification found and production's runtime, which has no TVM, did not. SPARSE_TO_DENSE,
which densifies such indices (a CTC decoder's), imports here too, as a scatter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def has_true_indices(model: Any) -> bool:
    """Whether the flatbuffer has a WHERE of one input (its import needs symbolic sizes)."""
    from tflite.BuiltinOperator import BuiltinOperator

    for s in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(s)
        for o in range(subgraph.OperatorsLength()):
            op = subgraph.Operators(o)
            code = model.OperatorCodes(op.OpcodeIndex())
            if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == BuiltinOperator.WHERE and op.InputsLength() == 1:
                return True
    return False


def convert_where(converter: Any, select: Callable[[Any], Any], op: Any) -> Any:
    """WHERE of one input as TensorFlow's (count, rank) indices of the true elements, the count a
    fresh symbolic size; WHERE of three inputs (a select) as TVM converts it."""
    from tvm import relax

    inputs = converter.get_input_tensors(op)
    if len(inputs) != 1:
        return select(op)
    bb = converter.bb
    condition = bb.normalize(converter.get_tensor_expr(inputs[0]))
    shape, dtype = list(condition.ty.shape), condition.ty.dtype
    if not shape:
        raise NotImplementedError("tf.where of a scalar condition (a [count, 0] result) is not converted")
    if dtype != "bool":
        condition = relax.op.not_equal(condition, relax.const(0, dtype))
    flat = bb.normalize(relax.op.reshape(condition, [_product(shape)]))
    found = bb.normalize(relax.op.sum(relax.op.astype(flat, "int64")))
    output = converter.get_output_tensors(op)[0]
    # named after the WHERE's output tensor: one name per count in the module, the same every import
    count = converter._scalar_tensor_to_dim(found, f"true_count_{output.tensor_idx}")  # noqa: SLF001 - the frontend's bridge
    positions = _true_positions(bb, flat, found, count)
    indices = relax.op.concat([relax.op.expand_dims(index, 1) for index in _unravelled(positions, shape)], axis=1)
    return relax.op.astype(indices, converter.get_tensor_type_str(output.tensor.Type()))


def _product(sizes: list[Any]) -> Any:
    total: Any = 1
    for size in sizes:
        total = total * size
    return total


def _unravelled(positions: Any, shape: list[Any]) -> list[Any]:
    """The index on each axis of a flat (row-major) position: `position // stride % size`."""
    from tvm import relax

    def as_tensor(value: Any) -> Any:
        return relax.op.astype(relax.op.shape_to_tensor(relax.ShapeExpr([value])), "int64")

    indices = []
    for axis, size in enumerate(shape):
        index = relax.op.floor_divide(positions, as_tensor(_product(shape[axis + 1:])))
        indices.append(index if axis == 0 else relax.op.floor_mod(index, as_tensor(size)))
    return indices


def _true_positions(bb: Any, flat: Any, found: Any, count: Any) -> Any:
    """The flat positions of the true elements of `flat`, in order, from operators every backend
    lowers: each true element's rank among them (a cumulative sum) is where its position goes; the
    false ones all go to one spare slot past the end (`found`, the count as a tensor: made from the
    symbolic `count` instead, FuseTIR met its variable twice where the mask's length is symbolic),
    cut off after the scatter."""
    from tvm import relax

    length = flat.ty.shape[0]
    ones = relax.op.astype(flat, "int64")
    rank = relax.op.subtract(relax.op.cumsum(ones, axis=0), relax.const(1, "int64"))
    slots = relax.op.where(flat, rank, relax.op.broadcast_to(found, [length]))
    every = relax.op.arange(0, length, 1, "int64")
    scattered = relax.op.scatter_elements(relax.op.zeros(relax.ShapeExpr([count + 1]), "int64"), slots, every, axis=0)
    return bb.normalize(relax.op.take(scattered, relax.op.arange(0, count, 1, "int64"), axis=0))


def convert_sparse_to_dense(converter: Any, op: Any) -> Any:
    """SPARSE_TO_DENSE (`tf.sparse.to_dense`, which often densifies indices of a data-decided count:
    a CTC decoder's) as a scatter into the default value. TVM's converter called
    `topi.sparse_to_dense`, which its compiler registers and the runtime does not, and read the shape
    as a constant; here the shape may be computed from shapes (`ShapeValues`: a symbolic batch)."""
    from tvm import relax

    indices, shape_tensor, values, default = converter.get_input_tensors(op)
    shape = converter.shape_values.value(shape_tensor)
    if shape is None:
        raise NotImplementedError("SPARSE_TO_DENSE to a shape computed from values, not from shapes")
    dims = list(shape.reshape(-1))
    bb = converter.bb
    where = bb.normalize(converter.get_tensor_expr(indices))
    if len(where.ty.shape) == 1:
        where = relax.op.expand_dims(where, 1)
    updates = bb.normalize(converter.get_tensor_expr(values))
    count = bb.normalize(where).ty.shape[0]
    if len(updates.ty.shape) == 0:
        updates = relax.op.broadcast_to(updates, relax.ShapeExpr([count]))
    fill = relax.op.broadcast_to(relax.op.reshape(converter.get_tensor_expr(default), []), relax.ShapeExpr(dims))
    return relax.op.scatter_nd(fill, relax.op.astype(where, "int64"), updates, "update")
