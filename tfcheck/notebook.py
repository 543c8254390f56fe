"""Jupyter notebooks (`.ipynb`): their code cells as one Python module, and fixed cells written back.

A notebook runs top to bottom as one namespace, so its Python code cells are joined into one module
for the analysis: graph code defined in one cell and called in another is seen as it runs. What is not
Python is left out without moving any line: IPython escapes (`%magic`, `!shell`, `obj?`) become `pass`
at their indentation, cells in another language (`%%bash`, `%%writefile`, a VS Code cell language,
a kernel whose language is not Python) and markdown/raw cells are not part of the module at all, and a
cell that does not parse on its own is reported (TFC000 at that cell) and left out, as IPython would
fail on it and run the others.

Every module line maps back to (cell, line in the cell, line of the .ipynb file). The file line comes
from the raw JSON text: the JSON is parsed with a scanner that records where each string sits, which
is also what lets a fix replace one cell's `source` and leave every other byte of the file alone.
Jupyter itself (nbformat) is not needed.
"""

from __future__ import annotations

import ast
import bisect
import json
import json.decoder
import json.scanner
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from typing import Any

from tfcheck.engine.source import ParseFailure, SourceFile, parse_source
from tfcheck.findings import Edit, Finding, Fix, Severity

SUFFIX = ".ipynb"
# Cell magics whose body is Python run by IPython (ruff's list); any other cell magic makes the cell
# another language: `%%bash`, `%%writefile` (the file is written, not run), `%%html`, ...
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy"})
_CELL_MAGIC = re.compile(r"\s*%%(\w+)(.*)")
# A cell magic the notebook defines itself (`@register_cell_magic def backend(line, cell):`) and that
# runs its cell as Python (`get_ipython().run_cell(cell)`): Deep Learning with Python's notebooks
# mark each framework's version of a cell `%%backend tensorflow`, `%%backend jax`, `%%backend torch`.
_REGISTERED_MAGIC = re.compile(
    r"@register_cell_magic(?:\(\s*['\"](\w+)['\"]\s*\))?\s*\n\s*def\s+(\w+)\s*\([^)]*\)\s*:(?s:(.*?))(?=\n\S|\Z)")
# Words in such a magic's line that make its cell another framework's code, not TensorFlow's.
_OTHER_FRAMEWORKS = frozenset({"jax", "torch", "pytorch"})
# A line IPython rewrites before Python sees it: `%magic`, `!shell`, `?help`, `name = !shell`,
# `name = %magic`, `obj?`/`obj??` help, and automagics. Only looked for in a cell that does not parse.
# Automagics: line magics IPython runs without the `%` (`pip install x`, `cd data`), on a line that is
# not Python.
_AUTOMAGIC = r"(?:pip|conda|cd|ls|pwd|cat|mkdir|rm|cp|mv|env|load_ext|matplotlib)(?:[ \t]+[^\s=(\[,:]|[ \t]*$)"
_ESCAPE = re.compile(rf"[ \t]*(?:[%!?]|[\w.,\[\]() \t]+=[ \t]*[%!]|[\w.*]+\?\??[ \t]*$|{_AUTOMAGIC})")
_MAYBE_ESCAPE = re.compile(rf"^[ \t]*(?:[%!?]|{_AUTOMAGIC})|=[ \t]*[%!]|\?[ \t]*$", re.MULTILINE)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_INDENT = re.compile(r"[ \t]*")
_NOT_A_FILE = "<notebook cells>"  # what `ast` is told the cells' file is (see parse_source)


def is_notebook(path: object) -> bool:
    """Whether a path names a notebook (by its suffix, as Jupyter and ruff decide)."""
    return str(path).lower().endswith(SUFFIX)


# -- JSON with positions ----------------------------------------------------------------------------
class _Str(str):
    """A JSON string value that remembers where its token sits in the raw text."""

    start: int
    end: int


class _List(list):  # type: ignore[type-arg]
    """A JSON array that remembers where it sits in the raw text (from `[` to past `]`)."""

    start: int
    end: int


def _string(s: str, end: int, strict: bool) -> tuple[_Str, int]:
    value, stop = json.decoder.scanstring(s, end, strict)
    located = _Str(value)
    located.start, located.end = end - 1, stop
    return located, stop


def _array(s_and_end: tuple[str, int], scan_once: Any) -> tuple[_List, int]:
    values, stop = json.decoder.JSONArray(s_and_end, scan_once)
    located = _List(values)
    located.start, located.end = s_and_end[1] - 1, stop
    return located, stop


class _LocatingDecoder(json.JSONDecoder):
    """json's own pure-Python scanner, with string values and arrays that keep their offsets."""

    def __init__(self) -> None:
        super().__init__()
        self.parse_string = _string
        self.parse_array = _array
        self.scan_once = json.scanner.py_make_scanner(self)


