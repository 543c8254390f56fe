"""The documents an editor has open, as the linter reads them.

A snapshot (`OpenDocument`) is taken on the server's event loop and handed to the lint thread, so the
linter never sees a document change half-way through a pass. A Python file is its text, encoded the
way the engine decodes files (a PEP 263 coding line is honoured, so columns match). A notebook comes
through LSP's notebook sync as cells; it is given to the engine as the nbformat 4 JSON those cells make,
so tfcheck/notebook.py's model (code cells as one module, IPython syntax skipped, positions per cell)
applies unchanged, and findings come back numbered by cell, as the editor counts them.
"""

from __future__ import annotations

import io
import json
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from tfcheck.notebook import SUFFIX

# The line breaks of the protocol (and of Python): str.splitlines() also breaks at form feeds and
# Unicode separators, which editors do not count as lines.
LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Cell:
    """One cell of an open notebook: its text document, and what the notebook says it is."""

    uri: str
    text: str
    version: int | None
    code: bool  # a code cell (else markup)
    language: str  # the cell document's language id: only `python` code cells are analysed


@dataclass(frozen=True)
class OpenDocument:
    """An open Python file or notebook, as it is in the editor (saved or not).

    `cells` is empty for a Python file. `version` is the document's (the notebook's, for a notebook).
    """

    uri: str
    path: Path
    version: int | None
    text: str = ""
    cells: tuple[Cell, ...] = ()
    notebook: bool = False

    def data(self) -> bytes:
        """The bytes the engine analyses: the file's text in its declared encoding, or the notebook's JSON."""
        if self.notebook:
            return notebook_json(self.cells).encode("utf-8")
        return source_bytes(self.text)

    def where(self, cell: int | None) -> tuple[str, str, int | None]:
        """The document (uri, text, version) a finding's positions count in: the file, or cell `cell` (1-based)."""
        if not self.notebook:
            return self.uri, self.text, self.version
        chosen = self.cells[cell - 1] if cell is not None and 1 <= cell <= len(self.cells) else self._first_code_cell()
        return chosen.uri, chosen.text, chosen.version

    def _first_code_cell(self) -> Cell:
        """Where a finding of the notebook as a whole goes (none expected: the JSON is made here)."""
        return next((cell for cell in self.cells if cell.code), self.cells[0])


def notebook_path(path: Path) -> Path:
    """A notebook's path as the engine needs it: `.ipynb` is how it knows the bytes are a notebook."""
    return path if path.name.lower().endswith(SUFFIX) else path.with_name(path.name + SUFFIX)


def notebook_json(cells: tuple[Cell, ...]) -> str:
    """The nbformat 4 notebook the cells make; each cell's language as VS Code records it in a file."""
    return json.dumps({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {},
        "cells": [{"cell_type": "code" if cell.code else "markdown",
                   "metadata": {"vscode": {"languageId": cell.language}},
                   "source": cell.text} for cell in cells],
    })


def source_bytes(text: str) -> bytes:
    """A file's text as the bytes its coding line (PEP 263) says, UTF-8 without one or when it cannot say.

    The engine decodes what it is given by that line, as Python would, so text encoded otherwise would
    come back as other characters, at other columns.
    """
    data = text.encode("utf-8", errors="surrogatepass")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return text.encode(encoding)
    except (SyntaxError, LookupError, UnicodeEncodeError):
        return data  # the engine reports what is wrong with the declaration or the text
