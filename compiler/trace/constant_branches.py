"""The branch a constant predicate never takes, removed from a lowered GraphDef before freezing.

`tf.cond` on a predicate that is a constant expression (`tf.logical_and(tf.constant(False), True)`,
a `training` flag made a tensor) stays an `If` in the traced graph: only `smart_cond` folds such a
predicate, `tf.cond` does not. Freezing lowers the `If` to Switch and Merge nodes, and a branch
that writes a variable (a batch norm's training branch updating its moving averages) then fails
the conversion to constants although it never runs ("Input 0 of node cond/then/_0/.../
AssignVariableOp was passed float ... incompatible with expected resource"). Grappler does not
help: its constant folding folds the predicate, but its dead-branch removal keeps a branch with a
stateful op.

`without_constant_branches` follows TensorFlow's dataflow rule on the main graph: a Switch whose
predicate is a constant (a Const, or Identity, LogicalNot, LogicalAnd, LogicalOr of constants)
sends its input down one output only; the other is dead, and so is every node that takes a dead
tensor or runs after a dead node, except a Merge, which is dead only when all its inputs are. Dead
nodes are removed, readers of the live output read the Switch's input, and a Merge left with one
live input becomes an Identity of it. `freeze` applies it only where a variable write is left
after `variable_writes.drop_unchanged_writes`, so graphs that froze before are unchanged.
"""

from __future__ import annotations

from typing import Any

_BOOL = 10  # DataType enum of bool (tensorflow/core/framework/types.proto)
_LOGICAL = {"LogicalAnd": all, "LogicalOr": any}


def without_constant_branches(graph_def: Any) -> bool:
    """Remove (in place) what Switches on constant predicates never run; whether there were any."""
    nodes = {node.name: node for node in graph_def.node}
    known: dict[str, bool | None] = {}
    switches = {node.name: _constant(nodes, node.input[1], known) for node in graph_def.node if node.op == "Switch"}
    switches = {name: value for name, value in switches.items() if value is not None}
    if not switches:
        return False
    dead = _dead_nodes(graph_def, switches)
    _rewire(graph_def, nodes, switches, dead)
    kept = [node for node in graph_def.node if node.name not in dead]
    del graph_def.node[:]
    graph_def.node.extend(kept)
    return True


def _constant(nodes: dict[str, Any], tensor: str, known: dict[str, bool | None]) -> bool | None:
    """The value of a boolean scalar built from constants only; None otherwise."""
    name = tensor.split(":")[0]
    if name not in known:
        known[name] = None  # a cycle (a loop) is not a constant
        known[name] = _evaluate(nodes, nodes.get(name), known)
    return known[name]


def _evaluate(nodes: dict[str, Any], node: Any, known: dict[str, bool | None]) -> bool | None:
    if node is None:
        return None
    if node.op == "Const":
        if node.attr["dtype"].type != _BOOL:
            return None
        return _scalar_bool(node.attr["value"].tensor)
    if node.op not in _LOGICAL and node.op not in ("Identity", "LogicalNot"):
        return None  # before reading any input: a predicate computed from data is never walked
    data = [name for name in node.input if not name.startswith("^")]
    values = [_constant(nodes, name, known) for name in data]
    if not data or any(value is None for value in values):
        return None
    if node.op == "Identity":
        return values[0]
    return not values[0] if node.op == "LogicalNot" else _LOGICAL[node.op](values)


def _scalar_bool(tensor: Any) -> bool | None:
    """A scalar bool TensorProto's value (no values at all: false, as `tf.make_ndarray` reads it)."""
    if tensor.tensor_shape.dim:
        return None
    if tensor.tensor_content:
        return tensor.tensor_content != b"\x00"
    return bool(tensor.bool_val[-1]) if tensor.bool_val else False


def _dead_nodes(graph_def: Any, switches: dict[str, bool]) -> set[str]:
    """The nodes that never run: readers of a constant Switch's untaken output, and what follows."""
    dead: set[str] = set()
    changed = True
    while changed:  # a GraphDef need not be in order: to a fixed point
        changed = False
        for node in graph_def.node:
            if node.name not in dead and _is_dead(node, switches, dead):
                dead.add(node.name)
                changed = True
    return dead


def _is_dead(node: Any, switches: dict[str, bool], dead: set[str]) -> bool:
    data = [name for name in node.input if not name.startswith("^")]
    dead_data = [_dead_tensor(name, switches, dead) for name in data]
    if node.op == "Merge":
        return bool(data) and all(dead_data)
    controls = [name[1:] for name in node.input if name.startswith("^")]
    return any(dead_data) or any(name in dead for name in controls)


def _dead_tensor(tensor: str, switches: dict[str, bool], dead: set[str]) -> bool:
    name, _, index = tensor.partition(":")
    if name in dead:
        return True
    return name in switches and int(index or 0) != int(switches[name])  # output 1 is the true branch


def _rewire(graph_def: Any, nodes: dict[str, Any], switches: dict[str, bool], dead: set[str]) -> None:
    """Readers of a constant Switch's live output read its input; a Merge of one live input
    becomes an Identity of it; control inputs from removed nodes go."""
    read = {name for node in graph_def.node if node.name not in dead for name in node.input}
    for node in graph_def.node:
        if node.name in dead:
            continue
        inputs = [_live_source(name, nodes, switches) for name in node.input
                  if not (name.startswith("^") and (name[1:] in dead or name[1:] in switches))]
        if node.op == "Merge":
            inputs = _merged(node, inputs, switches, dead, value_read=f"{node.name}:1" in read)
        node.ClearField("input")
        node.input.extend(inputs)
    for name in switches:
        dead.add(name)  # nothing reads it any more


def _merged(merge: Any, inputs: list[str], switches: dict[str, bool], dead: set[str], value_read: bool) -> list[str]:
    """A Merge's inputs without the dead ones; with one left (and its `value_index` output unread)
    the Merge becomes an Identity of it (a lone Merge is Control Flow V1 that TFLite's converter
    would have to functionalize)."""
    live = [name for name in inputs if not name.startswith("^") and not _dead_tensor(name, switches, dead)]
    controls = [name for name in inputs if name.startswith("^")]
    if len(live) == 1 and not value_read:
        dtype = merge.attr["T"].type
        merge.op = "Identity"
        merge.ClearField("attr")
        merge.attr["T"].type = dtype
    else:
        merge.attr["N"].i = len(live)
    return live + controls


def _live_source(tensor: str, nodes: dict[str, Any], switches: dict[str, bool]) -> str:
    name = tensor.split(":")[0]
    return nodes[name].input[0] if not tensor.startswith("^") and name in switches else tensor
