"""Incremental builds: return a cached artifact without starting TensorFlow when nothing changed.

The cache key (`artifact.cache_key`) hashes the frozen graph, so computing it means importing
TensorFlow and the user's module and tracing: seconds per function, paid on every build. The fast
key avoids that. While tracing, the child records what the import and the trace read besides the
installed packages (`ReadRecorder`, a `TraceInputs`):

- files: every file opened for reading from Python (the `open` audit event, which `open`,
  `io.open_code`, `os.open` and so `numpy.load` raise), every file opened by any code, native
  included (HDF5, TensorFlow's file system), in the project's folders (`compiler/cache/opens.py`), and
  the `__file__` of every module imported from outside the installed trees (a module loaded from
  its `.pyc` opens no source), each with its SHA-256;
- folder listings (`os.listdir`, `os.scandir`, and so `glob` and `os.walk`), as a hash of the
  sorted names;
- environment variables: every one read through `os.environ` (and so `os.getenv`), with the value
  the child started with, those its fork server's imports read included; all of them when the code iterated the environment; and, since
  TensorFlow's C++ reads its variables with `getenv`, which no Python hook sees, every variable
  whose name starts with one of `environment.NATIVE_PREFIXES`;
- the version of every installed distribution a module was imported from (TensorFlow, Keras,
  NumPy, ...).

The main process stores that, with the trace's result, as the cache's trace record of `identity`
(`ArtifactCache.keep_trace_record`: `<cache>/.fastkeys/<identity>`),
where `identity` hashes the request (module, function, config shapes, target, compile options,
tfcheck, TVM and compiler-source versions, Python). On the next build, `recall` re-hashes those
files, re-reads those variables and versions and, when everything matches and every artifact the
trace named is present and intact, returns the stored result; anything else falls back to the
full trace, so a change can cost a trace but never return a stale artifact.

What the record cannot see (docs/build.md, "Incremental builds"): files read by native code
outside the project's folders, and environment variables read by native code outside
`environment.NATIVE_PREFIXES` (`compiler/process/environment.py`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import site
import sys
import sysconfig
import tempfile
import time
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from tfcheck.compiler.cache.artifacts import ArtifactCache
from tfcheck.compiler.process.environment import ALL, PRELOAD_READS, agrees, environment_record, record_reads
from tfcheck.compiler.process.messages import ContractError, TraceInputs, TraceRequest, TraceResult, from_message, to_message
from tfcheck.compiler.cache.opens import FolderWatch
from tfcheck.runtime.bundled import distribution_version
from tfcheck.runtime.digest import file_sha256
from tfcheck.runtime.paths import UnsafePathError

# Bump when what a record holds, or how it is compared, changes: older records then never match.
FASTKEY_VERSION = 1
_SYSTEM_TREES = ("/proc/", "/sys/", "/dev/")


# --- the tracing child ---------------------------------------------------------------------------


class ReadRecorder:
    """Records, from `start` on, what this process reads: files and directory listings through
    an audit hook, environment variables through `os.environ`."""

    def __init__(self, watched: list[Path], ignored: list[Path]) -> None:
        self._watched = watched
        self._watch = FolderWatch()
        self._ignored = [str(path.resolve()) + os.sep for path in ignored]
        self._files: set[str] = set()
        self._listings: set[str] = set()
        self._variables: set[str] = set()
        self._environment = dict(os.environ)
        self._started = time.time()
        self._temporary = str(Path(tempfile.gettempdir()).resolve()) + os.sep
        self._older_temporary: set[str] = set()  # files in the temporary folder made before the trace

    def start(self) -> None:
        """Install the hooks; they cannot be removed, so a recorder lives as long as its process.
        The folder watch first: listing the folders to watch is not the user's code listing them."""
        self._watch.start(self._watched, lambda folder: not self._project_path(folder))
        sys.addaudithook(self._on_event)
        self._variables |= PRELOAD_READS
        record_reads(self._variables)

    def _on_event(self, event: str, args: tuple[Any, ...]) -> None:
        # An exception here would surface in the user's `open`: never let one out.
        try:
            if event == "open" and _reads(args[1], args[2]) and not isinstance(args[0], int):
                path = os.path.abspath(os.fsdecode(args[0]))
                self._files.add(path)
                if path.startswith(self._temporary) and not self._changed_since_start(path):
                    self._older_temporary.add(path)
            elif event in ("os.listdir", "os.scandir") and not isinstance(args[0], int):
                self._listings.add(os.path.abspath(os.fsdecode(args[0] if args[0] is not None else ".")))
        except Exception:  # noqa: BLE001 - a path we cannot decode is one we cannot record
            self._files.add(ALL)

    def inputs(self) -> TraceInputs:
        """What was read so far, hashed now."""
        modules, distributions = _imported_modules()
        native = self._watch.opened()
        read = self._files | modules | (native or set())
        files = sorted(path for path in read if self._project_path(path) and not os.path.isdir(path))
        return TraceInputs(
            files={path: _file_digest(path) for path in files},
            listings={path: listing_digest(path) for path in sorted(self._listings) if self._project_path(path)},
            environment=environment_record(self._environment, self._variables),
            distributions=distributions,
            # A file written since the trace began may have been read before the write: its hash
            # now would vouch for content the trace never saw.
            complete=(native is not None and ALL not in self._files
                      and not any(self._changed_since_start(path) for path in files)),
        )

    def _changed_since_start(self, path: str) -> bool:
        """Written since the recorder started (and so, for a missing file, not known to be older)."""
        try:
            return os.stat(path).st_mtime >= self._started
        except OSError:
            return True

    def _project_path(self, path: str) -> bool:
        """Whether `path` is the user's (hashed), not an installed package's (versioned), the
        build's own (work folder, cache) or the system's (/proc)."""
        if path == ALL or path.startswith(_SYSTEM_TREES) or f"{os.sep}__pycache__{os.sep}" in path:
            return False
        if any(path.startswith(prefix) for prefix in self._ignored) or self._made_here(path):
            return False
        return _installed_tree(path) is None

    def _made_here(self, path: str) -> bool:
        """A temporary file this build wrote (autograph's generated modules): it is derived from
        what the build read, and has a new random name in every process. One that was there
        before the trace (when it was opened, or now) is the user's, and recorded."""
        return (path.startswith(self._temporary) and path not in self._older_temporary
                and self._changed_since_start(path))


