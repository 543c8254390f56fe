"""Where a Python value computed in graph code goes: into the graph, or only into Python bookkeeping.

A random number or a clock read while tracing is a bug when the value ends up in the graph (an operand
of a TensorFlow operation, a returned value) or decides the graph's structure (an `if`, a loop bound):
then it is frozen for every later call. The same read used only for Python-side bookkeeping (timing a
trace step for a log line or a metric, an op name, a `shared_name`) is deliberate, and TensorFlow's own
code does exactly that. `reaches_graph` follows the value up through expressions and through local
names, and answers True only when it meets such a use; anything it cannot follow counts as not reaching.

A returned value reaches the graph (the caller gets it), except from a seed helper: a function whose name
says it makes a seed (`make_default_seed`, `get_seed`, `_gen_seed`) returns a seed, and fixing a seed at
trace time is its purpose, as with the `seed=` of a stateful op (Keras' `random/seed_generator.py`
`make_default_seed` draws `random.randint` to seed a generator's state). Its value reaches the graph only
where a call of it in this file's graph code does: `tf.random.stateless_uniform(seed=[get_seed(), 0])`
still freezes the same numbers into every call; a helper called from other files only is not reported.

A value passed to a function of another module of the run crosses files (`CrossFileFlows`): it reaches
the graph when the project pass says that parameter does, there (`utils.make_test_metrics_update_fn(...,
eval_time=eval_time)` with a clock read, google/uncertainty-baselines' toxic_comments: the callee
feeds it to a metric). Until then it counts as not reaching, and the question is kept for the pass,
which analyses the file again once the other file answers yes.
"""

from __future__ import annotations

import ast

from dataclasses import dataclass, field

from tfcheck.engine.callgraph import CallGraph
from tfcheck.engine.graphcode import GraphCode, external_targets
from tfcheck.engine.index import FileIndex
from tfcheck.engine.scopes import FunctionInfo

# Keyword arguments that only name things: a trace-time value there is a unique name, not data. (Also
# `seed=` of a stateful random op: the op still draws new numbers on every call.)
_NAME_KEYWORDS = frozenset({"name", "shared_name", "container", "scope", "op_name"})
# Calls that pass a value on, transformed: follow their result instead.
_TRANSPARENT_CALLS = frozenset({"builtins.str", "builtins.int", "builtins.float", "builtins.round", "builtins.abs",
                                "builtins.min", "builtins.max", "builtins.sum", "builtins.bool", "builtins.format",
                                "builtins.list", "builtins.tuple", "builtins.sorted", "builtins.hash", "builtins.range",
                                "builtins.enumerate", "builtins.zip", "builtins.reversed", "builtins.dict",
                                "builtins.set", "builtins.frozenset"})
_TRANSPARENT_PREFIXES = ("math.", "numpy.")
_INTERNAL_GRAPH_MODULES = ("tensorflow.python.ops.", "tensorflow.python.framework.constant_op.",
                           "tensorflow.python.framework.ops.convert_to_tensor")
# Expressions that carry their operands' value on to their own parent.
_CARRIERS = (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Subscript, ast.Attribute, ast.JoinedStr,
             ast.FormattedValue, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Starred, ast.IfExp)
_MAX_NAME_HOPS = 4


@dataclass
class CrossFileFlows:
    """Arguments of calls into other modules of the run: those known to reach the graph there, and
    those asked about. An argument is named by its keyword or by `#position` (`tfcheck.project`)."""

    reaching: frozenset[tuple[str, str]] = frozenset()  # (target as this file names it, argument)
    asked: set[tuple[str, str]] = field(default_factory=set)

    def reaches(self, targets: list[str], argument: str) -> bool:
        """Whether the argument reaches the graph in the module of any of `targets`; records the question."""
        questions = [(target, argument) for target in targets]
        self.asked.update(questions)
        return any(question in self.reaching for question in questions)