# -- the notebook -----------------------------------------------------------------------------------
@dataclass
class Cell:
    """A Python code cell: its number among all cells (1-based), its text, and where it sits."""

    number: int
    source: str
    token: _Str | _List  # the `source` value in the raw JSON
    file_lines: list[int]  # line of the .ipynb file where each line of the cell starts


@dataclass
class Notebook:
    """A parsed notebook: its raw text and its Python code cells, in order."""

    path: str
    raw: str
    cells: list[Cell]

    @classmethod
    def parse(cls, path: str, raw: str) -> Notebook:
        """Validate nbformat 4 and collect the Python code cells. Raises ParseFailure with the reason."""
        try:
            document = _LocatingDecoder().decode(raw)
        except json.JSONDecodeError as exc:
            raise ParseFailure(path, f"not a valid notebook: invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
        except RecursionError:
            raise ParseFailure(path, "not a valid notebook: JSON nested too deeply") from None
        if not isinstance(document, dict):
            raise ParseFailure(path, "not a valid notebook: the JSON document is not an object")
        version = document.get("nbformat")
        if version != 4:
            raise ParseFailure(path, f"not a valid notebook: nbformat {version!r}; tfcheck reads nbformat 4 "
                                     "(convert it with `jupyter nbconvert --to notebook --nbformat 4`)")
        cells = document.get("cells")
        if not isinstance(cells, list):
            raise ParseFailure(path, "not a valid notebook: `cells` is not a list")
        starts = [0] + [m.end() for m in re.finditer("\n", raw)]

        def line_of(offset: int) -> int:
            return bisect.bisect_right(starts, offset)

        python = _is_python(document.get("metadata"))
        code = [_cell(path, number, cell, line_of) for number, cell in enumerate(cells, start=1)
                if python and _is_python_code_cell(cell)]
        return cls(path, raw, code)

    def with_sources(self, sources: dict[int, str]) -> str:
        """The raw text with new sources for some cells (by number); every other byte as it was."""
        pieces: list[str] = []
        position = 0
        ensure_ascii = self.raw.isascii() and "\\u" in self.raw
        for cell in self.cells:
            if cell.number in sources and sources[cell.number] != cell.source:
                pieces.append(self.raw[position:cell.token.start])
                pieces.append(_source_token(self.raw, cell, sources[cell.number], ensure_ascii))
                position = cell.token.end
        pieces.append(self.raw[position:])
        return "".join(pieces)


def _is_python(metadata: Any) -> bool:
    """A notebook is Python unless its kernel says another language."""
    if not isinstance(metadata, dict):
        return True
    for key in ("kernelspec", "language_info"):
        info = metadata.get(key)
        language = info.get("language" if key == "kernelspec" else "name") if isinstance(info, dict) else None
        if isinstance(language, str) and language and not language.lower().startswith("python"):
            return False
    return True


def _is_python_code_cell(cell: Any) -> bool:
    if not isinstance(cell, dict) or cell.get("cell_type") != "code":
        return False
    metadata = cell.get("metadata")
    vscode = metadata.get("vscode") if isinstance(metadata, dict) else None
    language = vscode.get("languageId") if isinstance(vscode, dict) else None
    return not isinstance(language, str) or language.lower() == "python"


def _cell(path: str, number: int, cell: dict[str, Any], line_of: Callable[[int], int]) -> Cell:
    token = cell.get("source")
    if isinstance(token, _Str):
        text = str(token)
        file_lines = [line_of(token.start)] * (len(_LINE_BREAK.findall(text)) + 1)
        return Cell(number, text, token, file_lines)
    if isinstance(token, _List) and all(isinstance(piece, _Str) for piece in token):
        return Cell(number, "".join(token), token, _list_file_lines(token, line_of))
    where = line_of(token.start) if isinstance(token, (_Str, _List)) else 1
    raise ParseFailure(path, f"not a valid notebook: cell {number} has no `source` string or list of strings", where)


def _list_file_lines(pieces: list[_Str], line_of: Callable[[int], int]) -> list[int]:
    """The file line of each cell line: where the piece holding its first character sits."""
    lines: list[int] = []
    at_line_start = True
    for piece in pieces:
        starts = sum(1 for match in _LINE_BREAK.finditer(piece) if match.end() < len(piece)) + at_line_start
        lines.extend([line_of(piece.start)] * (starts if piece else 0))
        at_line_start = piece.endswith(("\n", "\r")) if piece else at_line_start
    return lines


def _source_token(raw: str, cell: Cell, source: str, ensure_ascii: bool) -> str:
    """The JSON for a cell's new source, in the form the old one had (a string, or a list of lines)."""
    encode = lambda text: json.dumps(text, ensure_ascii=ensure_ascii)  # noqa: E731
    token = cell.token
    if isinstance(token, _Str):
        return encode(source)
    new = source.splitlines(keepends=True)
    old = [str(piece) for piece in token]
    raw_pieces = [raw[piece.start:piece.end] for piece in token]
    kept: list[str] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        kept.extend(raw_pieces[i1:i2] if tag == "equal" else [encode(line) for line in new[j1:j2]])
    if not token:
        return "[" + ", ".join(kept) + "]"
    head = raw[token.start + 1:token[0].start]
    tail = raw[token[-1].end:token.end - 1]
    separator = raw[token[0].end:token[1].start] if len(token) > 1 else "," + head
    return "[" + head + separator.join(kept) + tail + "]"


# -- the module the engine analyses -----------------------------------------------------------------
@dataclass
class Segment:
    """A cell as part of the module: the module line of its first line, and its lines that are not Python."""

    cell: Cell
    first: int
    python: CellPython

    @property
    def count(self) -> int:
        return len(self.python.lines)

    @property
    def last(self) -> int:
        return self.first + self.count - 1


@dataclass
class NotebookSource:
    """The module made of a notebook's code cells, parsed, with the map back to cells.

    `failures` are TFC000 findings for cells that do not parse (already at their cell).
    """

    notebook: Notebook
    source: SourceFile
    segments: list[Segment]
    failures: list[Finding] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.source.text

    def segment(self, line: int) -> Segment | None:
        index = bisect.bisect_right([s.first for s in self.segments], line) - 1
        return self.segments[index] if index >= 0 and line <= self.segments[index].last else None

    def line_name(self, line: int) -> str:
        """How a module line is named in messages: `line 3 of cell 12`."""
        segment = self.segment(line)
        return f"line {line}" if segment is None else f"line {line - segment.first + 1} of cell {segment.cell.number}"

    def to_cell(self, finding: Finding) -> Finding:
        """A finding of the module, moved to its cell; a fix that leaves the cell or touches IPython syntax is dropped."""
        segment = self.segment(finding.line)
        if segment is None:
            return finding
        offset = segment.first - 1
        line = finding.line - offset
        end_line, end_column = finding.end_line - offset, finding.end_column
        if end_line > segment.count:
            end_line, end_column = segment.count, len(self._cell_line(segment, segment.count)) + 1
        file_lines = segment.cell.file_lines
        column, end_column = segment.python.column(line, finding.column), segment.python.column(end_line, end_column)
        return replace(finding, line=line, column=column, end_line=end_line, end_column=end_column,
                       cell=segment.cell.number, source=_line(segment.cell.source, line),
                       file_line=file_lines[line - 1], file_end_line=file_lines[end_line - 1],
                       fix=_fix_in_cell(finding.fix, segment))

    def _cell_line(self, segment: Segment, line: int) -> str:
        return self.source.lines[segment.first + line - 2]


def _line(text: str, number: int) -> str | None:
    """Line `number` (1-based) of a cell's own text: the excerpt reporters show, with the cell's indentation."""
    lines = text.splitlines()
    return lines[number - 1] if 1 <= number <= len(lines) else None


def _fix_in_cell(fix: Fix | None, segment: Segment) -> Fix | None:
    """The fix in the cell's coordinates; None when it leaves the cell, touches IPython syntax, or is in a
    cell IPython dedents (the fix's new lines would not carry the cell's indentation)."""
    python = segment.python
    if fix is None or python.dedent:
        return None
    offset = segment.first - 1
    edits: list[Edit] = []
    for edit in fix.edits:
        # an edit may end at the start of the line after the cell: the end of the cell's text
        ends_inside = edit.end_line <= segment.last or (edit.end_line == segment.last + 1 and edit.end_column == 1)
        lines = set(range(edit.line - offset, min(edit.end_line, segment.last) - offset + 1))
        if edit.line < segment.first or not ends_inside or lines & python.masked:
            return None
        edits.append(replace(edit, line=edit.line - offset, end_line=edit.end_line - offset))
    return replace(fix, edits=tuple(edits))


@dataclass(frozen=True)
class CellPython:
    """A cell's lines as the Python IPython runs, with what changed to get there (no line moves).

    `masked`: 1-based lines that were IPython syntax, now `pass`. `dedent`: IPython removes the first
    line's indentation from every line that starts with it (its `leading_indent` step); `dedented`
    are those lines, whose columns are `dedent` further right in the cell.
    """

    lines: list[str]
    masked: frozenset[int] = frozenset()
    dedent: int = 0
    dedented: frozenset[int] = frozenset()

    def column(self, line: int, column: int) -> int:
        """A column of the module's line -> the column in the cell."""
        return column + self.dedent if line in self.dedented else column


def registered_magics(sources: Iterable[str]) -> frozenset[str]:
    """The cell magics a notebook registers that run their cell's body as Python."""
    return frozenset(match.group(1) or match.group(2) for source in sources
                     for match in _REGISTERED_MAGIC.finditer(source) if "run_cell(" in match.group(3))


def python_lines(source: str, registered: frozenset[str] = frozenset()) -> CellPython | None:
    """A cell's lines as Python; None for a cell in another language (or, under a cell magic the
    notebook registers, for another framework)."""
    lines = _LINE_BREAK.split(source)
    if lines and lines[-1] == "":
        lines.pop()
    indent = _INDENT.match(lines[0]).group() if lines else ""  # type: ignore[union-attr]
    dedented = frozenset(i + 1 for i, line in enumerate(lines) if indent and line.startswith(indent))
    lines = [line[len(indent):] if i + 1 in dedented else line for i, line in enumerate(lines)]
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    masked: dict[int, str] = {}  # line index -> its indentation
    if first is not None and (magic := _CELL_MAGIC.match(lines[first])):
        name, words = magic.group(1), set(magic.group(2).lower().split())
        if name not in PYTHON_CELL_MAGICS and (name not in registered or words & _OTHER_FRAMEWORKS):
            return None
        masked[first] = ""
    if _MAYBE_ESCAPE.search(source) and not _parses("\n".join("" if i in masked else line
                                                              for i, line in enumerate(lines))):
        masked.update(_escape_lines(lines))
    python = [masked[i] + "pass" if i in masked else line for i, line in enumerate(lines)]
    return CellPython(python, frozenset(i + 1 for i in masked), len(indent), dedented)


def _escape_lines(lines: list[str]) -> Iterable[tuple[int, str]]:
    """The lines IPython rewrites, with the indentation of the statement they stand for: a line ending
    in a backslash carries the escape (`!pip install \\`) to the next line."""
    continued: str | None = None
    for i, line in enumerate(lines):
        if continued is not None or _ESCAPE.match(line):
            indent = continued if continued is not None else _INDENT.match(line).group()  # type: ignore[union-attr]
            yield i, indent
            continued = indent if line.endswith("\\") else None


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def decode_notebook(path: str, data: bytes) -> str:
    """A notebook's text: JSON is UTF-8 (a byte order mark is allowed and kept out of the text)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ParseFailure(path, f"not a valid notebook: not UTF-8: byte 0x{data[exc.start]:02x}", line) from None


def load_notebook(path: str, data: bytes) -> NotebookSource:
    """Bytes of a notebook -> the parsed module of its code cells. Raises ParseFailure for a broken notebook.

    The module is parsed once; only when that fails is each cell parsed alone, to report the cells
    that do not parse (a syntax error is not always reported in the cell that has it) and leave them out.
    """
    notebook = Notebook.parse(path, decode_notebook(path, data))
    registered = registered_magics(cell.source for cell in notebook.cells)
    cells = [(cell, python) for cell in notebook.cells
             if (python := python_lines(cell.source, registered)) is not None and python.lines]
    try:
        return _module(path, notebook, cells, [])
    except ParseFailure:
        failures = [failure for cell, python in cells if (failure := _cell_failure(path, cell, python))]
        broken = {failure.cell for failure in failures}
        return _module(path, notebook, [c for c in cells if c[0].number not in broken], failures)


def _module(path: str, notebook: Notebook, cells: list[tuple[Cell, CellPython]],
            failures: list[Finding]) -> NotebookSource:
    segments: list[Segment] = []
    text: list[str] = []
    for cell, python in cells:
        segments.append(Segment(cell, len(text) + 1, python))
        text.extend(python.lines)
    source = parse_source(path, "".join(line + "\n" for line in text), _NOT_A_FILE)
    module = NotebookSource(notebook, source, segments, failures)
    module.source.line_name = module.line_name
    return module


def _cell_failure(path: str, cell: Cell, python: CellPython) -> Finding | None:
    """TFC000 where Python stops in a cell that does not parse on its own; None when it parses."""
    try:
        parse_source(path, "".join(line + "\n" for line in python.lines), _NOT_A_FILE)
    except ParseFailure as failure:
        line = min(failure.line, len(cell.file_lines))
        column = python.column(line, failure.column)
        return Finding(path, line, column, line, column, "TFC000", "parse-error", Severity.ERROR,
                       failure.message, cell=cell.number, file_line=cell.file_lines[line - 1],
                       file_end_line=cell.file_lines[line - 1])
    return None


def notebook_sources(path: str, raw: str) -> dict[int, str]:
    """The source of every Python code cell of a notebook's text, by cell number."""
    return {cell.number: cell.source for cell in Notebook.parse(path, raw).cells}


def as_python(source: str) -> str:
    """A cell's source as the Python the engine sees (IPython syntax as `pass`); '' for another language."""
    python = python_lines(source)
    return "" if python is None else "".join(line + "\n" for line in python.lines)
