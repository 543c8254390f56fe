"""What AutoGraph carries through an `if` or a loop on a tensor, read from the source.

AutoGraph turns an `if` on a tensor into `tf.cond` and a loop on one into `tf.while_loop`; each name
the statement writes and the code after it (or its next iteration) reads becomes an output of the
branches or a loop variable, and TensorFlow then demands that every branch define it, with one
dtype and one nested structure, and that a loop keep its dtype, shape and structure. Two questions
about a function's names answer "is it carried": the references of a name in source order (a write
placed where it happens: after the value it assigns), and what kind of value an assignment gives, as
far as the source says (`value_structure`).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import NamedTuple

from tfcheck.engine.scopes import FunctionInfo

# Simple statements whose targets are written after their value is computed (`y = y + 1`).
_ASSIGNMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign)


class Reference(NamedTuple):
    """One read or write of a name, at the position where it happens."""

    position: tuple[int, int]
    node: ast.Name
    is_load: bool


def references(function: FunctionInfo, parents: Mapping[ast.AST, ast.AST]) -> dict[str, list[Reference]]:
    """The reads and writes of each name in `function`'s own code (not in functions nested in it), in the
    order they happen: an augmented assignment reads before it writes, an assignment writes at its end."""
    found: dict[str, list[Reference]] = {}
    for node in function.nodes:
        if not isinstance(node, ast.Name):
            continue
        start = (node.lineno, node.col_offset)
        if isinstance(node.ctx, ast.Load):
            found.setdefault(node.id, []).append(Reference(start, node, True))
            continue
        statement = parents.get(node)
        if isinstance(statement, ast.AugAssign):
            found.setdefault(node.id, []).append(Reference(start, node, True))
        if isinstance(statement, _ASSIGNMENTS):
            end = (statement.end_lineno or statement.lineno, statement.end_col_offset or 0)
            found.setdefault(node.id, []).append(Reference(end, node, False))
        else:
            found.setdefault(node.id, []).append(Reference(start, node, False))
    for refs in found.values():
        refs.sort(key=lambda ref: ref.position)
    return found


def first_after(refs: list[Reference], position: tuple[int, int]) -> Reference | None:
    """The first reference after `position` (a write inside a statement ending there is placed at its end)."""
    return next((ref for ref in refs if ref.position > position), None)


def literal_structure(expr: ast.expr | None) -> str | None:
    """What the source says an assigned value is, without knowing tensors: a tuple or list display of
    n elements, None, or a Python bool, int or float literal; None when it says nothing."""
    if isinstance(expr, (ast.Tuple, ast.List)):
        if any(isinstance(element, ast.Starred) for element in expr.elts):
            return None
        kind = "tuple" if isinstance(expr, ast.Tuple) else "list"
        return f"a {kind} of {len(expr.elts)}"
    if isinstance(expr, ast.Constant):
        value = expr.value
        if value is None:
            return "None"
        if type(value) in (bool, int, float):
            return f"a Python {type(value).__name__}"
    return None


def float_valued(expr: ast.expr) -> bool:
    """Arithmetic whose result is a float whatever its operands: a float literal or a true division in
    the expression tree (`0.5 * x`, `x / 2`), not through calls."""
    if isinstance(expr, ast.Constant):
        return type(expr.value) is float
    if isinstance(expr, ast.BinOp):
        return isinstance(expr.op, ast.Div) or float_valued(expr.left) or float_valued(expr.right)
    if isinstance(expr, ast.UnaryOp):
        return float_valued(expr.operand)
    return False


FLOAT_TENSOR = "a float tensor"
TENSOR = "a tensor"
_SEQUENCE = ("a tuple", "a list")


def disagree(first: str, second: str) -> bool:
    """Whether two values that `value_structure` described cannot be one output of `tf.cond` or one
    loop variable: another nested structure, None against a value, two Python literal types (each
    becomes a tensor of its own dtype), or an int literal against float arithmetic on a tensor."""
    if first == second:
        return False
    tensors = {TENSOR, FLOAT_TENSOR}
    if first in tensors and second in tensors:
        return False
    pair = {first, second}
    if first.startswith(_SEQUENCE) or second.startswith(_SEQUENCE) or "None" in pair:
        return True
    if TENSOR in pair:
        return False  # a literal against a tensor of a dtype the source does not show
    if FLOAT_TENSOR in pair:
        return bool(pair & {"a Python int", "a Python bool"})
    return True  # two different Python literal types
