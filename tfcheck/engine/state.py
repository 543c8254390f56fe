"""Python state that outlives a traced call, and what graph code does to it.

Graph code runs its Python only while tracing. Four rules care about Python state that lives longer
than one call (module globals, closure variables of eager functions, `self`, outer containers):
writing to it (TFC002 outer-mutation, TFC009 tensor-leak when the value written is a tensor) and
reading it after it changed (TFC003 stale-capture, TFC016 mutable-attribute-read). The mutations are
found here once per file (`OuterState.mutations`, FileFacts.outer_mutations) so the rules split them without re-walking.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from tfcheck.engine import kinds, tensors, values
from tfcheck.engine.graphcode import GraphCode
from tfcheck.engine.guards import first_call_guard
from tfcheck.engine.index import FileIndex
from tfcheck.engine.kinds import MUTATING_METHODS
from tfcheck.engine.lifetime import Lifetimes
from tfcheck.engine.scopes import FunctionInfo, Scope
from tfcheck.engine.tfcalls import TfFunctionCall, arguments_for

# Methods that store one of their arguments in the container: the argument's position.
STORING_METHODS = {"append": 0, "appendleft": 0, "add": 0, "insert": 1, "setdefault": 1}
# Methods that set an object up: `__init__` fills a new object, and `build` (Keras' lazy set-up, also
# reached from graph code on the first call) runs once, under the layer's own `built` guard.
# `setUp`/`setup` (tests, frameworks), `compile`, `reset_state(s)` (Keras metrics) and `__setstate__` set an
# object up anew too: what they assign is configuration, not state a trace changes.
SETUP_METHODS = frozenset({"__init__", "__new__", "__post_init__", "build", "_build", "__setstate__", "setup",
                           "setUp", "compile", "reset_states", "reset_state"})


@dataclass(frozen=True)
class OuterMutation:
    """One write to state that outlives the call, made in graph code.

    `node` is where to report (the statement, or the call of a mutating method); `target` the source
    text of what changes (`counter`, `self.counter`, `external_list`); `owner` says whose state it is
    (`global`, `nonlocal`, `self`, `module-level`, `enclosing`, `argument`); `value` the value stored, if
    one is (for `x.a += v`, the sum).
    """

    node: ast.AST
    function: FunctionInfo
    how: str  # rebind, attribute, subscript, method, delete
    target: str
    owner: str
    value: ast.expr | None
    # In a set-up method (`build`) that graph code calls again itself, not behind a first-call guard
    # (`if shape changed: self.build(shape)`): set-up work redone per trace on purpose, whose plain
    # values are no side effect to report, but whose tensors are the trace's (TFC009).
    rebuilt: bool = False

    @property
    def owner_phrase(self) -> str:
        """`module-level ` / `enclosing ` before a container's name in a message; nothing for `self.x`."""
        return "" if self.owner == "self" else f"{self.owner} "


def is_setup_method(name: str) -> bool:
    """`__init__`, `build` and build helpers (`_build_from_signature`, `build_from_config`)."""
    return name in SETUP_METHODS or name.startswith(("build", "_build"))


