"""Graph-code discovery: which functions of a file run as traced graph code, and why.

Roots are functions decorated with (or passed to) `tf.function`, traced by functional control flow or
`tf.data`, Keras step methods, losses and metrics passed to `model.compile`, and functions the project
pass found called from graph code in other files. Every function a graph function calls (the call graph's edges) is graph code too, to a fixed
point; calls into other modules are kept for the project pass. A function passed to `tf.py_function`
runs eagerly, and so does the body of `with tf.init_scope():` inside graph code.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from tfcheck.engine import autograph, kinds, values
from tfcheck.engine.callgraph import CallGraph
from tfcheck.engine.index import FileIndex
from tfcheck.engine.scopes import ClassInfo, FunctionInfo

_Spec = tuple[tuple[int, ...], tuple[str, ...]]
KERAS_STEP_METHODS = frozenset({"train_step", "test_step", "predict_step"})
# What Keras calls of a compiled metric inside its traced train and test steps.
KERAS_METRIC_METHODS = frozenset({"update_state", "result"})
# Model methods under which Keras traces the model's `call` (unless compiled with run_eagerly=True).
KERAS_TRACING_METHODS = frozenset({"fit", "evaluate", "predict", "train_on_batch", "test_on_batch",
                                   "predict_on_batch"})
# `Model.compile` arguments whose functions Keras traces into the train/test functions that `fit` and
# `evaluate` run (`loss` is also the second positional argument, in Keras 3 and tf_keras alike).
KERAS_COMPILED_FUNCTION_ARGS: _Spec = ((1,), ("loss", "metrics", "weighted_metrics"))
# What made a function graph code: the kinds of roots that reach it (GraphCode.origins).
FROM_TF_FUNCTION, FROM_TF_DATA, FROM_KERAS = "tf.function", "tf.data", "Keras"
FROM_CONTROL_FLOW, FROM_OTHER_FILE = "control flow", "another file"
FROM_TF_FUNCTION_WITHOUT_AUTOGRAPH = "tf.function(autograph=False)"
# Roots whose code AutoGraph converts, and the functions it calls with them (TensorFlow 2.21): a
# tf.function and a tf.data function. Keras 3 calls `call`, `train_step` and losses from its own
# (unconverted) code, so they run as written; a function given to control flow from eager code is
# converted by `tf.map_fn` but not by an eager `tf.cond`; another file's root is not known here.
AUTOGRAPH_ORIGINS = frozenset({FROM_TF_FUNCTION, FROM_TF_DATA})
_DO_NOT_CONVERT = "tensorflow.autograph.experimental.do_not_convert"
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
# Context managers that expect the code they hold to raise: assert_raises, pytest.raises, assertRaises(Regex).
_RAISES = re.compile(r"(^|[._])(assert_?[Rr]aises\w*|raises)$")
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
    # the kinds of roots (FROM_*) that reach each graph function
    origins: dict[FunctionInfo, set[str]] = field(default_factory=dict)
    external_calls: list[ExternalCall] = field(default_factory=list)
    _excluded_cache: dict[FunctionInfo, frozenset[ast.AST]] = field(default_factory=dict, repr=False)
    _refusals: dict[FunctionInfo, autograph.Refusal | None] = field(default_factory=dict, repr=False)

    def is_graph_function(self, info: FunctionInfo | None) -> bool:
        return info is not None and info in self.reasons

    def input_pipeline_only(self, info: FunctionInfo) -> bool:
        """Whether `info` is graph code only because tf.data traces it: no tf.function, Keras, control
        flow or other file's graph code reaches it, so no SavedModel signature exports it."""
        return self.origins.get(info) == {FROM_TF_DATA}

    def keras_only(self, info: FunctionInfo) -> bool:
        """Whether `info` is graph code only because Keras traces it (`call`, a metric's `update_state`,
        and what they call): the same code also runs eagerly whenever a layer is called outside a trace."""
        return self.origins.get(info) == {FROM_KERAS}

    def autograph_converted(self, info: FunctionInfo) -> bool:
        """Whether AutoGraph rewrites `info` before it runs: it tries (`autograph_tries`) and nothing in
        the function makes it give up (`autograph_refusal`)."""
        return self.autograph_tries(info) and self.autograph_refusal(info) is None

    def autograph_tries(self, info: FunctionInfo) -> bool:
        """Whether AutoGraph tries to convert `info`: a tf.function (not `autograph=False`) or tf.data
        reaches it, or Keras 2 does (a file written for Keras 2, `FileIndex.keras_2`), and it is not
        decorated with `tf.autograph.experimental.do_not_convert`."""
        origins = self.origins.get(info, set())
        if not origins & (AUTOGRAPH_ORIGINS | ({FROM_KERAS} if self.index.keras_2 else set())):
            return False
        decorators = [] if isinstance(info.node, ast.Lambda) else info.node.decorator_list
        return not any(self.index.resolve(d.func if isinstance(d, ast.Call) else d) == _DO_NOT_CONVERT
                       for d in decorators)

    def surely_runs_as_written(self, info: FunctionInfo) -> bool:
        """Whether every root that reaches `info` runs it without AutoGraph: Keras 3 (in a file that shows
        it is written for Keras 3, `FileIndex.keras_3`) or `tf.function(autograph=False)`. Functional
        control flow called eagerly runs its function eagerly, and under a tf.function converts it, so it
        does not count; nor another file."""
        origins = self.origins.get(info, set())
        as_written = {FROM_TF_FUNCTION_WITHOUT_AUTOGRAPH} | ({FROM_KERAS} if self.index.keras_3 else set())
        return bool(origins) and origins <= as_written

    def autograph_refusal(self, info: FunctionInfo) -> autograph.Refusal | None:
        """The construct for which AutoGraph 2.21 gives up on `info` and runs it as written, with a
        warning (a `for`/`while` with `else`, `self.__x`, ... : tfcheck.engine.autograph); computed once.
        A function nested in one AutoGraph converts is converted with it, from the enclosing source (two
        lambdas of one `tf.cond` line then convert: TensorFlow 2.21), so it has no refusal of its own."""
        if info not in self._refusals:
            inline = info.parent is not None and self.autograph_converted(info.parent)
            self._refusals[info] = None if inline else autograph.refusal(info, self.index.resolve, self.index.parent,
                                                     self.index.source.lines, self._lambdas_on_line,
                                                     self.index.function_target)
        return self._refusals[info]

    @cached_property
    def _lambdas_on_line(self) -> dict[int, list[ast.Lambda]]:
        found: dict[int, list[ast.Lambda]] = {}
        for function in self.index.functions:
            if isinstance(function.node, ast.Lambda):
                found.setdefault(function.node.lineno, []).append(function.node)
        return found

    def excluded_for(self, info: FunctionInfo) -> frozenset[ast.AST]:
        """Nodes of a function that are not traced even in graph code: the bodies of `with
        tf.init_scope():` (they run eagerly), and the branches a constant flag of the module never
        takes (`DEBUG = False` ... `if DEBUG: print(...)`: they do not run at all)."""
        cached = self._excluded_cache.get(info)
        if cached is None:
            excluded: set[ast.AST] = set()
            for node in info.nodes:
                if isinstance(node, (ast.With, ast.AsyncWith)) and self._is_init_scope(node):
                    excluded.update(*(ast.walk(stmt) for stmt in node.body))
                elif isinstance(node, ast.If):
                    excluded.update(*(ast.walk(stmt) for stmt in self._branch_never_taken(node)))
            cached = self._excluded_cache[info] = frozenset(excluded)
        return cached

    def _branch_never_taken(self, node: ast.If) -> list[ast.stmt]:
        """The branch of `if FLAG:` (or `if not FLAG:`) that never runs, FLAG being a name the module
        binds once, unconditionally, to a constant (`DEBUG = False`) and never rebinds; none otherwise.

        A user's debugging prints behind such a flag (`if DEBUG_ACTOR_NET: print(mean.numpy())`) are
        dead code, traced or not: 38 findings on one file of SAC-HER-Tensorflow2 (docs/journal/precision.md).
        Setting the flag brings them back, where they are then right.
        """
        test, negated = node.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        if not isinstance(test, ast.Name):
            return []
        scope, bindings = self.index.lookup(test.id, self.index.scope_of_name(test))
        if scope is not self.index.module_scope or len(bindings) != 1 or self.index.is_rebound(scope, test.id):
            return []
        binding = bindings[0]
        if binding.kind != "assign" or binding.conditional or not isinstance(binding.value, ast.Constant):
            return []
        return node.orelse if bool(binding.value.value) != negated else node.body

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


