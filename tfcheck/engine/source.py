"""Read and parse one file, turning every way a file can be unreadable into a ParseFailure.

The engine analyses CPython's `ast`, not libcst's tree: on this machine libcst 1.9 parses TensorFlow's
sources at ~8k lines/s and its visitor is slower still, while `ast.parse` runs at ~100k lines/s, which
is what a pre-commit hook on a monorepo needs. libcst is used where its lossless tree matters: fixes.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


# Python's own line breaks; str.splitlines() also breaks at form feeds and Unicode separators, which
# would shift line numbers against the ones ast reports.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class ParseFailure(Exception):
    """A file that cannot be read or parsed; reported as finding TFC000 at `line`:`column`."""

    def __init__(self, path: str, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(f"{path}:{line}:{column}: {message}")
        self.path = path
        self.message = message
        self.line = max(line, 1)
        self.column = max(column, 1)


@dataclass
class SourceFile:
    """A parsed file: its text, its lines (for columns and snippets) and its syntax tree."""

    path: str
    text: str
    tree: ast.Module
    lines: list[str] = field(repr=False)
    # how messages name a line: a notebook names its cell (tfcheck/notebook.py sets it)
    line_name: Callable[[int], str] = field(default=lambda line: f"line {line}", repr=False, compare=False)

    def char_column(self, line: int, byte_offset: int) -> int:
        """Convert ast's UTF-8 byte offset on a 1-based line into a 1-based character column."""
        if not 1 <= line <= len(self.lines):
            return byte_offset + 1
        prefix = self.lines[line - 1].encode("utf-8")[:byte_offset]
        return len(prefix.decode("utf-8", errors="ignore")) + 1


def decode_source(path: str, data: bytes) -> str:
    """Decode bytes as Python does: a BOM or a PEP 263 coding line, else UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" not in str(exc):
            raise ParseFailure(path, f"invalid encoding declaration: {exc}") from None
        encoding = "utf-8"  # no declaration and not UTF-8: decoding below says where
    try:
        return data.decode(encoding)
    except LookupError:
        raise ParseFailure(path, f"unknown encoding {encoding!r}") from None
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        declared = "" if encoding == "utf-8" else " (as its coding declaration says)"
        raise ParseFailure(path, f"not valid {encoding}{declared}: byte 0x{data[exc.start]:02x}; "
                                 "save it as UTF-8 or declare its encoding (PEP 263)", line, column) from None


def read_source(path: Path, display_path: str) -> str:
    """Read a file from disk; unreadable files become a ParseFailure instead of an exception."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ParseFailure(display_path, f"cannot read file: {exc.strerror or exc}") from None
    return decode_source(display_path, data)


def parse_source(display_path: str, text: str, filename: str | None = None) -> SourceFile:
    """Parse text into a SourceFile. Never executes or imports the code.

    `filename` is what `ast` is told (default: the display path). Text that is not the file's content
    (a notebook's cells) must not name the file: CPython re-reads the named file's line to place a
    syntax error, and would place it in the notebook's JSON.
    """
    if "\0" in text:
        before = text[: text.index("\0")]
        line = before.count("\n") + 1
        raise ParseFailure(display_path, "file contains a NUL byte", line, len(before.rsplit("\n", 1)[-1]) + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in the linted code are not ours
            tree = ast.parse(text, filename=filename or display_path, type_comments=False)
    except SyntaxError as exc:
        raise ParseFailure(display_path, f"syntax error: {exc.msg}", exc.lineno or 1, exc.offset or 1) from None
    except (RecursionError, MemoryError):
        raise ParseFailure(display_path, "too deeply nested to parse") from None
    except ValueError as exc:
        raise ParseFailure(display_path, f"cannot parse: {exc}") from None
    return SourceFile(path=display_path, text=text, tree=tree, lines=_LINE_BREAK.split(text))
