"""Files that several processes share: whole-file replacement and advisory locks.

The artifact cache (its manifests and `index.json`), the tuning databases and the lint cache are
read and written by concurrent builds and checks. A writer goes through a temporary file in the
same folder and `os.replace`, so a reader sees the old file or the new one, never half of one; a
read-modify-write holds `locked` on a lock file beside the data.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

# mkstemp creates files readable by their owner only; these are shared caches.
_SHARED_MODE = 0o644


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace `path` with `data` in one rename (the temporary file is removed on failure)."""
    with _replacing(path) as temporary:
        Path(temporary).write_bytes(data.encode("utf-8") if isinstance(data, str) else data)


def copy_atomic(source: Path, path: Path) -> None:
    """Replace `path` with a copy of `source` in one rename."""
    with _replacing(path) as temporary:
        shutil.copyfile(source, temporary)


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[str]:
    """A temporary file beside `path` to fill; renamed over `path` when the block succeeds."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(handle)
    try:
        yield temporary
        os.chmod(temporary, _SHARED_MODE)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def locked(lock_file: Path, *, exclusive: bool = True) -> Iterator[None]:
    """Hold an advisory lock on `lock_file` (created if missing): exclusive to change the data it
    guards, shared to read it."""
    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
