"""Why AutoGraph refuses to convert a function, read from the source (TensorFlow 2.21).

AutoGraph converts a function from its source text. Some constructs make it give up and run the
function as written, with only a warning (`AutoGraph could not transform <f> and will run it as-is.
Cause: ...`); an `if`, `while` or `for` on a tensor in it is then a Python statement on a symbolic
tensor and raises OperatorNotAllowedInGraphError. The checks mirror TensorFlow's own:
`autograph/core/unsupported_features_checker.py` (which walks the whole function, nested `def`s and
lambdas included), `autograph/pyct/parser.py` (indentation, lambdas) and
`autograph/converters/directives.py` (`set_loop_options`), `autograph/impl/conversion.py` (wrapt).
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple

from tfcheck.engine.scopes import FunctionInfo

SET_LOOP_OPTIONS = "tensorflow.autograph.experimental.set_loop_options"
_WRAPT_DECORATOR = "wrapt.decorator"
_LOOPS = (ast.For, ast.While)
# The statements directives.py counts before a directive in its loop (`statements_visited`).
_COUNTED_STATEMENTS = (ast.Assign, ast.AugAssign, ast.Expr)


class Refusal(NamedTuple):
    """A construct that makes AutoGraph run a function as written, with AutoGraph's cause."""

    node: ast.AST
    cause: str


def refusal(info: FunctionInfo, resolve: Callable[[ast.AST], str | None], parent_of: Callable[[ast.AST], ast.AST | None],
            lines: list[str], lambdas_on_line: Mapping[int, list[ast.Lambda]],
            targets: Callable[[ast.AST], list[FunctionInfo]]) -> Refusal | None:
    """The first construct (in source order) for which AutoGraph refuses `info`; None when it converts it.
    `targets`: the functions of the file an expression used as a callable can be."""
    found = [*_unsupported_features(info.node), *_misplaced_directives(info.node, resolve, parent_of)]
    if isinstance(info.node, ast.Lambda):
        found += _ambiguous_lambda(info.node, parent_of, lambdas_on_line)
    else:
        found += [*_mixed_indentation(info.node, lines), *_wrapt_decorators(info.node, resolve, targets)]
    return min(found, key=lambda r: (r.node.lineno, r.node.col_offset), default=None)  # type: ignore[attr-defined]


def truth_tested(node: ast.AST) -> list[ast.expr]:
    """The expressions whose truth value `node` asks for, the whole test first, then its parts
    (`a and not b` tests `a` and `b`): what AutoGraph turns into graph conditions."""
    if isinstance(node, (ast.If, ast.While, ast.IfExp)):
        return [node.test, *_parts(node.test)]
    if isinstance(node, ast.BoolOp):  # outside a test, the last operand is the value, never tested
        return [found for value in node.values[:-1] for found in [value, *_parts(value)]]
    return _parts(node) if isinstance(node, ast.UnaryOp) else []


def _parts(expr: ast.expr) -> list[ast.expr]:
    """The operands of `and`/`or`/`not` whose truth is asked for (the last of an `and`/`or` too:
    under a test, its value is tested)."""
    if isinstance(expr, ast.BoolOp):
        return [found for value in expr.values for found in [value, *_parts(value)]]
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        return [expr.operand, *_parts(expr.operand)]
    return []


def _unsupported_features(function: ast.AST) -> Iterator[Refusal]:
    """unsupported_features_checker.py: a name-mangled attribute, a loop with `else`, `yield`, anywhere
    in the function's source, nested functions included."""
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and node.attr.startswith("__") and not node.attr.endswith("__"):
            yield Refusal(node, "mangled names are not yet supported")
        elif isinstance(node, ast.For) and node.orelse:
            yield Refusal(node, "for/else statement not yet supported")
        elif isinstance(node, ast.While) and node.orelse:
            yield Refusal(node, "while/else statement not yet supported")
        elif isinstance(node, (ast.Yield, ast.YieldFrom)):
            yield Refusal(node, "generators are not supported")


