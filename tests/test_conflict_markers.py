"""No merge left its conflict markers in a tracked file (one did, in docs/schedules.md, unnoticed
because nothing reads that file as code)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKERS = ("<" * 7 + " ", ">" * 7 + " ")


def test_no_tracked_file_holds_conflict_markers() -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    found = []
    for name in filter(None, tracked.decode().split("\0")):
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".cfg", ".yaml", ".yml", ".txt", ".ipynb"} or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if line.startswith(MARKERS):
                found.append(f"{name}:{number}")
    assert not found, "conflict markers: " + ", ".join(found)
