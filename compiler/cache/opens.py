"""Which files in the project folders were opened, by any code, Python or native (Linux inotify).

The fast key's audit hook (`compiler/cache/fastkey.py`) sees what Python opens, but not what native code
opens: HDF5 reading Keras weights through h5py, TensorFlow's own file system reading a SavedModel
or a checkpoint. The kernel sees both: an inotify watch on each folder of the project reports
every file opened in it, by whatever code. Watching is limited to the project's folders (inotify
watches folders, not trees, and each costs kernel memory); when they cannot all be watched, when
the kernel dropped events, or on a system without inotify, `opened` says it cannot tell, and the
caller must assume anything could have been read.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from collections.abc import Callable
from pathlib import Path

_IN_OPEN = 0x00000020
_IN_Q_OVERFLOW = 0x00004000
_IN_ISDIR = 0x40000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then `len` bytes of NUL-padded name
MAX_FOLDERS = 4096  # a project with more folders gets no fast key (the kernel's default is 8192 watches per user)


class FolderWatch:
    """Open events in the folders under some roots, from `start` until `opened` is asked."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._folders: dict[int, str] = {}
        self._complete = False

    def start(self, roots: list[Path], skip: Callable[[str], bool]) -> None:
        """Watch every folder under `roots` for which `skip(path)` is false (nor below it)."""
        libc = _libc()
        if libc is None:
            return
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return
        self._fd = fd
        self._complete = True
        for folder in _folders(roots, skip):
            if len(self._folders) >= MAX_FOLDERS:
                self._complete = False
                return
            watch = libc.inotify_add_watch(fd, os.fsencode(folder), _IN_OPEN)
            if watch < 0:
                self._complete = False
                return
            self._folders[watch] = folder

    def opened(self) -> set[str] | None:
        """The files opened in the watched folders so far; None when that cannot be known."""
        if self._fd is None:
            return None
        files: set[str] = set()
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                break
            for mask, folder, name in self._events(data):
                if mask & _IN_Q_OVERFLOW:
                    self._complete = False
                elif name and not mask & _IN_ISDIR:
                    files.add(os.path.join(folder, name))
        return files if self._complete else None

    def _events(self, data: bytes) -> list[tuple[int, str, str]]:
        events = []
        offset = 0
        while offset < len(data):
            watch, mask, _, length = _EVENT.unpack_from(data, offset)
            offset += _EVENT.size
            name = os.fsdecode(data[offset:offset + length].rstrip(b"\0"))
            offset += length
            events.append((mask, self._folders.get(watch, ""), name))
        return events


def _folders(roots: list[Path], skip: Callable[[str], bool]) -> list[str]:
    """The roots and the folders below them, outermost first, without skipped ones and what they
    hold, hidden folders (`.git`, `.venv`, `.tfcheck`) and `__pycache__`."""
    found: dict[str, None] = {}  # in order
    pending = sorted({os.path.abspath(root) for root in roots})
    while pending and len(found) <= MAX_FOLDERS:
        folder = pending.pop(0)
        if folder in found or skip(folder):
            continue
        found[folder] = None
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            continue
        pending += [entry.path for entry in entries
                    if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
                    and entry.name != "__pycache__"]
    return list(found)


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    return libc if hasattr(libc, "inotify_init1") else None
