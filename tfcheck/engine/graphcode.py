"""Graph-code discovery: which functions of a file run as traced graph code, and why.

Roots are functions decorated with (or passed to) `tf.function`, traced by functional control flow or
`tf.data`, Keras step methods, and functions the project pass found called from graph code in other
files. Every function a graph function calls (the call graph's edges) is graph code too, to a fixed
point; calls into other modules are kept for the project pass. A function passed to `tf.py_function`
runs eagerly, and so does the body of `with tf.init_scope():` inside graph code.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from tfcheck.engine import kinds, values
from tfcheck.engine.callgraph import CallGraph
from tfcheck.engine.index import FileIndex
from tfcheck.engine.scopes import FunctionInfo

KERAS_STEP_METHODS = frozenset({"train_step", "test_step", "predict_step"})
_Spec = tuple[tuple[int, ...], tuple[str, ...]]
# Functional control flow: the argument positions and keywords that take functions traced as graph code.
CONTROL_FLOW_FUNCTION_ARGS: dict[str, _Spec] = {
    **dict.fromkeys(("tensorflow.map_fn", "tensorflow.vectorized_map", "tensorflow.scan", "tensorflow.foldl",
                     "tensorflow.foldr"), ((0,), ("fn",))),
    "tensorflow.while_loop": ((0, 1), ("cond", "body")),
    "tensorflow.cond": ((1, 2), ("true_fn", "false_fn")),
    "tensorflow.switch_case": ((1,), ("branch_fns", "default")),
    "tensorflow.case": ((0,), ("pred_fn_pairs", "default")),
}
# tf.data methods whose function argument is traced.
DATASET_FUNCTION_ARGS: dict[str, _Spec] = {
    **dict.fromkeys(("map", "flat_map", "interleave"), ((0,), ("map_func",))),
    "filter": ((0,), ("predicate",)),
    "reduce": ((1,), ("reduce_func",)),
    "scan": ((1,), ("scan_func",)),
}
# Functions whose function argument runs eagerly, outside the graph.
EAGER_FUNCTION_ARGS: dict[str, _Spec] = {
    "tensorflow.py_function": ((0,), ("func",)),
    "tensorflow.numpy_function": ((0,), ("func",)),
}
_NOT_USER_CODE = ("builtins.", "tensorflow.", "keras.", "numpy.", "math.", "functools.", "typing.")


@dataclass
class ExternalCall:
    """A call from graph code to a function defined in another module (resolved by the project pass)."""

    target: str
    caller: str
    line: int


@dataclass
class GraphCode:
    """Which functions are graph code, why, what they call outside this file, and which of their nodes
    run eagerly all the same (under `tf.init_scope()`)."""

    index: FileIndex
    reasons: dict[FunctionInfo, str] = field(default_factory=dict)
    eager: set[FunctionInfo] = field(default_factory=set)
    external_calls: list[ExternalCall] = field(default_factory=list)
    _init_scope_cache: dict[FunctionInfo, frozenset[ast.AST]] = field(default_factory=dict, repr=False)

    def is_graph_function(self, info: FunctionInfo | None) -> bool:
        return info is not None and info in self.reasons

    def excluded_for(self, info: FunctionInfo) -> frozenset[ast.AST]:
        """Nodes of a function that run eagerly even in graph code: the bodies of `with tf.init_scope():`."""
        cached = self._init_scope_cache.get(info)
        if cached is None:
            excluded: set[ast.AST] = set()
            for node in info.nodes:
                if isinstance(node, (ast.With, ast.AsyncWith)) and self._is_init_scope(node):
                    for stmt in node.body:
                        excluded.update(ast.walk(stmt))
            cached = self._init_scope_cache[info] = frozenset(excluded)
        return cached

    def _is_init_scope(self, node: ast.With | ast.AsyncWith) -> bool:
        return any(isinstance(item.context_expr, ast.Call)
                   and self.index.resolve(item.context_expr.func) == "tensorflow.init_scope" for item in node.items)

    @cached_property
    def _excluded(self) -> frozenset[ast.AST]:
        """Nodes of graph functions that run eagerly (see excluded_for)."""
        return frozenset().union(*(self.excluded_for(info) for info in self.reasons))

    def in_graph_code(self, node: ast.AST) -> bool:
        """Whether `node` runs as traced graph code."""
        return self.is_graph_function(self.index.function_of(node)) and node not in self._excluded

    @cached_property
    def _nodes_by_type(self) -> dict[type, list[tuple[ast.AST, FunctionInfo]]]:
        buckets: dict[type, list[tuple[ast.AST, FunctionInfo]]] = {}
        excluded = self._excluded
        for info in self.reasons:
            for node in info.nodes:
                if node not in excluded:
                    buckets.setdefault(type(node), []).append((node, info))
        return buckets

    def nodes(self, *types: type) -> list[tuple[ast.AST, FunctionInfo]]:
        """Nodes of the given types in graph code, each with the graph function it belongs to."""
        buckets = self._nodes_by_type
        return [pair for kind in types for pair in buckets.get(kind, ())]

    def calls_of(self, *qualified: str) -> Iterator[tuple[ast.Call, FunctionInfo]]:
        """Calls in graph code whose callee resolves to one of `qualified`."""
        wanted = set(qualified)
        for node, info in self.nodes(ast.Call):
            assert isinstance(node, ast.Call)
            if self.index.resolve(node.func) in wanted:
                yield node, info


def function_arguments(call: ast.Call, spec: _Spec) -> list[ast.expr]:
    """The arguments of `call` at the positions and keywords of `spec`."""
    positions, keywords = spec
    found = [call.args[i] for i in positions if i < len(call.args)]
    found += [k.value for k in call.keywords if k.arg in keywords]
    return found


def find_graph_code(index: FileIndex, calls: CallGraph, extra_roots: Mapping[str, str]) -> GraphCode:
    """Find graph-code roots, then follow the call graph's edges from graph code to a fixed point."""
    graph = GraphCode(index)
    queue: list[FunctionInfo] = []

    def mark(info: FunctionInfo, reason: str) -> None:
        if info not in graph.reasons:
            graph.reasons[info] = reason
            queue.append(info)

    for info in index.functions:
        if index.decorated_tf_function(info) is not None:
            mark(info, "decorated with tf.function")
        elif info.cls is not None and _is_keras_graph_method(index, info):
            mark(info, f"Keras {info.name} of {info.cls.name}")
        elif info.qualname in extra_roots:
            mark(info, extra_roots[info.qualname])
    for call, _ in index.calls:
        _mark_call_roots(index, call, mark, graph)

    while queue:
        info = queue.pop()
        excluded = graph.excluded_for(info)
        for call, targets in calls.calls_from(info):
            if call not in excluded:
                _follow_call(index, info, call, targets, mark, graph)
    return graph


