"""Writes of a variable's own value, dropped before freezing; any other write, refused by name.

A compiled artifact holds the variables as constants and keeps no state between calls, so a
function whose variables change cannot be frozen: TensorFlow's `convert_variables_to_constants_v2`
turns each captured variable into a constant and then fails on the first op that writes one
("Input 0 of node .../AssignNewValue was passed float from .../resource:0 incompatible with
expected resource"). Some writes leave the variable as it was, though, and tf.keras 2 code makes
them: its `BatchNormalization` adds its moving-average updates whenever `training` is not a Python
constant, and a layer that passes a tensor (hunglc007/tensorflow-yolov4-tflite's
`tf.logical_and(training, self.trainable)`, which TensorFlow's `smart_cond` folds to the
inference branch) gets `AssignVariableOp(moving_mean, FusedBatchNormV3(..., is_training=False):1)`.
In inference mode a fused batch norm's outputs 1 and 2 are its mean and variance inputs, so the
write stores what the variable already holds. `drop_unchanged_writes` removes such writes (and
the control edges to them) from the GraphDef that freezing converts; `variable_writes` finds the
ones left, for a message that names the variable. The GraphDef is edited as a protocol buffer, as
`graph_nodes.py` does: TensorFlow is imported by `bridge.py` only.
"""

from __future__ import annotations

from typing import Any

# Ops that store a value into their first input, a variable's resource.
_ASSIGN = "AssignVariableOp"
# Ops that change their first input, a variable's resource (the write ops of resource_variable_ops
# and training_ops): what freezing cannot take.
_WRITE_PREFIXES = ("Assign", "ResourceScatter", "ResourceApply", "ResourceSparseApply", "ResourceStridedSliceAssign")
# Fused batch norms: in inference mode output 1 is input 3 (the mean) and output 2 is input 4
# (the variance), unchanged.
_FUSED_BATCH_NORMS = {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}
_BATCH_NORM_PASSED = {1: 3, 2: 4}


def drop_unchanged_writes(graph_def: Any) -> list[str]:
    """Remove from `graph_def` (in place) each `AssignVariableOp` of its main graph whose value is
    the variable's own value (a read of the same resource, or an inference-mode fused batch norm's
    mean or variance output computed from such a read), and the control inputs that name it; the
    names removed."""
    nodes = {node.name: node for node in graph_def.node}
    dropped = {node.name for node in graph_def.node
               if node.op == _ASSIGN and _is_value_of(nodes, node.input[1], _resource(nodes, node.input[0]))}
    if not dropped:
        return []
    kept = [node for node in graph_def.node if node.name not in dropped]
    for node in kept:
        inputs = [name for name in node.input if not (name.startswith("^") and name[1:] in dropped)]
        if len(inputs) != len(node.input):
            node.ClearField("input")
            node.input.extend(inputs)
    del graph_def.node[:]
    graph_def.node.extend(kept)
    return sorted(dropped)


def variable_writes(graph_def: Any, variables: set[str]) -> list[tuple[str, str, str]]:
    """(node, op, resource) of each op of `graph_def`'s main graph that writes one of `variables`
    (the names of the resource placeholders of captured variables)."""
    nodes = {node.name: node for node in graph_def.node}
    found = []
    for node in graph_def.node:
        if node.op.startswith(_WRITE_PREFIXES) and node.input:
            resource = _resource(nodes, node.input[0])
            if resource in variables:
                found.append((node.name, node.op, resource))
    return found


def _resource(nodes: dict[str, Any], tensor: str) -> str:
    """The node a resource tensor comes from, through Identity nodes and the Switches of a lowered
    cond (which pass their first input on)."""
    name = tensor.split(":")[0]
    while name in nodes and nodes[name].op in ("Identity", "Switch") and nodes[name].input:
        name = nodes[name].input[0].split(":")[0]
    return name


def _is_value_of(nodes: dict[str, Any], tensor: str, resource: str) -> bool:
    """Whether `tensor` is, by construction, the current value of the variable `resource`."""
    name, _, index = tensor.partition(":")
    output = int(index or 0)
    node = nodes.get(name)
    while node is not None and node.op == "Identity" and output == 0:
        name, _, index = node.input[0].partition(":")
        output, node = int(index or 0), nodes.get(name)
    if node is None:
        return False
    if node.op == "ReadVariableOp":
        return _resource(nodes, node.input[0]) == resource
    if node.op in _FUSED_BATCH_NORMS and output in _BATCH_NORM_PASSED and _inference_mode(node):
        return _is_value_of(nodes, node.input[_BATCH_NORM_PASSED[output]], resource)
    return False


def _inference_mode(batch_norm: Any) -> bool:
    """Whether a fused batch norm has `is_training` false (its default is true)."""
    return "is_training" in batch_norm.attr and not batch_norm.attr["is_training"].b