def _nested_in(function: FunctionInfo, outer: FunctionInfo) -> bool:
    """`function` is `outer` or defined (at any depth) inside it."""
    current: FunctionInfo | None = function
    while current is not None:
        if current is outer:
            return True
        current = current.parent
    return False


def function_arguments(call: ast.Call, spec: _Spec) -> list[ast.expr]:
    """The arguments of `call` at the positions and keywords of `spec`."""
    positions, keywords = spec
    found = [call.args[i] for i in positions if i < len(call.args)]
    found += [k.value for k in call.keywords if k.arg in keywords]
    return found


def find_graph_code(index: FileIndex, calls: CallGraph, extra_roots: Mapping[str, str]) -> GraphCode:
    """Find graph-code roots, follow the call graph's edges (and the functions that distribution
    strategies and Keras call for graph code) to a fixed point, then spread each root's origin."""
    discovery = _Discovery(index, calls)
    discovery.find_roots(extra_roots)
    discovery.follow()
    discovery.spread_origins()
    return discovery.graph


class _Discovery:
    """The state of one graph-code search: what is marked, what is left to follow, the edges followed."""

    def __init__(self, index: FileIndex, calls: CallGraph) -> None:
        self.index = index
        self.calls = calls
        self.graph = GraphCode(index)
        self.queue: list[FunctionInfo] = []
        self.edges: dict[FunctionInfo, list[FunctionInfo]] = {}
        # functions traced by functional control flow, with the function the call is in (None: module level)
        self.traced_in: list[tuple[FunctionInfo | None, FunctionInfo]] = []
        # local decorators, with whether they hand the decorated function to tf.py_function
        self.python_decorators: dict[FunctionInfo, bool] = {}

    def mark(self, info: FunctionInfo, reason: str, origin: str | None = None) -> None:
        """`info` is graph code; the first reason found is kept. `origin`: the kind of root it is."""
        if self._runs_in_python(info) or self._expected_to_raise(info):
            return
        if origin is not None:
            self.graph.origins.setdefault(info, set()).add(origin)
        if info not in self.graph.reasons:
            self.graph.reasons[info] = reason
            self.queue.append(info)

    def _runs_in_python(self, info: FunctionInfo) -> bool:
        """Decorated by a function of the file that hands what it decorates to `tf.py_function` or
        `tf.numpy_function` (the tf.data guide's `map_decorator`, data_performance.ipynb): the name is
        bound to the wrapper, and the body runs eagerly on every call, never traced."""
        decorators = [] if isinstance(info.node, ast.Lambda) else info.node.decorator_list
        return any(self._hands_to_python(wrapper) for decorator in decorators
                   for wrapper in self.index.function_target(decorator))

    def _expected_to_raise(self, info: FunctionInfo) -> bool:
        """Called only inside `with assert_raises(...)`, `pytest.raises(...)`, `self.assertRaises(...)`: code
        that shows an error on purpose (the tf.function guide's cells, tests of error messages), whose
        pitfalls its author knows; its findings would all be wanted nowhere."""
        calls = [call for call, caller in self.calls.callers(info) if caller is not None or self._runs_this(call, info)]
        return bool(calls) and all(self._in_raises_block(call) for call in calls)

    def _runs_this(self, call: ast.Call, info: FunctionInfo) -> bool:
        """A module-level `f(...)` runs `info` only while the name is bound to it (a notebook defines `f` anew)."""
        if not isinstance(call.func, ast.Name) or info.parent is not None or info.cls is not None:
            return True
        bindings = self.index.bindings_in_effect(call.func.id, call)
        return not bindings or any(binding.node is info.node for binding in bindings)

    def _in_raises_block(self, node: ast.AST) -> bool:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return False
            if isinstance(ancestor, (ast.With, ast.AsyncWith)) and any(
                    isinstance(item.context_expr, ast.Call) and _RAISES.search(self.index.text(item.context_expr.func))
                    for item in ancestor.items):
                return True
        return False

    def _hands_to_python(self, decorator: FunctionInfo) -> bool:
        """Whether `decorator` (or a function nested in it) passes its first parameter to py_function."""
        if decorator not in self.python_decorators:
            nested = [f for f in self.index.functions if _nested_in(f, decorator)]
            first = decorator.params[0] if decorator.params else None
            self.python_decorators[decorator] = first is not None and any(
                isinstance(arg, ast.Name) and arg.id == first and self.index.binding_scope(arg) is decorator.scope
                for function in nested for node in function.nodes if isinstance(node, ast.Call)
                and self.index.resolve(node.func) in EAGER_FUNCTION_ARGS
                for arg in function_arguments(node, EAGER_FUNCTION_ARGS[self.index.resolve(node.func)]))
        return self.python_decorators[decorator]

    def find_roots(self, extra_roots: Mapping[str, str]) -> None:
        index = self.index
        for info in index.functions:
            decorator = index.decorated_tf_function(info)
            if decorator is not None:
                keywords = decorator.keywords if isinstance(decorator, ast.Call) else []
                self.mark(info, "decorated with tf.function", _tf_function_origin(keywords))
            elif info.cls is not None and _is_keras_graph_method(index, info):
                self.mark(info, f"Keras {info.name} of {info.cls.name}", FROM_KERAS)
        if extra_roots:
            functions: dict[str, list[FunctionInfo]] = {}
            for info in index.functions:
                functions.setdefault(info.qualname, []).append(info)
            classes = {cls.qualname: cls for cls in index.classes}
            for name, reason in extra_roots.items():
                for info in functions.get(name) or _inherited_method(index, classes, name):
                    self.mark(info, reason, FROM_OTHER_FILE)
        for call, caller in index.calls:
            self._call_roots(call, caller)

    def _call_roots(self, call: ast.Call, caller: FunctionInfo | None) -> None:
        index = self.index
        name = index.resolve(call.func)
        func = call.func
        if name in index.tf_function_names and call.args:
            for info in index.function_target(call.args[0]):
                self.mark(info, f"passed to tf.function at {index.line_name(call.lineno)}",
                          _tf_function_origin(call.keywords))
        elif name in CONTROL_FLOW_FUNCTION_ARGS:
            for arg in function_arguments(call, CONTROL_FLOW_FUNCTION_ARGS[name]):
                for info in index.function_target(arg):
                    self.mark(info, f"traced by {name.replace('tensorflow.', 'tf.')} at {index.line_name(call.lineno)}")
                    self.traced_in.append((caller, info))
        elif isinstance(func, ast.Attribute) and func.attr in DATASET_FUNCTION_ARGS and _is_dataset(index, func.value):
            for arg in function_arguments(call, DATASET_FUNCTION_ARGS[func.attr]):
                for info in index.function_target(arg):
                    self.mark(info, f"traced by Dataset.{func.attr} at {index.line_name(call.lineno)}", FROM_TF_DATA)
        elif isinstance(func, ast.Attribute) and func.attr == "compile" and name is None:
            self._compiled_roots(call)
        elif isinstance(func, ast.Attribute) and func.attr in KERAS_TRACING_METHODS:
            for cls in _instance_classes(index, func.value):
                method = index.method_of(cls, "call") if index.class_kind(cls) == kinds.MODEL else None
                if method is not None:
                    self.mark(method, f"traced by Keras {index.text(func)} at {index.line_name(call.lineno)}",
                              FROM_KERAS)

    def _compiled_roots(self, call: ast.Call) -> None:
        """`model.compile(loss=fn, metrics=[fn])`: Keras traces `fn` into the function that `fit` runs
        (a `SymbolicTensor` reaches it, checked with TensorFlow 2.21 and Keras 3), unless the same call
        says `run_eagerly=True` (or any value that is not a literal False: it may be true)."""
        eager = next((k.value for k in call.keywords if k.arg == "run_eagerly"), None)
        if eager is not None and not (isinstance(eager, ast.Constant) and eager.value is False):
            return
        index = self.index
        positions, keywords = KERAS_COMPILED_FUNCTION_ARGS
        passed = [("loss", call.args[i]) for i in positions if i < len(call.args)]
        passed += [(k.arg, k.value) for k in call.keywords if k.arg in keywords]
        for keyword, arg in passed:
            for info in index.function_target(arg):
                self.mark(info, f"passed as {keyword}= to compile ({index.line_name(call.lineno)})", FROM_KERAS)

    def follow(self) -> None:
        """A function called from graph code is graph code too; calls to other modules go to the project."""
        while self.queue:
            info = self.queue.pop()
            excluded = self.graph.excluded_for(info)
            for call, targets in self.calls.calls_from(info):
                if call not in excluded:
                    self._follow_call(info, call, targets)

    def _follow_call(self, caller: FunctionInfo, call: ast.Call, targets: list[FunctionInfo]) -> None:
        index = self.index
        where = f"{caller.qualname} ({index.line_name(call.lineno)})"
        reached = [(target, f"called from {where}, which is graph code") for target in targets] \
            or _strategy_functions(index, call, where) or _keras_calls(index, call, where)
        for target, reason in reached:
            self.mark(target, reason)
            self.edges.setdefault(caller, []).append(target)
        if reached:
            return
        for name in external_targets(index, call):
            self.graph.external_calls.append(ExternalCall(name, caller.qualname, call.lineno))

    def spread_origins(self) -> None:
        """Give every graph function the origins of the roots that reach it, along the edges followed.

        A function traced by control flow inside graph code takes the origins of the function that
        traces it (a `tf.map_fn` in a `Dataset.map` function is part of the input pipeline); one
        traced from eager code is a root of its own. A function's set only grows and holds at most one
        member per kind of root, so each edge is crossed a bounded number of times.
        """
        origins = self.graph.origins
        for caller, traced in self.traced_in:
            if caller is not None and caller in self.graph.reasons:
                self.edges.setdefault(caller, []).append(traced)
            else:
                origins.setdefault(traced, set()).add(FROM_CONTROL_FLOW)
        queue = list(origins)
        while queue:
            info = queue.pop()
            for callee in self.edges.get(info, ()):
                known = origins.setdefault(callee, set())
                if not origins[info] <= known:
                    known |= origins[info]
                    queue.append(callee)


