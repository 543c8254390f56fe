"""Python state that outlives a traced call, and what graph code does to it.

Graph code runs its Python only while tracing. Four rules care about Python state that lives longer
than one call (module globals, closure variables of eager functions, `self`, outer containers):
writing to it (TFC002 outer-mutation, TFC009 tensor-leak when the value written is a tensor) and
reading it after it changed (TFC003 stale-capture, TFC016 mutable-attribute-read). The mutations are
found here once per file (FileFacts.outer_mutations) so the rules split them without re-walking.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tfcheck.engine import values
from tfcheck.engine.scopes import ClassInfo, FunctionInfo, Scope

if TYPE_CHECKING:
    from tfcheck.engine.facts import FileFacts

# Methods that change a list, dict, set or deque in place.
MUTATING_METHODS = frozenset({
    "append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add", "discard",
    "popitem", "sort", "reverse", "appendleft", "extendleft", "popleft",
})
# Methods that store one of their arguments in the container: the argument's position.
STORING_METHODS = {"append": 0, "appendleft": 0, "add": 0, "insert": 1, "setdefault": 1}
# Values that are TensorFlow/Keras objects, not plain Python state: assigning or reading them is the
# business of other rules (TFC004 creates variables; reading a Variable or a layer is fine).
TF_OBJECT_KINDS = frozenset({values.VARIABLE, values.MODEL, values.LAYER, values.OPTIMIZER,
                             values.TF_FUNCTION, values.DATASET, "function"})
# Methods that set an object up: `__init__` fills a new object, and `build` (Keras' lazy set-up, also
# reached from graph code on the first call) runs once, under the layer's own `built` guard.
SETUP_METHODS = frozenset({"__init__", "__new__", "__post_init__", "build", "_build"})
PLAIN_KINDS = frozenset({values.NUMBER, values.STRING, values.NONE, values.LIST, values.DICT, values.SET,
                         values.TUPLE})


@dataclass(frozen=True)
class OuterMutation:
    """One write to state that outlives the call, made in graph code.

    `node` is where to report (the statement, or the call of a mutating method); `target` the source
    text of what changes (`counter`, `self.counter`, `external_list`); `owner` says whose state it is
    (`global`, `nonlocal`, `self`, `module-level`, `enclosing`); `value` the value stored, if one is.
    """

    node: ast.AST
    function: FunctionInfo
    how: str  # rebind, attribute, subscript, method, delete
    target: str
    owner: str
    value: ast.expr | None


def is_setup_method(name: str) -> bool:
    """`__init__`, `build` and build helpers (`_build_from_signature`, `build_from_config`)."""
    return name in SETUP_METHODS or name.startswith(("build", "_build"))


def owner_phrase(mutation: OuterMutation) -> str:
    """`module-level ` / `enclosing ` before a container's name in a message; nothing for `self.x`."""
    return "" if mutation.owner == "self" else f"{mutation.owner} "


def find_outer_mutations(facts: FileFacts) -> list[OuterMutation]:
    """Every write in graph code to Python state that outlives the call."""
    found: list[OuterMutation] = []
    statements = facts.graph_nodes(ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.Call)
    for node, info in statements:
        if not is_setup_method(info.name):
            found.extend(_mutations_of(facts, node, info))
    found.sort(key=lambda m: (m.node.lineno, m.node.col_offset))
    return found


def _mutations_of(facts: FileFacts, node: ast.AST, info: FunctionInfo) -> Iterator[OuterMutation]:
    if isinstance(node, ast.Call):
        yield from _method_mutation(facts, node, info)
        return
    if isinstance(node, ast.Delete):
        for target in node.targets:
            yield from _target_mutation(facts, node, info, target, None, "delete")
        return
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    value = getattr(node, "value", None)
    for target in targets:
        yield from _target_mutation(facts, node, info, target, value, "assign")


def _target_mutation(facts: FileFacts, stmt: ast.AST, info: FunctionInfo, target: ast.expr,
                     value: ast.expr | None, action: str) -> Iterator[OuterMutation]:
    how = "delete" if action == "delete" else None
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_mutation(facts, stmt, info, element, None, action)
        return
    if isinstance(target, ast.Starred):
        yield from _target_mutation(facts, stmt, info, target.value, None, action)
        return
    if isinstance(target, ast.Name):
        if target.id in info.scope.global_names:
            yield OuterMutation(stmt, info, how or "rebind", target.id, "global", value)
        elif target.id in info.scope.nonlocal_names and not _owned_by_graph_code(facts, target, info):
            yield OuterMutation(stmt, info, how or "rebind", target.id, "nonlocal", value)
        return
    if isinstance(target, ast.Attribute):
        owner = object_owner(facts, target.value, info)
        if owner is not None and not _lazy_initialisation(facts, stmt, target) \
                and not facts.kinds(value) & TF_OBJECT_KINDS:
            yield OuterMutation(stmt, info, how or "attribute", facts.text(target), owner, value)
        return
    if isinstance(target, ast.Subscript):
        owner = container_owner(facts, target.value, info)
        if owner is not None:
            yield OuterMutation(stmt, info, how or "subscript", facts.text(target.value), owner, value)


