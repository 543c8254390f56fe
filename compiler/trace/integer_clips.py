"""Integer clips kept as TFLite's MINIMUM and MAXIMUM, in the frozen graph before conversion.

`tf.clip_by_value(x, 0, 6)` is `Maximum(Minimum(x, 6), 0)` in the graph, and so is
`tf.minimum(tf.maximum(x, 0), 6)` the other way round. TensorFlow's converter fuses either pair,
once its bounds have folded to the constants 0 and 6, into one `Relu6`, whatever the dtype; TFLite
has RELU6 for float32 only, so an integer clip to [0, 6] fails the conversion ("uses TensorFlow op
Relu6"). keras-ocr's spatial transformer clips its int32 sampling indices to the feature map,
`tf.clip_by_value(x0, zero, max_x)` with `max_x = width - 1`, and its feature map is 7 wide.

The fusion matches the inner op as the outer op's first operand only: with the outer op's two
operands swapped (`Maximum(0, Minimum(x, 6))`, the same values: both ops are symmetric and
broadcast alike), the converter keeps MINIMUM and MAXIMUM, which TFLite and TVM have for integers.
So each integer `Maximum` whose first input is a `Minimum`, and each integer `Minimum` whose first
input is a `Maximum`, gets its inputs swapped; floats are left to the fusion (float RELU6 is a
builtin). Nodes inside a library function (a loop's body) are not rewritten.
"""

from __future__ import annotations

from typing import Any

from tfcheck.compiler.trace.graph_nodes import with_rewrites

# The outer op of a clip -> the inner op it fuses with.
_PAIRS = {"Maximum": "Minimum", "Minimum": "Maximum"}
# DataType enums of the floating dtypes (tensorflow/core/framework/types.proto): float, double,
# bfloat16, half.
_FLOATS = {1, 2, 14, 19}


def clips_as_min_max(graph_def: Any) -> Any:
    """A copy of `graph_def` with each integer clip's outer op taking its inputs the other way
    round (see the module); `graph_def` itself when it has none."""
    producers = {node.name: node for node in graph_def.node}
    found = {index: None for index, node in enumerate(graph_def.node) if _outer_of_integer_clip(node, producers)}
    return with_rewrites(graph_def, found, _swap)


def _outer_of_integer_clip(node: Any, producers: dict[str, Any]) -> bool:
    if node.op not in _PAIRS or node.attr["T"].type in _FLOATS:
        return False
    data = [name for name in node.input if not name.startswith("^")]
    inner = producers.get(data[0].split(":")[0]) if len(data) == 2 else None
    return inner is not None and inner.op == _PAIRS[node.op]


def _swap(graph_def: Any, node: Any, plan: None, taken: set[str]) -> None:
    first, second = node.input[0], node.input[1]
    node.input[0], node.input[1] = second, first