def _tf_function_origin(keywords: list[ast.keyword]) -> str:
    """The origin a tf.function with these keywords gives: without AutoGraph when `autograph=` is
    anything but a literal True (a flag may be False: the function is then not converted)."""
    autograph = next((k.value for k in keywords if k.arg == "autograph"), None)
    if autograph is None or (isinstance(autograph, ast.Constant) and autograph.value is True):
        return FROM_TF_FUNCTION
    return FROM_TF_FUNCTION_WITHOUT_AUTOGRAPH


def _is_keras_graph_method(index: FileIndex, info: FunctionInfo) -> bool:
    assert info.cls is not None
    kind = index.class_kind(info.cls)
    if info.name in KERAS_STEP_METHODS:
        return kind == kinds.MODEL
    if not index.settings.keras_call_is_graph:
        return False
    if info.name in KERAS_METRIC_METHODS:
        return index.is_keras_metric(info.cls)
    return info.name == "call" and kind in (kinds.MODEL, kinds.LAYER)


def _inherited_method(index: FileIndex, classes: Mapping[str, ClassInfo], qualname: str) -> list[FunctionInfo]:
    """`Class.name` that the class inherits from a base of this file (the project pass asks for
    `Encoder.call` when another file calls an `Encoder`)."""
    class_name, _, method = qualname.rpartition(".")
    cls = classes.get(class_name)
    inherited = index.method_of(cls, method) if cls is not None else None
    return [inherited] if inherited is not None else []


