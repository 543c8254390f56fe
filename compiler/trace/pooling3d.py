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

from tfcheck.compiler.trace.graph_nodes import NodeMaker, become, reshape_attrs, with_rewrites

# TensorFlow's 3-D pooling op -> the 2-D op that computes it one plane at a time.
_PLANE_POOLS = {"MaxPool3D": "MaxPool", "AvgPool3D": "AvgPool"}


def pools_as_2d(graph_def: Any, graph: Any) -> Any:
    """A copy of `graph_def` (the GraphDef of `graph`) with each 3-D pooling it can rewrite (see
    the module) replaced by 2-D poolings; `graph_def` itself when it has none."""
    found = {index: shapes for index, node in enumerate(graph_def.node)
             if node.op in _PLANE_POOLS and (shapes := _shapes(node, graph)) is not None}
    return with_rewrites(graph_def, found, _as_plane_pools)


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


def _as_plane_pools(graph_def: Any, node: Any, shapes: tuple[list[int], list[int]], taken: set[str]) -> None:
    """Turn `node` into the last reshape of the chain in the module docstring; the rest are new
    nodes named under it."""
    (depth, height, width, channels), (depth_out, height_out, width_out, _) = shapes
    kernel, strides = list(node.attr["ksize"].list.i), list(node.attr["strides"].list.i)
    dtype, padding, op = node.attr["T"].type, node.attr["padding"].s, _PLANE_POOLS[node.op]
    nodes = NodeMaker(graph_def, f"{node.name}/plane_pool", taken)

    def pool(suffix: str, source: str, window: list[int], steps: list[int]) -> str:
        pooled = nodes.add(suffix, op, [source])
        pooled.attr["T"].type, pooled.attr["padding"].s, pooled.attr["data_format"].s = dtype, padding, b"NHWC"
        pooled.attr["ksize"].list.i.extend([1, *window, 1])
        pooled.attr["strides"].list.i.extend([1, *steps, 1])
        return pooled.name

    planes = pool("plane", nodes.reshape("planes", node.input[0], [-1, height, width, channels], dtype),
                  kernel[2:4], strides[2:4])
    columns = nodes.reshape("columns", planes, [-1, depth, height_out * width_out, channels], dtype)
    across = pool("depth", columns, [kernel[1], 1], [strides[1], 1])
    shape = nodes.constant("shape", np.array([-1, depth_out, height_out, width_out, channels], np.int32))
    become(node, "Reshape", [across, shape])
    reshape_attrs(node, dtype)