def _is_keras_graph_method(index: FileIndex, info: FunctionInfo) -> bool:
    assert info.cls is not None
    kind = index.class_kind(info.cls)
    if info.name in KERAS_STEP_METHODS:
        return kind == kinds.MODEL
    return info.name == "call" and index.settings.keras_call_is_graph and kind in (kinds.MODEL, kinds.LAYER)


def _mark_call_roots(index: FileIndex, call: ast.Call, mark: Callable[[FunctionInfo, str], None],
                     graph: GraphCode) -> None:
    name = index.resolve(call.func)
    if name in index.tf_function_names and call.args:
        for info in index.function_target(call.args[0]):
            mark(info, f"passed to tf.function at {index.line_name(call.lineno)}")
    elif name in CONTROL_FLOW_FUNCTION_ARGS:
        for arg in function_arguments(call, CONTROL_FLOW_FUNCTION_ARGS[name]):
            for info in index.function_target(arg):
                mark(info, f"traced by {name.replace('tensorflow.', 'tf.')} at {index.line_name(call.lineno)}")
    elif name in EAGER_FUNCTION_ARGS:
        for arg in function_arguments(call, EAGER_FUNCTION_ARGS[name]):
            graph.eager.update(index.function_target(arg))
    elif isinstance(call.func, ast.Attribute) and call.func.attr in DATASET_FUNCTION_ARGS \
            and _is_dataset(index, call.func.value):
        for arg in function_arguments(call, DATASET_FUNCTION_ARGS[call.func.attr]):
            for info in index.function_target(arg):
                mark(info, f"traced by Dataset.{call.func.attr} at {index.line_name(call.lineno)}")


def _is_dataset(index: FileIndex, receiver: ast.expr) -> bool:
    if kinds.DATASET in values.expr_kinds(index, receiver):
        return True
    name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
    lowered = name.lower()
    return lowered in ("ds", "dataset") or lowered.endswith(("_ds", "_dataset", "dataset"))


def _follow_call(index: FileIndex, caller: FunctionInfo, call: ast.Call, targets: list[FunctionInfo],
                 mark: Callable[[FunctionInfo, str], None], graph: GraphCode) -> None:
    """A function called from graph code is graph code too; calls to other modules go to the project."""
    for target in targets:
        mark(target, f"called from {caller.qualname} ({index.line_name(call.lineno)}), which is graph code")
    if targets:
        return
    name = index.resolve(call.func)
    if name is not None and not name.startswith(_NOT_USER_CODE) and not name.startswith(f"{index.module_name}."):
        graph.external_calls.append(ExternalCall(name, caller.qualname, call.lineno))
