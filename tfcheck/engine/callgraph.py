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
    """Calls in graph code of a tf.function of this file that the same tf.function (transitively) makes.

    A call from `caller` of `function` closes a cycle when both are in one strongly connected component
    of the call graph; the components are found once per file (linear), and the shortest path is then
    searched inside the component only, so a long chain of tf.functions calling each other costs its
    length, not its length squared (one search over the whole reachable graph per call).
    """
    found: list[RecursiveCall] = []
    graph = _CallGraph(facts)
    for call, caller in facts.calls:
        if caller is None or not facts.in_graph_code(call):
            continue
        target = tf_function_object(facts, call.func)
        if target is None:
            continue
        function, identity = target[0], target[1]
        path = graph.cycle_path(function, caller)
        maker = facts.function_of(identity)
        # A tf.function made inside a function of the cycle is a new object at every level, not a
        # recursion of one function (TensorFlow Probability's minimize.py: a jit_compile flag wraps
        # the same routine once, the inner call takes the other branch).
        if path is not None and (maker is None or not graph.reaches(function, maker)):
            found.append(RecursiveCall(call, caller, function, path))
    return found


class _CallGraph:
    """The call graph of one file (calls plus nested definitions), its edges resolved once per function."""

    def __init__(self, facts: FileFacts) -> None:
        self.facts = facts
        self.nested: dict[FunctionInfo, list[FunctionInfo]] = {}
        for info in facts.functions:
            if info.parent is not None:
                self.nested.setdefault(info.parent, []).append(info)
        self._edges: dict[FunctionInfo, list[FunctionInfo]] = {}
        self._component: dict[FunctionInfo, int] = {}
        self._paths: dict[FunctionInfo, dict[FunctionInfo, tuple[FunctionInfo, ...]]] = {}

    def edges(self, info: FunctionInfo) -> list[FunctionInfo]:
        found = self._edges.get(info)
        if found is None:
            found = self._edges[info] = callees(self.facts, info, self.nested)
        return found

    def cycle_path(self, start: FunctionInfo, end: FunctionInfo) -> tuple[FunctionInfo, ...] | None:
        """The shortest call path start, ..., end when `start` reaches `end` and `end` calls `start`."""
        if self.component(start) != self.component(end):
            return None
        if start not in self._paths:
            self._paths[start] = self._shortest_paths(start, self._component[start])
        return self._paths[start].get(end)

    def reaches(self, start: FunctionInfo, end: FunctionInfo) -> bool:
        """Whether `start` reaches `end` through calls (asked only for the rare recursive calls)."""
        seen = {start}
        stack = [start]
        while stack:
            info = stack.pop()
            if info is end:
                return True
            for callee in self.edges(info):
                if callee not in seen:
                    seen.add(callee)
                    stack.append(callee)
        return False

    def _shortest_paths(self, start: FunctionInfo, component: int) -> dict[FunctionInfo, tuple[FunctionInfo, ...]]:
        """Breadth first from `start` within its component: every path between two functions of a
        component stays inside it, so these are the shortest paths of the whole graph."""
        paths: dict[FunctionInfo, tuple[FunctionInfo, ...]] = {start: (start,)}
        queue = deque([start])
        while queue:
            info = queue.popleft()
            for callee in self.edges(info):
                if callee not in paths and self._component.get(callee) == component:
                    paths[callee] = paths[info] + (callee,)
                    queue.append(callee)
        return paths

    def component(self, info: FunctionInfo) -> int:
        """The strongly connected component of `info` (Tarjan's algorithm, iterative, run on first use)."""
        if info not in self._component:
            self._tarjan(info)
        return self._component[info]

    def _tarjan(self, root: FunctionInfo) -> None:
        index: dict[FunctionInfo, int] = {}
        low: dict[FunctionInfo, int] = {}
        stack: list[FunctionInfo] = []
        on_stack: set[FunctionInfo] = set()
        work = [(root, iter(self.edges(root)))]
        index[root] = low[root] = 0
        stack.append(root)
        on_stack.add(root)
        while work:
            info, children = work[-1]
            advanced = False
            for callee in children:
                if callee in self._component:
                    continue  # finished in an earlier search
                if callee not in index:
                    index[callee] = low[callee] = len(index)
                    stack.append(callee)
                    on_stack.add(callee)
                    work.append((callee, iter(self.edges(callee))))
                    advanced = True
                    break
                if callee in on_stack:
                    low[info] = min(low[info], index[callee])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[info])
            if low[info] == index[info]:
                component = len(self._component)
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    self._component[member] = component
                    if member is info:
                        break