def _method_mutation(facts: FileFacts, call: ast.Call, info: FunctionInfo) -> Iterator[OuterMutation]:
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in MUTATING_METHODS):
        return
    owner = container_owner(facts, func.value, info)
    if owner is None:
        return
    position = STORING_METHODS.get(func.attr)
    value = call.args[position] if position is not None and position < len(call.args) else None
    yield OuterMutation(call, info, "method", facts.text(func.value), owner, value)


def outer_name_owner(facts: FileFacts, name: ast.Name, info: FunctionInfo) -> str | None:
    """`module-level` or `enclosing` when `name` is bound outside the graph function `info`.

    Locals of an enclosing function that is itself graph code live only as long as its trace, so they
    do not count: writing to them from a nested traced function is ordinary tracing code.
    """
    scope = facts.binding_scope(name)
    if scope is None or _is_own_scope(scope, info):
        return None
    if scope is facts.module_scope:
        return "module-level"
    if scope.kind == "function" and not _owned_by_graph_code(facts, name, info, scope) \
            and not facts.graph_functions.get(info, "").startswith("traced by") \
            and not _traced_explicitly(facts, info, scope):
        return "enclosing"  # (a body traced by tf.while_loop or Dataset.map is traced in the enclosing call)
    return None


def _traced_explicitly(facts: FileFacts, info: FunctionInfo, scope: Scope) -> bool:
    """`f.get_concrete_function(...)` in the enclosing function: traced once, on purpose, right there.

    Writing to the enclosing function's state is then how the trace reports back (shapes, objects
    made while tracing), not a side effect expected on every call.
    """
    owner = facts.function_info(scope.node)
    return owner is not None and (owner, info) in facts.explicit_traces


def find_explicit_traces(facts: FileFacts) -> frozenset[tuple[FunctionInfo, FunctionInfo]]:
    """(function, traced) for every `traced.get_concrete_function(...)` call made in `function`."""
    found: set[tuple[FunctionInfo, FunctionInfo]] = set()
    for call, caller in facts.calls:
        func = call.func
        if caller is not None and isinstance(func, ast.Attribute) and func.attr == "get_concrete_function":
            found.update((caller, traced) for traced in facts.function_target(func.value))
    return frozenset(found)


def _is_own_scope(scope: Scope, info: FunctionInfo) -> bool:
    while scope is not None and scope.kind == "comprehension":
        scope = scope.parent
    return scope is info.scope


def _owned_by_graph_code(facts: FileFacts, name: ast.Name, info: FunctionInfo, scope: Scope | None = None) -> bool:
    """Whether the function that binds `name` (seen from `info`) is graph code itself."""
    if scope is None:
        scope = facts.lookup(name.id, info.scope.parent)[0]
    owner = facts.function_info(scope.node) if scope is not None else None
    return facts.is_graph_function(owner)


def object_owner(facts: FileFacts, receiver: ast.expr, info: FunctionInfo) -> str | None:
    """Whose object `receiver` is, when it outlives the call: `self`, or an outer plain object."""
    if _is_self(facts, receiver, info):
        return "self"
    if isinstance(receiver, ast.Attribute) and _is_self(facts, receiver.value, info):
        return "self" if values.OBJECT in facts.kinds(receiver) else None
    if isinstance(receiver, ast.Name) and values.OBJECT in facts.kinds(receiver) \
            and not facts.kinds(receiver) & TF_OBJECT_KINDS:
        return outer_name_owner(facts, receiver, info)
    return None


def container_owner(facts: FileFacts, receiver: ast.expr, info: FunctionInfo) -> str | None:
    """Whose list, dict or set `receiver` is, when it outlives the call (`self` or an outer name)."""
    kinds = facts.kinds(receiver)
    if not kinds & values.CONTAINERS or kinds & TF_OBJECT_KINDS:
        return None
    if isinstance(receiver, ast.Attribute) and _is_self(facts, receiver.value, info):
        return "self"
    if isinstance(receiver, ast.Name):
        return outer_name_owner(facts, receiver, info)
    return None


def _is_self(facts: FileFacts, expr: ast.expr, info: FunctionInfo) -> bool:
    """`self` of the method `info` (or of the method a nested function of `info` lives in)."""
    if not isinstance(expr, ast.Name):
        return False
    probe = ast.Attribute(value=expr, attr="_", ctx=ast.Load())
    return facts.is_self_attribute(probe)


