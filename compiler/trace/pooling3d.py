"""3-D pooling as two 2-D poolings, in the frozen graph before its conversion to TFLite.

TFLite has no builtin for TensorFlow's `MaxPool3D` and `AvgPool3D` (Keras `MaxPooling3D`,
`AveragePooling3D`): with builtins only the conversion fails, and the custom op the converter
can emit instead runs neither in TVM's importer nor in TFLite's Python interpreter. Pooling over a
box is separable, though: the maximum over a D x H x W window is the maximum over D of the maxima
over H x W, and an average is the product of the per-axis averages, padding included (TensorFlow
counts only the elements inside the input along each axis, and the count of a box is the product
of those counts). So each such node of an NDHWC graph with static D, H, W and C becomes

    [N, D, H, W, C] -reshape-> [N*D, H, W, C] -pool (kh, kw)-> [N*D, H', W', C]
      -reshape-> [N, D, H'*W', C] -pool (kd, 1)-> [N, D', H'*W', C] -reshape-> [N, D', H', W', C]

keeping the node's name (its consumers read the last reshape). The converter turns these into
MAX_POOL_2D / AVERAGE_POOL_2D, which TFLite, TVM and the schedules know. An unknown batch size is
fine (the reshapes say -1 there); any other form is left as it was, and the conversion names it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# TensorFlow's 3-D pooling op -> the 2-D op that computes it one plane at a time.
_PLANE_POOLS = {"MaxPool3D": "MaxPool", "AvgPool3D": "AvgPool"}
_INT32 = 3  # DataType DT_INT32 (tensorflow/core/framework/types.proto)


def pools_as_2d(graph_def: Any, graph: Any) -> Any:
    """A copy of `graph_def` (the GraphDef of `graph`) with each 3-D pooling it can rewrite (see
    the module) replaced by 2-D poolings; `graph_def` itself when it has none."""
    found = {index: shapes for index, node in enumerate(graph_def.node)
             if node.op in _PLANE_POOLS and (shapes := _shapes(node, graph)) is not None}
    if not found:
        return graph_def
    rewritten = type(graph_def)()
    rewritten.CopyFrom(graph_def)
    taken = {node.name for node in graph_def.node}
    for index, shapes in found.items():  # the new nodes go after these indices
        _as_plane_pools(rewritten, rewritten.node[index], *shapes, taken)
    return rewritten


def _shapes(node: Any, graph: Any) -> tuple[list[int], list[int]] | None:
    """The pooling's input [D, H, W, C] and output [D', H', W', C] sizes, or None unless the node
    is NDHWC and all of them are known."""
    if node.attr["data_format"].s not in (b"", b"NDHWC"):
        return None
    operation = graph.get_operation_by_name(node.name)
    given, result = operation.inputs[0].shape, operation.outputs[0].shape
    if given.rank != 5 or result.rank != 5:
        return None
    sizes = given.as_list()[1:], result.as_list()[1:]
    return None if any(size is None for part in sizes for size in part) else sizes


def _as_plane_pools(graph_def: Any, node: Any, given: list[int], result: list[int], taken: set[str]) -> None:
    """Turn `node` into the last reshape of the chain in the module docstring; the rest are new
    nodes named under it."""
    (depth, height, width, channels), (depth_out, height_out, width_out, _) = given, result
    kernel, strides = list(node.attr["ksize"].list.i), list(node.attr["strides"].list.i)
    dtype, padding, op = node.attr["T"].type, node.attr["padding"].s, _PLANE_POOLS[node.op]

    def add(suffix: str, node_op: str, inputs: list[str]) -> Any:
        added = graph_def.node.add()
        added.name, added.op = _fresh(f"{node.name}/plane_pool/{suffix}", taken), node_op
        added.input.extend(inputs)
        return added

    def shape(suffix: str, values: list[int]) -> str:
        constant = add(suffix, "Const", [])
        constant.attr["dtype"].type = _INT32
        _int32_vector(constant.attr["value"].tensor, values)
        return constant.name

    def reshape(suffix: str, source: str, values: list[int]) -> str:
        reshaped = add(suffix, "Reshape", [source, shape(f"{suffix}_shape", values)])
        _reshape_attrs(reshaped, dtype)
        return reshaped.name

    def pool(suffix: str, source: str, window: list[int], steps: list[int]) -> str:
        pooled = add(suffix, op, [source])
        pooled.attr["T"].type, pooled.attr["padding"].s, pooled.attr["data_format"].s = dtype, padding, b"NHWC"
        pooled.attr["ksize"].list.i.extend([1, *window, 1])
        pooled.attr["strides"].list.i.extend([1, *steps, 1])
        return pooled.name

    planes = pool("plane", reshape("planes", node.input[0], [-1, height, width, channels]), kernel[2:4], strides[2:4])
    columns = reshape("columns", planes, [-1, depth, height_out * width_out, channels])
    across = pool("depth", columns, [kernel[1], 1], [strides[1], 1])
    controls = [name for name in node.input if name.startswith("^")]
    node.op = "Reshape"
    node.ClearField("input")
    node.input.extend([across, shape("shape", [-1, depth_out, height_out, width_out, channels]), *controls])
    node.ClearField("attr")
    _reshape_attrs(node, dtype)


def _reshape_attrs(node: Any, dtype: int) -> None:
    """The attributes of a Reshape of a `dtype` tensor to an int32 shape."""
    node.attr["T"].type, node.attr["Tshape"].type = dtype, _INT32


def _fresh(name: str, taken: set[str]) -> str:
    """`name`, or it with a number after it, whichever no node of the graph has."""
    candidate, number = name, 1
    while candidate in taken:
        candidate, number = f"{name}_{number}", number + 1
    taken.add(candidate)
    return candidate


def _int32_vector(tensor: Any, values: list[int]) -> None:
    """Fill the TensorProto `tensor` with the int32 vector `values`, as `tf.make_tensor_proto` does
    (shape, then the little-endian bytes as `tensor_content`), without importing TensorFlow: the
    GraphDef is a protocol buffer, and only `trace/bridge.py` imports TensorFlow."""
    tensor.dtype = _INT32
    tensor.tensor_shape.dim.add().size = len(values)
    tensor.tensor_content = np.array(values, dtype="<i4").tobytes()
