"""The call graph of one file: who calls a function (callers), what it calls (callees), and its cycles.

One graph serves the engine and the rules: graph-code discovery follows the calls a graph function
makes, rules ask for the callers of a function (is every call guarded? is it called before a
rebinding?), and recursion through a tf.function is a cycle of it. Edges are resolved once per
function on first use; the callers of all functions are indexed once per file, so no question
scans every call of the file again (linear in the size of a file). The calls made in the body of a
loop, with their arguments bound, say which functions run again and again (once per epoch, per
checkpoint): what each call of such a function creates is created again and again.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from functools import cached_property

from tfcheck.engine.components import strongly_connected_components
from tfcheck.engine.index import FileIndex, bind_arguments
from tfcheck.engine.scopes import FunctionInfo


@dataclass(frozen=True, eq=False)
class LoopedCall:
    """A call of a function of this file in the body of a `for`/`while` (of a function, or at module
    level), with the loop and the arguments it gives each parameter (those left to defaults absent)."""

    call: ast.Call
    caller: FunctionInfo | None
    loop: ast.AST
    arguments: dict[str, ast.expr]


class CallGraph:
    """Calls between the functions of one file (calls plus nested definitions)."""

    def __init__(self, index: FileIndex) -> None:
        self.index = index
        self.nested: dict[FunctionInfo, list[FunctionInfo]] = {}
        for info in index.functions:
            if info.parent is not None:
                self.nested.setdefault(info.parent, []).append(info)
        self._calls_from: dict[FunctionInfo, list[tuple[ast.Call, list[FunctionInfo]]]] = {}
        self._edges: dict[FunctionInfo, list[FunctionInfo]] = {}
        self._component: dict[FunctionInfo, int] = {}
        self._paths: dict[FunctionInfo, dict[FunctionInfo, tuple[FunctionInfo, ...]]] = {}
        self._looped: dict[FunctionInfo, list[LoopedCall]] = {}

    def calls_from(self, info: FunctionInfo) -> list[tuple[ast.Call, list[FunctionInfo]]]:
        """The calls `info` makes itself (not its nested functions), each with the functions of this file
        it can call (`FileIndex.function_target` of the callee; empty when none of this file)."""
        found = self._calls_from.get(info)
        if found is None:
            found = self._calls_from[info] = [(node, self.index.function_target(node.func))
                                              for node in info.nodes if isinstance(node, ast.Call)]
        return found

    def callees(self, info: FunctionInfo) -> list[FunctionInfo]:
        """The functions `info` calls, plus the functions defined inside it (run when it runs them)."""
        found = self._edges.get(info)
        if found is None:
            found = list(self.nested.get(info, ()))
            for _, targets in self.calls_from(info):
                found.extend(targets)
            self._edges[info] = found
        return found

    @cached_property
    def _callers(self) -> dict[FunctionInfo, list[tuple[ast.Call, FunctionInfo | None]]]:
        """Every call of the file by the functions it can call (module level first, as `FileIndex.calls`),
        with the edges `calls_from` resolved, so each call is resolved once for both directions."""
        sites: dict[FunctionInfo, list[tuple[ast.Call, FunctionInfo | None]]] = {}
        module_calls = [(call, self.index.function_target(call.func)) for call, caller in self.index.calls
                        if caller is None]
        for caller, calls in [(None, module_calls), *((info, self.calls_from(info)) for info in self.index.functions)]:
            for call, targets in calls:
                for target in dict.fromkeys(targets):
                    sites.setdefault(target, []).append((call, caller))
        return sites

    def callers(self, info: FunctionInfo) -> list[tuple[ast.Call, FunctionInfo | None]]:
        """The calls that can call `info`, with the function each is in (None at module level)."""
        return self._callers.get(info, [])

    def looped_calls(self, info: FunctionInfo) -> list[LoopedCall]:
        """The calls of `info` in the body of a loop: each runs `info` once per iteration (found once
        per function, from the callers already indexed)."""
        found = self._looped.get(info)
        if found is None:
            found = self._looped[info] = []
            for call, caller in self.callers(info):
                loop = self.index.enclosing_loop(call)
                if loop is not None:
                    skip_self = info.cls is not None and isinstance(call.func, ast.Attribute)
                    found.append(LoopedCall(call, caller, loop, bind_arguments(info, call.args, call.keywords,
                                                                               skip_self)))
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
            for callee in self.callees(info):
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
            for callee in self.callees(info):
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
        for members in strongly_connected_components([root], self.callees, self._component):
            number = len(self._component)
            for member in members:
                self._component[member] = number
