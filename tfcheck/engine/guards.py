"""First-call guards: the conditions under which graph code sets something up once, on the first trace.

Two rules ask whether a statement of graph code runs once rather than on every trace: TFC004
variable-in-graph (a `tf.Variable` may be created on the first trace only) and TFC002 outer-mutation
(lazily setting `self.v` or a `global v` once is not a per-call side effect). Any `if` does not do:
`if self.use_bias:` or `if value is not None:` tests a setting or an argument, and a later trace with
another setting takes the branch anew. A guard counts when it tests that something is *not yet set*
and the guarded branch sets exactly that:

- `if X is None:` / `if not X:` / `if not hasattr(obj, "a"):` / `if key not in cache:` with `X`
  (a name, `obj.a`, an item `box[0]`, `cache`) assigned in the branch, or set by a method of the class the branch calls
  (`if not self.built: self.build(shape)`); the `else` branch of the opposite test counts too;
- `X = X if X is not None else make()` and `X = X or make()`: the fallback of the value assigned to X;
- `except KeyError:` (or `AttributeError`, `LookupError`): the miss of a cache lookup;
- `if X:` whose branch sets `X = False` (or `None`, `0`): a flag true until the first run clears it
  (deeplab2's `if self._first_building_call: ...; self._first_building_call = False`).

Code under `with tf.init_scope():` is not graph code at all (tfcheck.engine.graphcode).
"""

from __future__ import annotations

import ast

from tfcheck.engine.index import FileIndex

_MISS_ERRORS = frozenset({"KeyError", "AttributeError", "LookupError", "IndexError"})
_STOP = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def first_call_guard(index: FileIndex, node: ast.AST) -> ast.AST | None:
    """The guard in `node`'s own function that makes it run only until something is set, or None."""
    previous = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, _STOP):
            return None
        if _guards(index, ancestor, previous):
            return ancestor
        previous = ancestor
    return None


def _guards(index: FileIndex, guard: ast.AST, child: ast.AST) -> bool:
    """Whether `guard`, holding `child`, runs `child` only while what it tests is not yet set."""
    if isinstance(guard, ast.If) and child in guard.body and _clears_itself(index, guard):
        return True
    if isinstance(guard, (ast.If, ast.IfExp)) and child is not guard.test:
        in_body = child in guard.body if isinstance(guard, ast.If) else child is guard.body
        tested = _unset_test(index, guard.test, want_unset=in_body)
        branch = (guard.body if in_body else guard.orelse) if isinstance(guard, ast.If) else [guard]
        return tested is not None and (isinstance(guard, ast.IfExp) and _assigns_itself(index, guard, tested)
                                       or _sets(index, branch, tested))
    if isinstance(guard, ast.BoolOp) and isinstance(guard.op, ast.Or) and child is not guard.values[0]:
        return _assigns_itself(index, guard, index.text(guard.values[0]))
    if isinstance(guard, ast.ExceptHandler):
        caught = guard.type.elts if isinstance(guard.type, ast.Tuple) else [guard.type]
        return any(isinstance(error, ast.Name) and error.id in _MISS_ERRORS for error in caught)
    return False


def _clears_itself(index: FileIndex, guard: ast.If) -> bool:
    """`if X:` whose body assigns `X = False` (or `None`, `0`) at its top level: it runs once."""
    if not isinstance(guard.test, (ast.Name, ast.Attribute)):
        return False
    flag = index.text(guard.test)
    return any(isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and not stmt.value.value
               and any(index.text(target) == flag for target in stmt.targets) for stmt in guard.body)


def _unset_test(index: FileIndex, test: ast.expr, want_unset: bool) -> str | None:
    """What `test` checks is unset (`want_unset`) or set (`not want_unset`): its source text, or None.

    `X is None`, `not X`, `not hasattr(obj, "a")` (-> `obj.a`), `k not in cache` (-> `cache`) test that X
    is unset; `X is not None`, `X`, `hasattr(...)` and `k in cache` that it is set. In a `BoolOp`, one
    operand that tests it is enough (`if self.v is None or reset:`).
    """
    if isinstance(test, ast.BoolOp):
        return next((found for value in test.values if (found := _unset_test(index, value, want_unset))), None)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _unset_test(index, test.operand, not want_unset)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(right, ast.Constant) and right.value is None and isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
            unset = isinstance(op, (ast.Is, ast.Eq))
            return _read_text(index, test.left) if unset == want_unset else None
        if isinstance(op, (ast.In, ast.NotIn)):
            return index.text(right) if isinstance(op, ast.NotIn) == want_unset else None
        return None
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "hasattr" \
            and len(test.args) == 2 and isinstance(test.args[1], ast.Constant):
        return f"{index.text(test.args[0])}.{test.args[1].value}" if not want_unset else None
    if isinstance(test, (ast.Name, ast.Attribute, ast.Subscript)):
        return _read_text(index, test) if not want_unset else None
    return None


def _read_text(index: FileIndex, expr: ast.expr) -> str:
    """The text of what `expr` reads: `self.x` for a local `x = getattr(self, "x", None)` or `x = self.x`."""
    if isinstance(expr, ast.Name):
        bindings = index.bindings_of(expr)
        if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
            value = bindings[0].value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "getattr" \
                    and len(value.args) >= 2 and isinstance(value.args[1], ast.Constant):
                return f"{index.text(value.args[0])}.{value.args[1].value}"
            if isinstance(value, ast.Attribute):
                return index.text(value)
    return index.text(expr)


def _assigns_itself(index: FileIndex, value: ast.expr, tested: str) -> bool:
    """`X = <value>` where `value` holds the test of X: `X = X or make()`, `X = X if X is not None else make()`."""
    statement = index.parent(value)
    return isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is value \
        and any(index.text(target) == tested for target in _targets(statement))


def _sets(index: FileIndex, branch: list[ast.AST], tested: str) -> bool:
    """Whether the statements of `branch` give `tested` a value: an assignment (of it or of an item of
    it), a call of one of its methods (`cache.setdefault`), or a call of a method of the same class that
    assigns it (`self.build(shape)` setting `self.built`)."""
    for stmt in branch:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) \
                    and any(_names(index, target, tested) for target in _targets(node)):
                return True
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and (index.text(node.func.value) == tested or _method_sets(index, node.func, tested)):
                return True
    return False


def _names(index: FileIndex, target: ast.expr, tested: str) -> bool:
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_names(index, element, tested) for element in target.elts)
    while index.text(target) != tested:  # `cache[k] = ...` sets `cache`; `items[0] = ...` sets `items[0]`
        if not isinstance(target, ast.Subscript):
            return False
        target = target.value
    return True


def _method_sets(index: FileIndex, method: ast.Attribute, tested: str) -> bool:
    """`self.m(...)` where a method `m` of the class assigns the `self.` attribute `tested`."""
    if not index.is_self_attribute(method) or not tested.startswith(f"{index.text(method.value)}."):
        return False
    cls = index.class_of_self(method)
    target = index.method_of(cls, method.attr) if cls is not None else None
    attr = tested.split(".", 1)[1]
    return target is not None and cls is not None and any(
        index.function_of(stmt) is target for stmt, _ in index.self_attribute_values(cls, attr))


def _targets(statement: ast.AST) -> list[ast.expr]:
    return list(statement.targets) if isinstance(statement, ast.Assign) else [statement.target]  # type: ignore[attr-defined]
