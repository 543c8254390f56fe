"""Calls between the functions of one file, and the cycles that run through a tf.function.

A tf.function that calls itself, directly or through helpers, traces itself again from inside its own
trace: with a tensor argument the recursion never ends (AutoGraph stages both branches of the base
case), with Python arguments it traces once per level. Only calls that go through the tf.function
object count: plain Python recursion in a helper (walking a nested structure) ends during tracing and
is how graph code handles Python data.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tfcheck.engine.tfcalls import tf_function_object

if TYPE_CHECKING:
    from tfcheck.engine.facts import FileFacts
    from tfcheck.engine.scopes import FunctionInfo


@dataclass(frozen=True, eq=False)
class RecursiveCall:
    """A call of the tf.function `function` from `caller`, which `function` itself reaches via `path`."""

    call: ast.Call
    caller: FunctionInfo
    function: FunctionInfo
    path: tuple[FunctionInfo, ...]  # function, ..., caller


def callees(facts: FileFacts, info: FunctionInfo, nested: dict[FunctionInfo, list[FunctionInfo]]) -> list[FunctionInfo]:
    """The functions `info` calls, plus the functions defined inside it (`nested`: run when it runs them)."""
    found = list(nested.get(info, ()))
    for node in info.nodes:
        if isinstance(node, ast.Call):
            found.extend(facts.function_target(node.func))
    return found


def recursive_calls(facts: FileFacts) -> list[RecursiveCall]:
    """Calls in graph code of a tf.function of this file that the same tf.function (transitively) makes."""
    found: list[RecursiveCall] = []
    paths: dict[FunctionInfo, dict[FunctionInfo, tuple[FunctionInfo, ...]]] = {}
    nested: dict[FunctionInfo, list[FunctionInfo]] = {}
    for info in facts.functions:
        if info.parent is not None:
            nested.setdefault(info.parent, []).append(info)
    for call, caller in facts.calls:
        if caller is None or not facts.in_graph_code(call):
            continue
        target = tf_function_object(facts, call.func)
        if target is None:
            continue
        function, identity = target[0], target[1]
        if function not in paths:
            paths[function] = _reachable(facts, function, nested)
        path = paths[function].get(caller)
        maker = facts.function_of(identity)
        # A tf.function made inside a function of the cycle is a new object at every level, not a
        # recursion of one function (TensorFlow Probability's minimize.py: a jit_compile flag wraps
        # the same routine once, the inner call takes the other branch).
        if path is not None and (maker is None or maker not in paths[function]):
            found.append(RecursiveCall(call, caller, function, path))
    return found


def _reachable(facts: FileFacts, start: FunctionInfo,
               nested: dict[FunctionInfo, list[FunctionInfo]]) -> dict[FunctionInfo, tuple[FunctionInfo, ...]]:
    """Every function `start` reaches through calls, with the shortest path to it (breadth first)."""
    paths: dict[FunctionInfo, tuple[FunctionInfo, ...]] = {start: (start,)}
    queue = deque([start])
    while queue:
        info = queue.popleft()
        for callee in callees(facts, info, nested):
            if callee not in paths:
                paths[callee] = paths[info] + (callee,)
                queue.append(callee)
    return paths
