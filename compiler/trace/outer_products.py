"""Integer outer products as broadcast multiplies, in the frozen graph before conversion.

TFLite's matrix products (FULLY_CONNECTED, BATCH_MATMUL) take float32 and quantized tensors, not
int32, so an integer `tf.matmul` fails the conversion ("uses TensorFlow op MatMul on int32
tensors"). A spatial transformer's `_repeat`, copied from one implementation to the next (keras-ocr's
recognizer among them), repeats each index with one:

    ones = tf.ones((1, num_repeats), dtype="int32")
    x = tf.matmul(tf.reshape(x, shape=(-1, 1)), ones)

A product whose contracted dimension is 1 is an outer product, `a[:, 0:1] * b[0:1, :]`: each
integer `MatMul` of such operands (by the static shapes the traced graph knows) becomes a `Mul` of
`a` reshaped to a column and `b` reshaped to a row, which TFLite has for integers (exact: the same
products, no sums). Any other integer product is left as it was, and the conversion names its dtype.
"""

from __future__ import annotations

from typing import Any

from tfcheck.compiler.trace.graph_nodes import NodeMaker, become, with_rewrites

# DataType enums of the floating dtypes (tensorflow/core/framework/types.proto): float, double,
# bfloat16, half; every other MatMul dtype is an integer one.
_FLOATS = {1, 2, 14, 19}


def outer_products_as_multiplies(graph_def: Any, graph: Any) -> Any:
    """A copy of `graph_def` (the GraphDef of `graph`) with each integer MatMul over a contraction
    of 1 turned into a broadcast Mul (see the module); `graph_def` itself when it has none."""
    found = {index: None for index, node in enumerate(graph_def.node) if _integer_outer_product(node, graph)}
    return with_rewrites(graph_def, found, _as_multiply)


def _integer_outer_product(node: Any, graph: Any) -> bool:
    if node.op != "MatMul" or node.attr["T"].type in _FLOATS:
        return False
    first = graph.get_operation_by_name(node.name).inputs[0].shape
    if first.rank != 2:
        return False
    contracted = first[0] if node.attr["transpose_a"].b else first[1]
    return contracted == 1


def _as_multiply(graph_def: Any, node: Any, plan: None, taken: set[str]) -> None:
    nodes = NodeMaker(graph_def, f"{node.name}/outer", taken)
    dtype = node.attr["T"].type
    column = nodes.reshape("column", node.input[0], [-1, 1], dtype)
    row = nodes.reshape("row", node.input[1], [1, -1], dtype)
    become(node, "Mul", [column, row])
    node.attr["T"].type = dtype