def _lazy_initialisation(facts: FileFacts, stmt: ast.AST, target: ast.Attribute) -> bool:
    """Set up once, on the first trace, then reused: guarded by a test of an attribute set under it.

    `if self.x is None: self.x = ...`, and `if not self.built: ...; self.built = True`.
    """
    for ancestor in facts.ancestors(stmt):
        if isinstance(ancestor, ast.If) and any(_is_none_test(facts, ancestor.test, facts.text(assigned))
                                                for assigned in _attributes_assigned(ancestor)):
            return True
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
    return False


def _attributes_assigned(block: ast.If) -> list[ast.Attribute]:
    """Attribute targets assigned anywhere in the body of an `if` (not its `else`)."""
    return [target for stmt in block.body for node in ast.walk(stmt)
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Attribute)]


def _is_none_test(facts: FileFacts, test: ast.expr, wanted: str) -> bool:
    """`x is None`, `not x`, `not hasattr(self, "x")` about the expression `wanted`."""
    if isinstance(test, ast.BoolOp):
        return any(_is_none_test(facts, value, wanted) for value in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.Eq)):
        return _reads(facts, test.left, wanted) and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        operand = test.operand
        if isinstance(operand, ast.Call) and isinstance(operand.func, ast.Name) and operand.func.id == "hasattr" \
                and len(operand.args) == 2 and isinstance(operand.args[1], ast.Constant):
            return wanted.endswith(f".{operand.args[1].value}")
        return facts.text(operand) == wanted
    return False


def _reads(facts: FileFacts, expr: ast.expr, wanted: str) -> bool:
    """`expr` is `wanted`, or a local set from it: `x = getattr(self, "x", None)` or `x = self.x`."""
    if facts.text(expr) == wanted:
        return True
    if not isinstance(expr, ast.Name):
        return False
    for binding in facts.bindings_of(expr):
        value = binding.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "getattr" \
                and len(value.args) >= 2 and isinstance(value.args[1], ast.Constant) \
                and wanted == f"{facts.text(value.args[0])}.{value.args[1].value}":
            return True
        if value is not None and facts.text(value) == wanted:
            return True
    return False


def is_tensor_value(facts: FileFacts, expr: ast.expr | None, info: FunctionInfo, depth: int = 0) -> bool:
    """Whether `expr` is a tensor computed in the graph function `info`.

    Beyond what the value kinds say (`tf.*` results), arithmetic on the function's parameters and the
    outputs of layers and models count: in graph code their parameters are (symbolic) tensors. A bare
    parameter does not: it may be a Python value passed in, and storing it is a plain side effect.
    """
    if expr is None or depth > 6:
        return False
    kinds = facts.kinds(expr)
    if values.TENSOR in kinds:
        return True
    if isinstance(expr, ast.BinOp):
        sides = (expr.left, expr.right)
        if any(values.STRING in facts.kinds(side) for side in sides):
            return False
        return any(_tensor_operand(facts, side, info, depth) for side in sides)
    if isinstance(expr, ast.UnaryOp):
        return _tensor_operand(facts, expr.operand, info, depth)
    if isinstance(expr, ast.Name) and _local_tensor(facts, expr, info, depth):
        return True
    if kinds & TF_OBJECT_KINDS or kinds & PLAIN_KINDS:
        return False
    if isinstance(expr, ast.Call):
        return bool(facts.kinds(expr.func) & {values.LAYER, values.MODEL, values.TF_FUNCTION})
    return False


def _tensor_operand(facts: FileFacts, expr: ast.expr, info: FunctionInfo, depth: int) -> bool:
    if isinstance(expr, ast.Name) and _is_tensor_parameter(facts, expr, info):
        return True
    return is_tensor_value(facts, expr, info, depth + 1)


def _is_tensor_parameter(facts: FileFacts, name: ast.Name, info: FunctionInfo) -> bool:
    """A parameter of the graph function, other than `self`/`cls` of a method."""
    if name.id not in info.params or facts.binding_scope(name) is not info.scope:
        return False
    return not (info.cls is not None and info.params and info.params[0] == name.id)


def _local_tensor(facts: FileFacts, name: ast.Name, info: FunctionInfo, depth: int) -> bool:
    """A local of `info` whose every assignment is a tensor."""
    if facts.binding_scope(name) is not info.scope:
        return False
    bindings = facts.bindings_of(name)
    return bool(bindings) and all(b.kind == "assign" and b.value is not None and b.value is not name
                                  and is_tensor_value(facts, b.value, info, depth + 1) for b in bindings)


def instance_class(facts: FileFacts, receiver: ast.expr) -> ClassInfo | None:
    """The class of this file that a name was built from (`m = SimpleModel()`), when all agree."""
    if not isinstance(receiver, ast.Name):
        return None
    classes = {facts.called_class(b.value) for b in facts.bindings_of(receiver)
               if isinstance(b.value, ast.Call)}
    return classes.pop() if len(classes) == 1 else None
