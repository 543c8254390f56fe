"""Findings as the protocol's diagnostics: positions in the client's units, severity, the rule's code with
a link to its documentation, and the reason a function is graph code as related information.

Findings count 1-based lines and characters (code points); the protocol counts 0-based lines and, by
default, UTF-16 code units (the server and client may agree on UTF-8 or UTF-32 instead: pygls's
`PositionCodec` knows which). Lines are split at the breaks the protocol and Python share (\\r\\n, \\r,
\\n), never at the form feeds and Unicode separators `str.splitlines` also breaks at.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path
from pygls.workspace import PositionCodec, ServerTextPosition

from tfcheck.findings import Edit, Finding, Severity
from tfcheck.rule import documentation_url
from tfcheck.server.documents import LINE_BREAK, OpenDocument

SOURCE = "tfcheck"
SEVERITY = {Severity.ERROR: types.DiagnosticSeverity.Error, Severity.WARNING: types.DiagnosticSeverity.Warning,
            Severity.INFO: types.DiagnosticSeverity.Information}
# What `Rule.finding` appends to a message for a function that is graph code indirectly.
_REASON = re.compile(r"\[`(?P<name>[^`]+)` is graph code: (?P<reason>.*)\]$", re.DOTALL)
# Where a reason points: another file of the project (`(train.py:12)`), or a line of this file or cell.
_OTHER_FILE = re.compile(r"\((?P<path>[^()]+):(?P<line>\d+)\)$")
_THIS_FILE = re.compile(r"\bline (?P<line>\d+)(?: of cell (?P<cell>\d+))?")


class Positions:
    """Converts findings' positions in one text into the client's positions."""

    def __init__(self, text: str, codec: PositionCodec) -> None:
        self.lines = LINE_BREAK.split(text)
        self.codec = codec

    def position(self, line: int, column: int) -> types.Position:
        """A 1-based (line, character column) as a protocol position, clamped into the text."""
        row = min(max(line, 1), len(self.lines)) - 1
        character = min(max(column, 1) - 1, len(self.lines[row]))
        return self.codec.position_to_client_units(self.lines, ServerTextPosition(row, character))

    def end(self) -> types.Position:
        """The end of the text."""
        return self.position(len(self.lines), len(self.lines[-1]) + 1)

    def range(self, line: int, column: int, end_line: int, end_column: int) -> types.Range:
        return types.Range(self.position(line, column), self.position(end_line, end_column))

    def finding_range(self, finding: Finding) -> types.Range:
        return self.range(finding.line, finding.column, finding.end_line, finding.end_column)

    def text_edit(self, edit: Edit) -> types.TextEdit:
        return types.TextEdit(self.range(edit.line, edit.column, edit.end_line, edit.end_column), edit.replacement)


@dataclass(frozen=True)
class Place:
    """Where in an open document a finding is: the text document (a file, or a notebook's cell) and its positions."""

    uri: str
    version: int | None
    text: str
    positions: Positions

    @classmethod
    def of(cls, document: OpenDocument, cell: int | None, codec: PositionCodec) -> Place:
        uri, text, version = document.where(cell)
        return cls(uri, version, text, positions(text, codec))


@lru_cache(maxsize=64)
def positions(text: str, codec: PositionCodec) -> Positions:
    """The positions of a text, split into lines once for all its findings (and the next pass's, if unchanged)."""
    return Positions(text, codec)


def diagnostic(finding: Finding, document: OpenDocument, codec: PositionCodec) -> types.Diagnostic:
    """The diagnostic of one finding (in the text document `Place.of(document, finding.cell)` names)."""
    place = Place.of(document, finding.cell, codec)
    return types.Diagnostic(
        range=place.positions.finding_range(finding),
        message=finding.message,
        severity=SEVERITY[finding.severity],
        code=finding.code,
        code_description=types.CodeDescription(href=documentation_url(finding.code)),
        source=SOURCE,
        related_information=_related(finding, document, place, codec),
    )


def _related(finding: Finding, document: OpenDocument, place: Place,
             codec: PositionCodec) -> list[types.DiagnosticRelatedInformation] | None:
    """Why the function holding the finding is graph code, pointing at the call or decorator that makes it
    so where the reason names one; None for code that is graph code by its own decorator."""
    match = _REASON.search(finding.message)
    if match is None:
        return None
    message = f"`{match['name']}` is graph code: {match['reason']}"
    return [types.DiagnosticRelatedInformation(_reason_location(match["reason"], finding, document, place, codec),
                                               message)]


def _reason_location(reason: str, finding: Finding, document: OpenDocument, place: Place,
                     codec: PositionCodec) -> types.Location:
    """The line a reason names: in another file (by the path the run showed it under: relative to the
    server's folder), in this file or one of its cells; the finding itself when the reason names no line
    it can point at (a line of another notebook counts in the module its cells make)."""
    other = _OTHER_FILE.search(reason)
    if other is not None:
        path = Path(os.path.abspath(other["path"]))
        if path != Path(os.path.abspath(document.path)) and not document.notebook and path.suffix != ".ipynb":
            start = types.Position(int(other["line"]) - 1, 0)
            return types.Location(from_fs_path(str(path)) or path.as_uri(), types.Range(start, start))
    here = _THIS_FILE.search(reason) if other is None else None
    if here is None:
        return types.Location(place.uri, place.positions.finding_range(finding))
    target = Place.of(document, int(here["cell"]), codec) if here["cell"] else place
    start = target.positions.position(int(here["line"]), 1)
    return types.Location(target.uri, types.Range(start, start))
