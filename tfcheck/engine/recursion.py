"""Cycles of the call graph that run through a tf.function.

A tf.function that calls itself, directly or through helpers, traces itself again from inside its own
trace: with a tensor argument the recursion never ends (AutoGraph stages both branches of the base
case), with Python arguments it traces once per level. Only calls that go through the tf.function
object count: plain Python recursion in a helper (walking a nested structure) ends during tracing and
is how graph code handles Python data.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from tfcheck.engine.callgraph import CallGraph
from tfcheck.engine.graphcode import GraphCode
from tfcheck.engine.index import FileIndex
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.engine.tfcalls import tf_function_object


@dataclass(frozen=True, eq=False)
class RecursiveCall:
    """A call of the tf.function `function` from `caller`, which `function` itself reaches via `path`."""

    call: ast.Call
    caller: FunctionInfo
    function: FunctionInfo
    path: tuple[FunctionInfo, ...]  # function, ..., caller


def recursive_calls(index: FileIndex, graph: GraphCode, calls: CallGraph) -> list[RecursiveCall]:
    """Calls in graph code of a tf.function of this file that the same tf.function (transitively) makes.

    A call from `caller` of `function` closes a cycle when both are in one strongly connected component
    of the call graph; the components are found once per file (linear), and the shortest path is then
    searched inside the component only, so a long chain of tf.functions calling each other costs its
    length, not its length squared (one search over the whole reachable graph per call).
    """
    found: list[RecursiveCall] = []
    for call, caller in index.calls:
        if caller is None or not graph.in_graph_code(call):
            continue
        target = tf_function_object(index, call.func)
        if target is None:
            continue
        function, identity = target[0], target[1]
        path = calls.cycle_path(function, caller)
        maker = index.function_of(identity)
        # A tf.function made inside a function of the cycle is a new object at every level, not a
        # recursion of one function (TensorFlow Probability's minimize.py: a jit_compile flag wraps
        # the same routine once, the inner call takes the other branch).
        if path is not None and (maker is None or not calls.reaches(function, maker)):
            found.append(RecursiveCall(call, caller, function, path))
    return found
