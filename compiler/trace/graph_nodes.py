"""Nodes added to a frozen GraphDef, without TensorFlow: what the rewrites before conversion share.

The rewrites that replace an op TFLite has no builtin for (`pooling3d.py`, `image_patches.py`)
edit the GraphDef as a protocol buffer: only `bridge.py` imports TensorFlow. Each replaces one node
by a few new ones named under it (a name no node of the graph has) and turns the node itself into
the last of them, so that its consumers read the result under the name they already read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

Plan = TypeVar("Plan")

# DataType enums (tensorflow/core/framework/types.proto) of the constants the rewrites write.
INT32 = 3
_DATA_TYPES = {np.dtype("float32"): 1, np.dtype("int32"): INT32}
# DataType enum -> (NumPy dtype, the TensorProto field of its values when not in tensor_content).
_VALUE_FIELDS = {1: (np.dtype("float32"), "float_val"), INT32: (np.dtype("int32"), "int_val"),
                 9: (np.dtype("int64"), "int64_val")}


def with_rewrites(graph_def: Any, plans: dict[int, Plan],
                  rewrite: Callable[[Any, Any, Plan, set[str]], None]) -> Any:
    """A copy of `graph_def` in which `rewrite(copy, node, plan, taken)` has replaced the node at
    each index of `plans` (`taken`: the node names in use, for `NodeMaker`); `graph_def` itself
    when there is no plan."""
    if not plans:
        return graph_def
    rewritten = type(graph_def)()
    rewritten.CopyFrom(graph_def)
    taken = {node.name for node in graph_def.node}
    for index, plan in plans.items():  # the new nodes go after these indices
        rewrite(rewritten, rewritten.node[index], plan, taken)
    return rewritten


class NodeMaker:
    """Adds nodes to `graph_def`, each named `<prefix>/<suffix>` or that with a number after it,
    whichever no node has (`taken`: the names in use, updated)."""

    def __init__(self, graph_def: Any, prefix: str, taken: set[str]) -> None:
        self._graph_def, self._prefix, self._taken = graph_def, prefix, taken

    def add(self, suffix: str, op: str, inputs: list[str]) -> Any:
        """A new node running `op` on `inputs`, without attributes yet."""
        added = self._graph_def.node.add()
        added.name, added.op = self._fresh(f"{self._prefix}/{suffix}"), op
        added.input.extend(inputs)
        return added

    def constant(self, suffix: str, value: np.ndarray) -> str:
        """The name of a new Const node holding `value` (int32 or float32)."""
        node = self.add(suffix, "Const", [])
        node.attr["dtype"].type = _DATA_TYPES[value.dtype]
        fill_tensor(node.attr["value"].tensor, value)
        return node.name

    def reshape(self, suffix: str, source: str, shape: list[int], dtype: int) -> str:
        """The name of a new Reshape of `source` (a `dtype` tensor) to `shape` (-1 for one unknown size)."""
        node = self.add(suffix, "Reshape", [source, self.constant(f"{suffix}_shape", np.array(shape, np.int32))])
        reshape_attrs(node, dtype)
        return node.name

    def _fresh(self, name: str) -> str:
        candidate, number = name, 1
        while candidate in self._taken:
            candidate, number = f"{name}_{number}", number + 1
        self._taken.add(candidate)
        return candidate


def reshape_attrs(node: Any, dtype: int) -> None:
    """The attributes of a Reshape of a `dtype` tensor to an int32 shape."""
    node.attr["T"].type, node.attr["Tshape"].type = dtype, INT32


def become(node: Any, op: str, inputs: list[str]) -> None:
    """Turn `node` into `op` of `inputs`, keeping its name and its control inputs; its attributes
    are cleared for the caller to set."""
    controls = [name for name in node.input if name.startswith("^")]
    node.op = op
    node.ClearField("input")
    node.input.extend([*inputs, *controls])
    node.ClearField("attr")


def fill_tensor(tensor: Any, value: np.ndarray) -> None:
    """Fill the TensorProto `tensor` with `value`, as `tf.make_tensor_proto` does (dtype, shape,
    then the little-endian bytes as `tensor_content`)."""
    tensor.dtype = _DATA_TYPES[value.dtype]
    for size in value.shape:
        tensor.tensor_shape.dim.add().size = size
    tensor.tensor_content = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()


def constant_value(node: Any) -> np.ndarray | None:
    """The value of a Const node of float32, int32 or int64 (as `tf.make_ndarray` reads it: the
    bytes of `tensor_content`, or the typed values, the last one repeated to fill the shape); None
    for anything else."""
    if node is None or node.op != "Const" or node.attr["dtype"].type not in _VALUE_FIELDS:
        return None
    tensor = node.attr["value"].tensor
    dtype, field = _VALUE_FIELDS[node.attr["dtype"].type]
    shape = [dim.size for dim in tensor.tensor_shape.dim]
    count = int(np.prod(shape, dtype=np.int64))
    if tensor.tensor_content:
        return np.frombuffer(tensor.tensor_content, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)
    values = list(getattr(tensor, field))
    if not values:
        return np.zeros(shape, dtype)
    return np.array(values + values[-1:] * (count - len(values)), dtype).reshape(shape)