def reaches_graph(index: FileIndex, graph: GraphCode, calls: CallGraph, flows: CrossFileFlows, expr: ast.AST,
                  function: FunctionInfo, hops: int = 0) -> bool:
    """Whether the value of `expr`, evaluated in `function` while tracing, ends up in (or shapes) the graph."""
    node = expr
    while True:
        parent = index.parent(node)
        if parent is None:
            return False
        if isinstance(parent, (ast.Return, ast.Yield, ast.YieldFrom)) or isinstance(parent, ast.Lambda):
            return _returned_reaches(index, graph, calls, flows, index.function_of(node), hops)
        if isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)) and node is parent.test:
            return True
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)) and node is parent.iter:
            return True
        if isinstance(parent, ast.Subscript) and node is parent.slice and _called(index, parent):
            return True  # `augmentations[name](x)`: it picks the code traced (uncertainty-baselines' GraphAugment)
        if isinstance(parent, ast.keyword):
            call = index.parent(parent)
            if parent.arg in _NAME_KEYWORDS or (parent.arg == "seed" and "stateless" not in index.text(call.func)):
                return False
            node, parent = parent, call
        if isinstance(parent, ast.Call) and node is not parent.func:
            verdict = _call_verdict(index, graph, flows, parent, node)
            if verdict is not None:
                return verdict
            node = parent
        elif isinstance(parent, _CARRIERS) or (isinstance(parent, ast.Call) and node is parent.func):
            node = parent
        elif isinstance(parent, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            return hops < _MAX_NAME_HOPS and any(reaches_graph(index, graph, calls, flows, use, function, hops + 1)
                                                 for use in _uses_of_targets(index, parent, function))
        else:
            return False


def _called(index: FileIndex, expr: ast.expr) -> bool:
    parent = index.parent(expr)
    return isinstance(parent, ast.Call) and parent.func is expr


def _returned_reaches(index: FileIndex, graph: GraphCode, calls: CallGraph, flows: CrossFileFlows,
                      returning: FunctionInfo | None, hops: int) -> bool:
    """A returned value reaches the graph; a seed helper's only where a call of it in graph code does."""
    if returning is None or "seed" not in returning.name.lower():
        return True
    return hops < _MAX_NAME_HOPS and any(
        reaches_graph(index, graph, calls, flows, call, caller, hops + 1) for call, caller in calls.callers(returning)
        if caller is not None and graph.in_graph_code(call))


def _call_verdict(index: FileIndex, graph: GraphCode, flows: CrossFileFlows, call: ast.Call,
                  argument: ast.AST) -> bool | None:
    """True: `argument` of this call is graph data; False: it is not; None: follow the call's result."""
    name = index.resolve(call.func)
    if name is not None:
        if name.startswith("tensorflow.python."):  # TensorFlow's own modules: only its ops build the graph
            return name.startswith(_INTERNAL_GRAPH_MODULES)
        if name.startswith(("tensorflow.", "keras.")):
            return True
        if name in _TRANSPARENT_CALLS or name.startswith(_TRANSPARENT_PREFIXES):
            return None
    if any(graph.is_graph_function(target) for target in index.function_target(call.func)):
        return True
    targets = external_targets(index, call)
    key = _argument_key(call, argument)
    return bool(targets) and key is not None and flows.reaches(targets, key)


def _argument_key(call: ast.Call, argument: ast.AST) -> str | None:
    """How the project pass names an argument: its keyword, or `#position` when no `*args` comes before it."""
    if isinstance(argument, ast.keyword):
        return argument.arg
    for position, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None
        if arg is argument:
            return f"#{position}"
    return None


def _uses_of_targets(index: FileIndex, assignment: ast.AST, function: FunctionInfo) -> list[ast.Name]:
    """Loads, in `function` and the functions nested in it, of the local names an assignment binds, that can
    see the value: after the assignment, or anywhere in a loop around both (`if seed is None: seed = ...`
    reads the old value)."""
    targets = assignment.targets if isinstance(assignment, ast.Assign) else [assignment.target]  # type: ignore[attr-defined]
    names = dict.fromkeys(n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name))
    end = getattr(assignment, "end_lineno", None) or 0
    return [use for name in names for use in index.uses_of(name, function)
            if use.lineno > end or index.function_of(use) is not function
            or index.common_loop(use, assignment, function.node) is not None]
