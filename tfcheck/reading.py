"""Reading a file to lint without ever hanging the run: regular files only, opened non-blocking."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from tfcheck.engine.source import ParseFailure


def read_file(path: Path, display: str) -> tuple[bytes, os.stat_result]:
    """A file's bytes and the stat of what was read. Anything but a readable regular file is a ParseFailure.

    Opened non-blocking and checked with fstat before reading, so a FIFO or a device named `.py` is
    reported instead of hanging the run.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ParseFailure(display, f"cannot read file: {_open_error(path, exc)}") from None
    with open(descriptor, "rb", closefd=True) as stream:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ParseFailure(display, "cannot read file: not a regular file")
        try:
            return stream.read(), info
        except OSError as exc:
            raise ParseFailure(display, f"cannot read file: {exc.strerror or exc}") from None


def _open_error(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return "broken symbolic link"
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    return exc.strerror or str(exc)