def _is_dataset(index: FileIndex, receiver: ast.expr) -> bool:
    if kinds.DATASET in values.expr_kinds(index, receiver):
        return True
    name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
    lowered = name.lower()
    return lowered in ("ds", "dataset") or lowered.endswith(("_ds", "_dataset", "dataset"))


def _strategy_functions(index: FileIndex, call: ast.Call, where: str) -> list[tuple[FunctionInfo, str]]:
    """`strategy.run(fn, args=...)` (`experimental_run_v2`, `extended.call_for_each_replica`) in graph
    code: `fn` is traced into the same graph, once per replica. Called eagerly, the strategy runs `fn`
    eagerly (checked with TensorFlow 2.21), so this is an edge of graph code, never a root."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return []
    if func.attr in ("run", "experimental_run_v2"):
        receiver, spelled = func.value, f"strategy.{func.attr}"
    elif func.attr == "call_for_each_replica" and isinstance(func.value, ast.Attribute) \
            and func.value.attr == "extended":
        receiver, spelled = func.value.value, "strategy.extended.call_for_each_replica"
    else:
        return []
    if not is_strategy(index, receiver):
        return []
    return [(info, f"passed to {spelled} from graph code in {where}")
            for arg in function_arguments(call, ((0,), ("fn",))) for info in index.function_target(arg)]


def is_strategy(index: FileIndex, receiver: ast.expr) -> bool:
    """Whether `receiver` holds a tf.distribute strategy: its value says so, or, as a fallback, its name
    (`strategy`, `*_strategy`, and `distribution`, the name TensorFlow's test combinations give it):
    strategies usually come from a helper or a parameter the file cannot see. On 2.1 million lines
    (docs/journal/precision.md) the name found 43 of 44 receivers, and each of the 43 is a strategy."""
    if kinds.STRATEGY in values.expr_kinds(index, receiver):
        return True
    name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
    lowered = name.lower()
    return lowered in ("strategy", "distribution") or lowered.endswith("_strategy")


def _keras_calls(index: FileIndex, call: ast.Call, where: str) -> list[tuple[FunctionInfo, str]]:
    """Calling a layer or model (`self.encoder(x)`, `self(x)`, `model(x)`) runs its `call` (its
    `__call__` for a class that is not Keras), traced into the graph of the caller."""
    found = []
    for cls in _instance_classes(index, call.func):
        method = _called_method(index, cls)
        if method is not None:
            found.append((method, f"{cls.name}.{method.name} runs when `{index.text(call.func)}` is called "
                                  f"from {where}, which is graph code"))
    return found


def _called_method(index: FileIndex, cls: ClassInfo) -> FunctionInfo | None:
    """What calling an instance of `cls` runs: Keras' `call` for a layer or model, else `__call__`;
    `call` also for a class whose bases lie in other files (a layer of the project, most likely)."""
    if index.class_kind(cls) in (kinds.MODEL, kinds.LAYER):
        return index.method_of(cls, "call")
    own = index.method_of(cls, "__call__")
    if own is not None:
        return own
    return index.method_of(cls, "call") if _has_foreign_base(index, cls) else None


def _has_foreign_base(index: FileIndex, cls: ClassInfo) -> bool:
    """Whether the chain of `cls` ends in a base class of another module (not `object`)."""
    last = list(index.class_chain(cls))[-1]
    return any(index.resolve(base) != "builtins.object" for base in last.node.bases)


def _instance_classes(index: FileIndex, expr: ast.expr) -> list[ClassInfo]:
    """The classes of this file whose instance `expr` holds: `self`, or a name or `self.` attribute
    bound to `Class(...)`."""
    if isinstance(expr, ast.Name):
        cls = index.self_class(expr)
        if cls is not None:
            return [cls]
    found = [index.called_class(value) for value in _bound_values(index, expr) if isinstance(value, ast.Call)]
    return list(dict.fromkeys(cls for cls in found if cls is not None))


def _bound_values(index: FileIndex, expr: ast.expr) -> list[ast.expr]:
    """The values a name or a `self.` attribute is assigned."""
    if isinstance(expr, ast.Name):
        return [b.value for b in index.bindings_of(expr) if b.value is not None and b.kind == "assign"]
    if isinstance(expr, ast.Attribute) and index.is_self_attribute(expr):
        cls = index.class_of_self(expr)
        if cls is not None:
            return [value for _, value in index.self_attribute_values(cls, expr.attr) if value is not None]
    return []


def external_targets(index: FileIndex, call: ast.Call) -> list[str]:
    """What a call from graph code runs in other modules: a function, the `call` of an object built from
    a class of another module (`self.encoder(x)` with `self.encoder = Encoder()`, `Encoder` imported),
    or a method of such an object (`self.runner.run_inner(x)` with `self.runner = Runner()`)."""
    name = index.resolve(call.func)
    if name is not None:
        return [name] if _is_user_code(index, name) else []
    func = call.func
    found = [f"{cls}.call" for cls in _foreign_classes(index, func)]
    if isinstance(func, ast.Attribute):
        found += [f"{cls}.{func.attr}" for cls in _foreign_classes(index, func.value)]
    return found


def _foreign_classes(index: FileIndex, expr: ast.expr) -> list[str]:
    """The classes of other modules of the project whose instance a name or `self.` attribute is bound to
    (`Runner()`: CapWords names only, so that a factory function's result is not taken for a class), or
    that a parameter is annotated with (`graph_augmenter: augmentation_utils.GraphAugment`,
    google/uncertainty-baselines' drug_cardiotoxicity/deterministic.py:158)."""
    classes = [index.resolve(value.func) for value in _bound_values(index, expr) if isinstance(value, ast.Call)]
    classes += [index.resolve(annotation) for annotation in _annotations(index, expr)]
    return [name for name in dict.fromkeys(classes)
            if name is not None and _is_user_code(index, name) and name.rsplit(".", 1)[-1][:1].isupper()]


def _annotations(index: FileIndex, expr: ast.expr) -> list[ast.expr]:
    """The annotations of the parameter a name reads, if it reads one."""
    if not isinstance(expr, ast.Name):
        return []
    found = []
    for binding in index.bindings_of(expr):
        if binding.kind == "param" and isinstance(binding.node, ast.arguments):
            every = binding.node.posonlyargs + binding.node.args + binding.node.kwonlyargs
            found += [a.annotation for a in every if a.arg == expr.id and a.annotation is not None]
    return found


def _is_user_code(index: FileIndex, name: str) -> bool:
    """A name of another module of the project, not of a library or of this module."""
    return not name.startswith(_NOT_USER_CODE) and not name.startswith(f"{index.module_name}.")