def _reads(mode: Any, flags: Any) -> bool:
    """Whether an `open` audit event opens for reading (`mode` for `open`, `flags` for `os.open`)."""
    if isinstance(mode, str):
        return "r" in mode or "+" in mode
    return isinstance(flags, int) and flags & os.O_ACCMODE != os.O_WRONLY


@lru_cache(maxsize=1)
def _installed_trees() -> tuple[str, ...]:
    """Folders of the interpreter and installed packages: their files are covered by versions."""
    paths = sysconfig.get_paths()
    trees = {paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    trees.update((sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, site.getusersitepackages()))
    trees.update(site.getsitepackages())
    # site-packages chained in through a .pth file (a virtual environment built on another)
    trees.update(entry for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages"))
    return tuple(sorted({folder + os.sep for tree in trees for folder in (os.path.abspath(tree), str(Path(tree).resolve()))}))


def _installed_tree(path: str) -> str | None:
    inside = path + os.sep
    return next((tree for tree in _installed_trees() if inside.startswith(tree)), None)


def _imported_modules() -> tuple[set[str], dict[str, str]]:
    """The files of the modules imported from outside the installed trees, and the version of each
    distribution that a module imported from inside them belongs to."""
    owners = importlib.metadata.packages_distributions()
    files: set[str] = set()
    owning: set[str] = set()
    for name, module in list(sys.modules.items()):
        location = getattr(module, "__file__", None)
        if not isinstance(location, str):
            continue
        path = os.path.abspath(location)
        if _installed_tree(path) is None:
            files.add(path)
        owning.update(owners.get(name.partition(".")[0], ()))
    # One version lookup a distribution, not one a module: TensorFlow alone has ~3,000 modules, and
    # each lookup scans sys.path's metadata (3 ms): 10 s of a small function's trace.
    return files, {distribution: distribution_version(distribution) or "?" for distribution in sorted(owning)}


def _file_digest(path: str) -> str | None:
    """SHA-256 of a file; None when it is gone (a temporary file, read and deleted)."""
    try:
        return file_sha256(Path(path))
    except (FileNotFoundError, NotADirectoryError):
        return None


def listing_digest(path: str) -> str | None:
    """SHA-256 of a folder's sorted entry names, without `__pycache__` and hidden names (`.tfcheck`,
    `.git`: tools' folders, which the build itself creates); None when the folder is gone."""
    try:
        names = sorted(name for name in os.listdir(path) if not name.startswith(".") and name != "__pycache__")
    except (FileNotFoundError, NotADirectoryError):
        return None
    return hashlib.sha256("\0".join(names).encode("utf-8", "surrogateescape")).hexdigest()


def python_version() -> str:
    return f"{sys.implementation.cache_tag} {sys.version}"


# --- the main process ----------------------------------------------------------------------------


def identity(request: TraceRequest) -> str:
    """What a trace depends on besides what it reads: the function, its config shapes and dims
    (and whether the trace is the per-shape fallback of a symbolic build), target,
    compile options and tool versions (not the run's work or cache folders)."""
    parts = {
        "fastkey_version": FASTKEY_VERSION,
        "root": request.root,
        "module": request.module,
        "qualname": request.qualname,
        "config_shapes": request.config_shapes,
        "config_dims": request.config_dims,
        "symbolic": request.symbolic,
        "weights": request.weights,
        "key": dataclasses.asdict(request.key),
        "python": python_version(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def remember(cache: ArtifactCache, request: TraceRequest, traced: TraceResult) -> None:
    """Store the trace's result under the request's identity, to be recalled while what it read
    is unchanged (not when the child could not record everything it read)."""
    if traced.inputs is None or not traced.inputs.complete:
        return
    cached = [dataclasses.replace(variant, cached=True) for variant in traced.variants]
    cache.keep_trace_record(identity(request), json.dumps(to_message(dataclasses.replace(traced, variants=cached))))


def recall(cache: ArtifactCache, request: TraceRequest, environment: Mapping[str, str] = os.environ) -> TraceResult | None:
    """The stored result of this request's trace when nothing it read has changed and its
    artifacts are intact; None otherwise (and for an unreadable or foreign record)."""
    text = cache.trace_record(identity(request))
    if text is None:
        return None
    try:
        traced = from_message(TraceResult, json.loads(text))
        problems = [cache.entry_problem(variant.key) for variant in traced.variants]
    except (ValueError, ContractError, UnsafePathError, TypeError, AttributeError):
        return None
    if traced.inputs is None or changed(traced.inputs, environment) is not None:
        return None
    if any(problem is not None for problem in problems):
        return None
    return traced


def changed(inputs: TraceInputs, environment: Mapping[str, str]) -> str | None:
    """The first recorded input that differs now (for messages and tests); None when none does."""
    for distribution, version in inputs.distributions.items():
        if distribution_version(distribution) != version:
            return f"distribution {distribution}"
    if not agrees(environment, inputs.environment):
        return "environment"
    for path, digest in inputs.files.items():
        if _file_digest(path) != digest:
            return path
    for path, digest in inputs.listings.items():
        if listing_digest(path) != digest:
            return path
    return None
