"""SHA-256 of a file, read in blocks: how the build records and the runtime checks a library.

A leaf module (standard library only), so that every part of the runtime can use it without an
import circle.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