class OuterState:
    """Writes in graph code to state that outlives the call, and whose state a name or object is.

    Built on the index, the graph code, the explicit traces of a file (`get_concrete_function`) and the
    calls of its tf.functions (`calls_of`, asked only about parameters written to).
    """

    def __init__(self, index: FileIndex, graph: GraphCode, traces: frozenset[tuple[FunctionInfo, FunctionInfo]],
                 calls_of: Callable[[FunctionInfo], list[TfFunctionCall]],
                 callers: Callable[[FunctionInfo], list[tuple[ast.Call, FunctionInfo | None]]]) -> None:
        self.index = index
        self.graph = graph
        self.traces = traces
        self.calls_of = calls_of
        self.callers = callers
        self.lifetimes = Lifetimes(index, graph, callers)

    def mutations(self) -> list[OuterMutation]:
        """Every write in graph code to Python state that outlives the call."""
        found: list[OuterMutation] = []
        statements = self.graph.nodes(ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.Call)
        rebuilt: dict[FunctionInfo, bool] = {}
        for node, info in statements:
            if not is_setup_method(info.name):
                found.extend(self._mutations_of(node, info))
            elif rebuilt.setdefault(info, self._rebuilt_in_graph(info)):
                found.extend(replace(mutation, rebuilt=True) for mutation in self._mutations_of(node, info))
        found.sort(key=lambda m: (m.node.lineno, m.node.col_offset))
        return found

    def _lives_one_trace(self, expr: ast.expr) -> bool:
        """Whether the `self.<attr>` that `expr` reaches into (`self.a`, `self.a[k]`, `self.a.b`) lives
        only as long as one trace: an attribute of an object made per call, or a scratch attribute
        (tfcheck.engine.lifetime)."""
        while isinstance(expr, (ast.Attribute, ast.Subscript)) and not self.index.is_self_attribute(expr):
            expr = expr.value
        cls = self.index.class_of_self(expr) if isinstance(expr, ast.Attribute) else None
        return cls is not None and (self.lifetimes.made_per_call(cls) or self.lifetimes.is_scratch(cls, expr.attr))

    def _rebuilt_in_graph(self, info: FunctionInfo) -> bool:
        """A set-up method other than a constructor that graph code of the file calls, not behind a
        first-call guard: it runs again in the traces that call it, not once (sionna's interleavers
        call `self.build(inputs.shape)` from `call` when the static shape changed)."""
        return info.name not in ("__init__", "__new__", "__post_init__") and any(
            self.graph.is_graph_function(caller) and not is_setup_method(caller.name)
            and first_call_guard(self.index, call) is None for call, caller in self.callers(info))

    def _mutations_of(self, node: ast.AST, info: FunctionInfo) -> Iterator[OuterMutation]:
        if isinstance(node, ast.Call):
            yield from self._method_mutation(node, info)
            return
        if isinstance(node, ast.Delete):
            for target in node.targets:
                yield from self._target_mutation(node, info, target, None, "delete")
            return
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = getattr(node, "value", None)
        if isinstance(node, ast.AugAssign):  # what is stored is `target op value`, not `value`
            value = ast.BinOp(left=node.target, op=node.op, right=node.value)
        for target in targets:
            yield from self._target_mutation(node, info, target, value, "assign")

    def _target_mutation(self, stmt: ast.AST, info: FunctionInfo, target: ast.expr,
                         value: ast.expr | None, action: str) -> Iterator[OuterMutation]:
        how = "delete" if action == "delete" else None
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                yield from self._target_mutation(stmt, info, element, None, action)
            return
        if isinstance(target, ast.Starred):
            yield from self._target_mutation(stmt, info, target.value, None, action)
            return
        if isinstance(target, ast.Name):
            if first_call_guard(self.index, stmt) is not None:
                return  # `global v; if v is None: v = tf.Variable(...)`: lazy creation, once
            if target.id in info.scope.global_names:
                yield OuterMutation(stmt, info, how or "rebind", target.id, "global", value)
            elif target.id in info.scope.nonlocal_names and not self._owned_by_graph_code(target, info):
                yield OuterMutation(stmt, info, how or "rebind", target.id, "nonlocal", value)
            return
        if isinstance(target, ast.Attribute):
            owner = self.object_owner(target.value, info) or self._tensor_on_held_object(target, info, value)
            if owner == "self" and self._lives_one_trace(target):
                return
            if owner is not None and not _set_up_once(self.index, stmt, value):
                yield OuterMutation(stmt, info, how or "attribute", self.index.text(target), owner, value)
            return
        if isinstance(target, ast.Subscript):
            owner = self.container_owner(target.value, info)
            if owner is not None and not (owner == "self" and self._lives_one_trace(target.value)) \
                    and first_call_guard(self.index, stmt) is None:
                yield OuterMutation(stmt, info, how or "subscript", self.index.text(target.value), owner, value)

    def _method_mutation(self, call: ast.Call, info: FunctionInfo) -> Iterator[OuterMutation]:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in MUTATING_METHODS):
            return
        owner = self.container_owner(func.value, info)
        if owner is None or (owner == "self" and self._lives_one_trace(func.value)) \
                or first_call_guard(self.index, call) is not None:
            return  # `if not self._slots: self._slots.extend(...)`: set up once
        position = STORING_METHODS.get(func.attr)
        value = call.args[position] if position is not None and position < len(call.args) else None
        yield OuterMutation(call, info, "method", self.index.text(func.value), owner, value)

    def outer_name_owner(self, name: ast.Name, info: FunctionInfo) -> str | None:
        """`module-level` or `enclosing` when `name` is bound outside the graph function `info`.

        Locals of an enclosing function that is itself graph code live only as long as its trace, so they
        do not count: writing to them from a nested traced function is ordinary tracing code.
        """
        scope = self.index.binding_scope(name)
        if scope is None or _is_own_scope(scope, info):
            return None
        if scope is self.index.module_scope:
            return "module-level"
        if scope.kind == "function" and not self._owned_by_graph_code(name, info, scope) \
                and not self.graph.reasons.get(info, "").startswith("traced by") \
                and not self._traced_explicitly(info, scope):
            return "enclosing"  # (a body traced by tf.while_loop or Dataset.map is traced in the enclosing call)
        return None

    def _traced_explicitly(self, info: FunctionInfo, scope: Scope) -> bool:
        """`f.get_concrete_function(...)` in the enclosing function: traced once, on purpose, right there.

        Writing to the enclosing function's state is then how the trace reports back (shapes, objects
        made while tracing), not a side effect expected on every call.
        """
        owner = self.index.function_info(scope.node)
        return owner is not None and (owner, info) in self.traces

    def _owned_by_graph_code(self, name: ast.Name, info: FunctionInfo, scope: Scope | None = None) -> bool:
        """Whether the function that binds `name` (seen from `info`) is graph code itself."""
        if scope is None:
            scope = self.index.lookup(name.id, info.scope.parent)[0]
        owner = self.index.function_info(scope.node) if scope is not None else None
        return self.graph.is_graph_function(owner)

    def object_owner(self, receiver: ast.expr, info: FunctionInfo) -> str | None:
        """Whose object `receiver` is, when it outlives the call: `self`, or an outer plain object."""
        if _is_self(self.index, receiver, info):
            return "self"
        if isinstance(receiver, ast.Attribute) and _is_self(self.index, receiver.value, info):
            return "self" if kinds.OBJECT in values.expr_kinds(self.index, receiver) else None
        if isinstance(receiver, ast.Name) and kinds.OBJECT in values.expr_kinds(self.index, receiver) \
                and not values.expr_kinds(self.index, receiver) & kinds.TF_OBJECT_KINDS:
            return self.outer_name_owner(receiver, info)
        if isinstance(receiver, ast.Name) and self._plain_object_argument(receiver, info):
            return "argument"
        return None

    def _tensor_on_held_object(self, target: ast.Attribute, info: FunctionInfo, value: ast.expr | None) -> str | None:
        """`self.inner.scale = tf.reduce_mean(x)`: a tensor stored on an object `self` holds (a wrapped layer,
        whatever its kind) outlives the call with `self` (issue 37's tensors on a wrapped layer's attributes)."""
        receiver = target.value
        if isinstance(receiver, ast.Attribute) and _is_self(self.index, receiver.value, info) \
                and tensors.surely_tensor(self.index, value):
            return "self"
        return None

    def _plain_object_argument(self, name: ast.Name, info: FunctionInfo) -> bool:
        """A parameter of the tf.function `info` that every call of it in this file (one at least) passes a
        plain Python object: the caller's object, which outlives the call (tensorflow#31362)."""
        if not self.index.is_parameter(name, info):
            return False
        passed = [values.expr_kinds(self.index, argument)
                  for _, argument in arguments_for(self.calls_of(info), name.id)]
        return bool(passed) and all(kinds.OBJECT in found and not found & kinds.TF_OBJECT_KINDS for found in passed)

    def container_owner(self, receiver: ast.expr, info: FunctionInfo) -> str | None:
        """Whose list, dict or set `receiver` is, when it outlives the call (`self` or an outer name)."""
        found = values.expr_kinds(self.index, receiver)
        if not found & kinds.CONTAINERS or found & kinds.TF_OBJECT_KINDS:
            return None
        if isinstance(receiver, ast.Attribute) and _is_self(self.index, receiver.value, info):
            return "self"
        if isinstance(receiver, ast.Name):
            return self.outer_name_owner(receiver, info)
        return None


