"""The edit API of rules: Edits that replace a node or a statement, and code built with libcst.

Rules describe a fix as text edits (tfcheck.findings.Fix/Edit) because the engine analyses CPython's
`ast`, which keeps positions but not formatting; tfcheck/fixes.py applies them. What a rule inserts is
built with libcst here (`call_code`, `expression_code`), so synthesized code is valid Python by
construction, and `parses` is how the fix loop checks that a fixed file still parses.

`expression_code(facts, node)` is the source of an expression that can stand alone,
`call_code(func, *args, **keywords)` builds a call from such pieces, `replace_node(facts, node, code)`
and `replace_statement(facts, stmt, code)` turn the result into an Edit
(e.g. TFC008 `assert` -> `tf.debugging.Assert`).
"""

from __future__ import annotations

import ast
import os
import textwrap
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar

from tfcheck.findings import Edit

if TYPE_CHECKING:
    import libcst

    from tfcheck.engine.facts import FileFacts

# libcst's native parser recurses once per operand of `and`/`or`: on the main thread's 8 MiB stack a
# chain of 6,000-12,000 operands overflows it, which is a segfault that ends the whole run, not an
# exception (found by tests/fuzz). So libcst parses on a thread with a 512 MiB stack (reserved, not
# committed: only the pages a parse touches use memory), where 400,000 operands parse, and is never
# given more than MAX_PARSE_CHARS (at 5+ characters an operand, fewer than 200,000 operands).
_PARSER_STACK_BYTES = 512 * 1024 * 1024
MAX_PARSE_CHARS = 1_000_000
_STACK_SIZE_LOCK = threading.Lock()
_T = TypeVar("_T")


# libcst is imported on first use: rules import this module, and a lint run that builds no fix (every
# pre-commit run on clean code) should not pay the ~0.3 s that importing libcst costs.
@lru_cache(maxsize=1)
def _libcst():  # noqa: ANN202 - returns the libcst module
    import libcst

    return libcst


@lru_cache(maxsize=1)
def _tight_equal() -> libcst.AssignEqual:
    """`key=value` without spaces, as PEP 8 writes keyword arguments (libcst's default is `key = value`)."""
    cst = _libcst()
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def _on_parser_stack(parse: Callable[[str], _T], code: str) -> _T:
    """`parse(code)` (a libcst parser) on a thread with a stack deep enough for it (see _PARSER_STACK_BYTES).

    Raises libcst's ParserSyntaxError as `parse` does, and ValueError for code too large or too deep
    to parse safely.
    """
    if len(code) > MAX_PARSE_CHARS:
        raise ValueError(f"{len(code)} characters: too large to parse for a fix")
    parser = _parser_thread()
    try:
        # no room for such a stack (a tight `ulimit -v`): parse here, as before
        return parse(code) if parser is None else parser.submit(parse, code).result()
    except (RecursionError, MemoryError):
        raise ValueError("too deeply nested to parse for a fix") from None


# The one thread libcst parses on, started with the deep stack on first use and kept: a parse on a new
# thread took 1.6 ms, on a thread that had parsed before 0.17 ms (a TFC008 fix's expression; a
# 2,000-line file's 14 fixes cost ~70 ms of its lint that way, issue 41). None before the first parse,
# in a forked child (the thread is not copied), and when no thread with such a stack can start.
_parser: ThreadPoolExecutor | None = None
_no_room_for_parser = False


def _parser_thread() -> ThreadPoolExecutor | None:
    global _parser, _no_room_for_parser
    with _STACK_SIZE_LOCK:  # the stack size is process-wide: set it while the parser's thread starts
        if _parser is None and not _no_room_for_parser:
            executor = ThreadPoolExecutor(1, thread_name_prefix="tfcheck-libcst-parser")
            previous = threading.stack_size(_PARSER_STACK_BYTES)
            try:
                executor.submit(int).result()  # starts its thread now, with that stack
                _parser = executor
            except RuntimeError:
                _no_room_for_parser = True
            finally:
                threading.stack_size(previous)
        return _parser


def _forget_parser_in_child() -> None:
    """A forked worker (the runner's process pool) starts its own parser thread when it first parses."""
    global _parser, _STACK_SIZE_LOCK
    _parser, _STACK_SIZE_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_parser_in_child)


def parses(text: str) -> bool:
    """Whether `text` is a module libcst (and so Python) accepts."""
    libcst = _libcst()
    try:
        _on_parser_stack(libcst.parse_module, text)
    except (libcst.ParserSyntaxError, RecursionError, ValueError):
        return False
    return True


def expression_code(facts: FileFacts, node: ast.expr) -> str:
    """The source of expression `node`, parenthesized when it cannot stand alone.

    A sub-expression that spans lines inside the parentheses of its parent (`assert (a >\\n b)`)
    is not valid on its own; wrapping it keeps it valid wherever it is placed.
    """
    code = facts.text(node)
    return code if _is_expression(code) else f"({code})"


def call_code(func: str, *args: str, **keywords: str) -> str:
    """`func(arg, ..., key=value)` built with libcst from pieces of expression code.

    Raises ValueError when a piece is not an expression (or too large or deep for libcst), so a rule
    never emits a broken fix.
    """
    libcst = _libcst()
    call = libcst.Call(
        func=_parse_expression(func),
        args=[libcst.Arg(_parse_expression(arg)) for arg in args]
        + [libcst.Arg(_parse_expression(value), keyword=libcst.Name(key), equal=_tight_equal())
           for key, value in keywords.items()],
    )
    try:
        return libcst.Module(body=[]).code_for_node(call)
    except RecursionError:  # libcst prints its tree recursively, a Python frame per nesting level
        raise ValueError("too deeply nested to print for a fix") from None


def replace_node(facts: FileFacts, node: ast.AST, code: str) -> Edit:
    """An Edit replacing the source of `node` with `code`."""
    line, column, end_line, end_column = facts.span(node)
    return Edit(line, column, end_line, end_column, code)


def replace_statement(facts: FileFacts, stmt: ast.stmt, code: str) -> Edit:
    """An Edit replacing statement `stmt` with `code` (one or more statements).

    The first line of `code` goes where the statement starts; later lines are inserted as given, so
    a second statement must carry the statement's indentation (continuation lines inside brackets
    may be indented freely). Raises ValueError when `code` does not parse there as statements.
    """
    libcst = _libcst()
    line, column, end_line, end_column = facts.span(stmt)
    try:
        _on_parser_stack(libcst.parse_module, textwrap.dedent(" " * (column - 1) + code.strip("\n")) + "\n")
    except libcst.ParserSyntaxError as exc:
        raise ValueError(f"not a statement: {code!r}: {exc.message}") from None
    return Edit(line, column, end_line, end_column, code.strip("\n"))


def _parse_expression(code: str) -> libcst.BaseExpression:
    libcst = _libcst()
    try:
        return _on_parser_stack(libcst.parse_expression, code)
    except libcst.ParserSyntaxError:
        try:
            return _on_parser_stack(libcst.parse_expression, f"({code})")
        except libcst.ParserSyntaxError as exc:
            raise ValueError(f"not an expression: {code!r}: {exc.message}") from None


def _is_expression(code: str) -> bool:
    libcst = _libcst()
    try:
        _on_parser_stack(libcst.parse_expression, code)
    except (libcst.ParserSyntaxError, ValueError):
        return False
    return True
