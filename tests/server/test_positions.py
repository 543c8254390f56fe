"""Positions between findings (1-based lines, code point columns) and the protocol (0-based lines, the
client's units), lines as the protocol splits them, and fix all's line edits."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pygls.workspace import PositionCodec

from tests.server.conftest import apply_text_edits
from tfcheck.server.actions import line_edits
from tfcheck.server.diagnostics import Place, Positions
from tfcheck.server.documents import OpenDocument

UTF16 = PositionCodec(types.PositionEncodingKind.Utf16)
UTF8 = PositionCodec(types.PositionEncodingKind.Utf8)


def test_columns_count_in_the_clients_units() -> None:
    text = "s = '😀é'; print(s)\n"
    column = text.index("print") + 1  # code points, as findings count
    assert Positions(text, UTF16).position(1, column) == types.Position(0, column - 1 + 1)  # 😀: two UTF-16 units
    assert Positions(text, UTF8).position(1, column) == types.Position(0, column - 1 + 3 + 1)  # 😀 4 bytes, é 2


def test_lines_break_where_the_protocol_breaks_them_not_at_form_feeds() -> None:
    text = "a = 1\f\r\nb = 2\rc = 3\nd"
    positions = Positions(text, UTF16)
    assert positions.position(4, 1) == types.Position(3, 0)
    assert positions.position(2, 3) == types.Position(1, 2)
    assert positions.end() == types.Position(3, 1)
    assert positions.position(99, 99) == positions.end()  # clamped into the text


@pytest.mark.parametrize(("old", "new"), [
    ("a\nb\nc\n", "a\nB\nc\n"),
    ("a\nb\nc", "a\nb\nC"),
    ("a\r\nb\r\n", "a\r\nx\r\ny\r\nb\r\n"),
    ("a\nb\n", ""),
    ("", "new\n"),
])
def test_line_edits_turn_the_old_text_into_the_new(old: str, new: str) -> None:
    place = Place.of(OpenDocument("file:///t.py", Path("/t.py"), 1, old), None, UTF16)
    assert apply_text_edits(old, line_edits(place, new)) == new