def _is_own_scope(scope: Scope, info: FunctionInfo) -> bool:
    while scope is not None and scope.kind == "comprehension":
        scope = scope.parent
    return scope is info.scope


def _is_self(index: FileIndex, expr: ast.expr, info: FunctionInfo) -> bool:
    """`self` of the method `info` (or of the method a nested function of `info` lives in)."""
    if not isinstance(expr, ast.Name):
        return False
    probe = ast.Attribute(value=expr, attr="_", ctx=ast.Load())
    return index.is_self_attribute(probe)


def _set_up_once(index: FileIndex, stmt: ast.AST, value: ast.expr | None) -> bool:
    """A TensorFlow object stored (creating it is TFC004's business), or a store behind a first-call
    guard (`if self.x is None: self.x = ...`, `global v; if v is None: v = ...`): set up once, then reused.
    A function defined in the same graph function is no such object: a closure made anew by each trace
    (over that trace's tensors), stored per trace."""
    stored_object = bool(values.expr_kinds(index, value) & kinds.TF_OBJECT_KINDS) and not _closure_of(index, stmt, value)
    return stored_object or first_call_guard(index, stmt) is not None


def _closure_of(index: FileIndex, stmt: ast.AST, value: ast.expr | None) -> bool:
    """`value` names only functions defined in the function that runs `stmt` (tensorflow-addons 0.23.0
    seq2seq/attention_wrapper.py:307: `def _mask_probability_fn(...)` then `self.probability_fn = ...`)."""
    if not isinstance(value, ast.Name):
        return False
    bindings = index.bindings_of(value)
    owner = index.function_of(stmt)
    return bool(bindings) and owner is not None and all(
        b.kind == "def" and index.function_of(b.node) is owner for b in bindings)
