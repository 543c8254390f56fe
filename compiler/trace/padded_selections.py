"""A non-max suppression padded by hand to its maximum, as TensorFlow's padded suppression, in the
frozen graph before conversion.

`tf.image.non_max_suppression` (NonMaxSuppressionV3) and `..._with_scores` (V5) return as many
indices (and scores) as they select, `n`; detection code that must return a fixed number of boxes
pads them to `max_output_size` with zeros and reports `n` from their shape. zzh8829/yolov3-tf2's
`yolo_nms` (yolov3_tf2/models.py at 2784050):

    num_valid_nms_boxes = tf.shape(selected_indices)[0]
    selected_indices = tf.concat([selected_indices, tf.zeros(FLAGS.yolo_max_boxes - num_valid_nms_boxes, tf.int32)], 0)

TFLite's NON_MAX_SUPPRESSION_V4/V5 always return `max_output_size` entries (zeros past the `n`
selected) and `n` as a third output, and the converter maps TensorFlow's unpadded op onto it: the
`Shape` of the selection is then `max_output_size`, not `n`, so the count came out as 100 where
TensorFlow said 0 (and with it the padding's size). This rewrite does what the code means: the
suppression becomes its padded form (`pad_to_max_output_size`, V3 as V4, which pads with zeros
exactly as the code does), each such concatenation becomes that padded output, and each `Shape` of
the selection becomes `[n]` from the padded form's count. It applies only when every consumer of
the selection is one of those two, with the padding's size `max_output_size - shape(selection)[0]`
and its value zero; any other use of the unpadded selection keeps the op as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcheck.compiler.trace.graph_nodes import INT32, NodeMaker, become, constant_value, with_rewrites

# Unpadded suppressions -> (the op of their padded form, its output that counts the selected,
# how many outputs are selections: indices, and scores for V5).
_PADDED_FORMS = {"NonMaxSuppressionV3": ("NonMaxSuppressionV4", 1, 1),
                 "NonMaxSuppressionV4": ("NonMaxSuppressionV4", 1, 1),
                 "NonMaxSuppressionV5": ("NonMaxSuppressionV5", 2, 2)}
# Ops a size passes through unchanged on its way to a Fill (a scalar made a 1-element shape).
_SIZE_PASSES = {"Identity", "Reshape", "ExpandDims", "Pack"}


@dataclass(frozen=True)
class _Plan:
    """What one node becomes: `pad` (the suppression, `op` its padded form), `padded` (a
    concatenation, now `source`, a padded output), `count` (a Shape, now `[source]`, the count)."""

    kind: str
    source: str = ""
    op: str = ""


def padded_suppressions(graph_def: Any) -> Any:
    """A copy of `graph_def` with each suppression padded by hand turned into its padded form (see
    the module); `graph_def` itself when there is none."""
    if not any(node.op in _PADDED_FORMS for node in graph_def.node):
        return graph_def
    nodes = {node.name: node for node in graph_def.node}
    consumers = _consumers(graph_def)
    index = {node.name: position for position, node in enumerate(graph_def.node)}
    plans: dict[int, _Plan] = {}
    for node in graph_def.node:
        if node.op in _PADDED_FORMS and not _padded_already(node):
            plans.update({index[name]: plan for name, plan in _plans_for(node, nodes, consumers).items()})
    return with_rewrites(graph_def, plans, _rewrite)


def _padded_already(node: Any) -> bool:
    return "pad_to_max_output_size" in node.attr and node.attr["pad_to_max_output_size"].b


def _plans_for(suppression: Any, nodes: dict[str, Any], consumers: dict[str, list[Any]]) -> dict[str, _Plan]:
    """The plans for one suppression and the consumers of its selection; none when a consumer is
    neither a Shape nor a padding to `max_output_size` with zeros."""
    op, count, selections = _PADDED_FORMS[suppression.op]
    maximum = constant_value(nodes.get(_node_name(suppression.input[2])))
    if maximum is None or maximum.size != 1:
        return {}
    plans = {suppression.name: _Plan("pad", op=op)}
    for output in range(selections):
        tensor = _tensor(suppression.name, output)
        for consumer in consumers.get(tensor, []):
            if consumer.op == "Shape" and consumer.attr["out_type"].type == INT32:
                plans[consumer.name] = _Plan("count", source=_tensor(suppression.name, count))
            elif _pads_to(consumer, tensor, int(maximum.item()), suppression.name, nodes):
                plans[consumer.name] = _Plan("padded", source=tensor)
            else:
                return {}
    return plans if any(plan.kind == "padded" for plan in plans.values()) else {}


def _pads_to(concat: Any, tensor: str, maximum: int, suppression: str, nodes: dict[str, Any]) -> bool:
    """Whether `concat` is `tf.concat([tensor, zeros(maximum - shape(selection)[0])], 0)` (or axis
    -1: the selection is one-dimensional)."""
    data = _data_inputs(concat)
    if concat.op != "ConcatV2" or len(data) != 3 or _tensor_of(data[0]) != tensor:
        return False
    axis, fill = constant_value(nodes.get(_node_name(data[2]))), nodes.get(_node_name(data[1]))
    if axis is None or axis.size != 1 or int(axis.item()) not in (0, -1) or fill is None or fill.op != "Fill":
        return False
    value = constant_value(nodes.get(_node_name(fill.input[1])))
    return value is not None and not np.any(value) and _is_remainder(fill.input[0], maximum, suppression, nodes)


def _is_remainder(size: str, maximum: int, suppression: str, nodes: dict[str, Any]) -> bool:
    """Whether `size` is `maximum - shape(selection)[0]`, a scalar or a one-element shape."""
    node = nodes.get(_node_name(size))
    while node is not None and node.op in _SIZE_PASSES:
        data = _data_inputs(node)
        if not data or (node.op == "Pack" and len(data) != 1):
            return False
        node = nodes.get(_node_name(data[0]))
    if node is None or node.op != "Sub":
        return False
    minuend = constant_value(nodes.get(_node_name(node.input[0])))
    if minuend is None or minuend.size != 1 or int(minuend.item()) != maximum:
        return False
    return _is_selection_length(nodes.get(_node_name(node.input[1])), suppression, nodes)


def _is_selection_length(node: Any, suppression: str, nodes: dict[str, Any]) -> bool:
    """Whether `node` is `tf.shape(selection)[0]`: a StridedSlice [0:1] that drops its axis, of a
    Shape of one of the suppression's selections."""
    if node is None or node.op != "StridedSlice" or node.attr["shrink_axis_mask"].i != 1:
        return False
    bounds = [constant_value(nodes.get(_node_name(name))) for name in node.input[1:4]]
    if any(bound is None for bound in bounds) or [bound.tolist() for bound in bounds] != [[0], [1], [1]]:
        return False
    shape = nodes.get(_node_name(node.input[0]))
    return shape is not None and shape.op == "Shape" and _node_name(shape.input[0]) == suppression


