"""Caches tfcheck creates in a user's project keep themselves out of git.

Like `.ruff_cache/` and `.pytest_cache/`: a `.gitignore` holding `*` inside the folder, written when
tfcheck creates it, so `git add .` never picks up the lint cache or compiled artifacts, whatever the
project's own .gitignore says. Folders the user asks for as output (`tfcheck build --out`) are not
marked: those are meant to be shipped.
"""

from __future__ import annotations

import contextlib
from pathlib import Path


MARKER = ".gitignore"


def _text(what: str) -> str:
    return f"# Created by tfcheck: {what}.\n*\n"


def mark_ignored(folder: Path, what: str) -> None:
    """Write `folder/.gitignore` (`*`) unless it exists; a folder that cannot be written is left as is."""
    marker = Path(folder) / MARKER
    if marker.exists():
        return
    try:
        marker.write_text(_text(what), encoding="utf-8")
    except OSError:
        pass


def remove_marker(folder: Path, what: str) -> None:
    """Delete the marker `mark_ignored(folder, what)` wrote, and nothing else: a `.gitignore` of the
    user's own (other text, or a link) in a folder tfcheck shares stays."""
    marker = Path(folder) / MARKER
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if not marker.is_symlink() and marker.read_text(encoding="utf-8") == _text(what):
            marker.unlink()