def _misplaced_directives(function: ast.AST, resolve: Callable[[ast.AST], str | None],
                          parent_of: Callable[[ast.AST], ast.AST | None]) -> Iterator[Refusal]:
    """directives.py: `set_loop_options(...)` outside a loop, or after an assignment or expression
    statement of its loop (statements of loops nested in it do not count)."""
    for node in ast.walk(function):
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                and resolve(node.value.func) == SET_LOOP_OPTIONS):
            continue
        loop = _innermost_loop(node, parent_of, function)
        if loop is None:
            yield Refusal(node, '"set_loop_options" must be used inside a statement')
        elif any(_innermost_loop(statement, parent_of, function) is loop
                 and (statement.lineno, statement.col_offset) < (node.lineno, node.col_offset)
                 for statement in ast.walk(loop) if isinstance(statement, _COUNTED_STATEMENTS)):
            yield Refusal(node, '"set_loop_options" must be the first statement in the loop block')


def _innermost_loop(node: ast.AST, parent_of: Callable[[ast.AST], ast.AST | None], function: ast.AST) -> ast.AST | None:
    parent = parent_of(node)
    while parent is not None and parent is not function and not isinstance(parent, _LOOPS):
        parent = parent_of(parent)
    return parent if isinstance(parent, _LOOPS) else None


def _ambiguous_lambda(lam: ast.Lambda, parent_of: Callable[[ast.AST], ast.AST | None],
                      lambdas_on_line: Mapping[int, list[ast.Lambda]]) -> Iterator[Refusal]:
    """parser.py: another lambda with the same parameters spanning the line this one starts on (one
    on the same line, or one this one is nested in): AutoGraph cannot tell which source is this one's."""
    others = [other for other in lambdas_on_line.get(lam.lineno, []) if other is not lam]
    parent = parent_of(lam)
    while parent is not None:
        if isinstance(parent, ast.Lambda):
            others.append(parent)
        parent = parent_of(parent)
    if any(ast.dump(other.args) == ast.dump(lam.args) for other in others):
        yield Refusal(lam, "could not parse the source code of <lambda>: found multiple definitions with "
                           "identical signatures at the location")


def _mixed_indentation(function: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> Iterator[Refusal]:
    """parser.py's dedent: in an indented function (a method, a nested def), an indentation that
    uses spaces where the function's own uses a tab, or the other way round."""
    first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
    source = lines[first - 1:function.end_lineno]
    if not source or not source[0][:1].isspace() or not any("\t" in line for line in source):
        return
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO("\n".join(source) + "\n").readline)
                  if t.type == tokenize.INDENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return
    if tokens:
        tabs = "\t" in tokens[0].string
        if any((" " in t.string) if tabs else ("\t" in t.string) for t in tokens):
            yield Refusal(function, "code mixing tabs and spaces for indentation is not allowed")


def _wrapt_decorators(function: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Callable[[ast.AST], str | None],
                      targets: Callable[[ast.AST], list[FunctionInfo]]) -> Iterator[Refusal]:
    """conversion.py's `is_unsupported`: a decorator of the file made with `@wrapt.decorator`, applied
    before tf.function (below it) or to a function converted code calls: AutoGraph sees the wrapt
    wrapper and runs it as-is. One applied after tf.function wraps the converted function: harmless."""
    decorators = function.decorator_list
    tf_function = [i for i, d in enumerate(decorators) if resolve(_callee(d)) == "tensorflow.function"]
    for decorator in decorators[tf_function[-1] + 1:] if tf_function else decorators:
        made = [d for target in targets(_callee(decorator)) if not isinstance(target.node, ast.Lambda)
                for d in target.node.decorator_list]
        if any(resolve(_callee(d)) == _WRAPT_DECORATOR for d in made):
            yield Refusal(decorator, "decorated by wrapt, which is not yet supported by AutoGraph")


def _callee(decorator: ast.expr) -> ast.expr:
    return decorator.func if isinstance(decorator, ast.Call) else decorator