def _rewrite(graph_def: Any, node: Any, plan: _Plan, taken: set[str]) -> None:
    if plan.kind == "pad":
        node.op = plan.op
        node.attr["pad_to_max_output_size"].b = True
    elif plan.kind == "padded":
        dtype = node.attr["T"].type
        become(node, "Identity", [plan.source])
        node.attr["T"].type = dtype
    else:
        shape = NodeMaker(graph_def, f"{node.name}/count", taken).reshape("shape", plan.source, [1], INT32)
        become(node, "Identity", [shape])
        node.attr["T"].type = INT32


def _consumers(graph_def: Any) -> dict[str, list[Any]]:
    """Tensor name (`node:output`) -> the nodes that take it as a data input."""
    found: dict[str, list[Any]] = {}
    for node in graph_def.node:
        for name in _data_inputs(node):
            found.setdefault(_tensor_of(name), []).append(node)
    return found


def _data_inputs(node: Any) -> list[str]:
    return [name for name in node.input if not name.startswith("^")]


def _tensor(node: str, output: int) -> str:
    return f"{node}:{output}"


def _tensor_of(name: str) -> str:
    """`node:output` for an input name (`node` means output 0)."""
    return name if ":" in name else f"{name}:0"


def _node_name(name: str) -> str:
    return name.lstrip("^").split(":")[0]
