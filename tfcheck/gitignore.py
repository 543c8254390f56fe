"""Caches tfcheck creates in a user's project keep themselves out of git.

Like `.ruff_cache/` and `.pytest_cache/`: a `.gitignore` holding `*` inside the folder, written when
tfcheck creates it, so `git add .` never picks up the lint cache or compiled artifacts, whatever the
project's own .gitignore says. Folders the user asks for as output (`tfcheck build --out`) are not
marked: those are meant to be shipped.
"""

from __future__ import annotations

from pathlib import Path


def mark_ignored(folder: Path, what: str) -> None:
    """Write `folder/.gitignore` (`*`) unless it exists; a folder that cannot be written is left as is."""
    marker = Path(folder) / ".gitignore"
    if marker.exists():
        return
    try:
        marker.write_text(f"# Created by tfcheck: {what}.\n*\n", encoding="utf-8")
    except OSError:
        pass
