"""Artifacts and the content-addressed cache (docs/artifact-format.md).

An artifact is a folder `<cache>/<key>/` with `manifest.json` and `lib.so`. Why the design:

- The key hashes everything the compiled code depends on (frozen graph, input specs, target,
  compile options, tool versions), so a lookup can never return code built from something else.
- An entry is built in a private temporary folder inside the cache and renamed into place in one
  `rename`: readers see a complete entry or none, and two builds racing on the same key both end
  with the same complete entry (the loser discards its copy).
- An entry whose manifest is unreadable or whose library no longer matches its SHA-256 is moved
  out of the way (again by rename) and rebuilt, never used.
- `index.json` is only an acceleration structure for listing; it is rewritten under a file lock
  and can always be rebuilt from the manifests.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfcheck.atomic import locked, write_atomic
from tfcheck.compiler.process.messages import CompileOptions, as_json
from tfcheck.compiler.process.target import BuildTarget
from tfcheck.gitignore import mark_ignored
from tfcheck.runtime.bundled import read_runtime
from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.manifest import CACHE_DIR, FORMAT_VERSION, MANIFEST, Manifest, TensorSpec, read_manifest
from tfcheck.runtime.paths import check_name, remove_tree
from tfcheck.runtime.digest import file_sha256

if TYPE_CHECKING:
    from tfcheck.config import Config

INDEX = "index.json"
FAST_KEYS = ".fastkeys"
_TEMP = ".tmp"
_LOCK = ".lock"


def python_sources(root: Path) -> list[Path]:
    """Every Python source file in the folder tree `root`, in a fixed order."""
    return sorted(root.rglob("*.py"))


def sources_digest(root: Path) -> str:
    """A short hash of the Python sources under `root` (each one's path below `root` and its
    contents): it names what generated some code, so that changed code is not mistaken for the
    code it replaced even where no version number moved (a development install). Paths, not bare
    names, since every stage folder has its own `__init__.py`."""
    digest = hashlib.sha256()
    for source in python_sources(root):
        digest.update(source.relative_to(root).as_posix().encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(graph_sha256: str, inputs: list[TensorSpec], target: BuildTarget,
              compile_options: CompileOptions, versions: dict[str, str],
              structures: dict[str, Any] | None = None) -> str:
    """SHA-256 over the format version, frozen graph, input specs, target, options, versions and
    the input and output structures (a dict key renamed in the result leaves the graph as it was,
    but not the artifact's manifest).

    The one place the key is computed: the tracing child, right after freezing (it alone knows
    the graph and the TensorFlow version), which reports it to the parent."""
    parts = {
        "format_version": FORMAT_VERSION,
        "graph_sha256": graph_sha256,
        "inputs": [spec.to_json() for spec in inputs],
        "target": target.canonical,
        "compile_options": as_json(compile_options),
        "versions": versions,
        "structures": structures,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def artifact_cache(flag: Path | None, config: Config) -> ArtifactCache:
    """The artifact cache a command works on, decided here alone for every command that has one
    (`build`, `inspect`, `ls`, `clean`): `--cache-dir`, else the config's `cache-dir`, else
    `.tfcheck/artifacts`."""
    return ArtifactCache(flag or Path(config.build.cache_dir or CACHE_DIR))


class ArtifactCache:
    """A folder of artifacts by key, safe for concurrent builds on one file system, and the one
    owner of its layout: no other module joins a name to the cache's folder.

        <key>/                          an artifact: manifest.json, lib.so (and weights.npz)
        index.json                      the artifacts listed (rewritten under .lock)
        .tmp/                           entries being built, and corrupt ones on their way out
        .fastkeys/<identity>            a trace's result and what it read (`cache/fastkey.py`)
        .fastkeys/host-cpu-<fp>.json    LLVM's name for this CPU and TVM (`build/targets.py`)
        .fastkeys/lifted-failed-<key>   why a build with the weights as inputs failed

    Every name that goes below the folder (a key, an identity, a fingerprint) is checked to be a
    plain name first (`check_name`), so nothing the cache reads or writes lies outside it.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def entry(self, key: str) -> Path:
        """The folder of the artifact `key` (UnsafePathError for a key that is no plain name)."""
        return self.root / check_name(key, "artifact key")

    def entry_problem(self, key: str) -> str | None:
        """Why the entry `key` cannot be used (None when it can; "missing" when there is none)."""
        return entry_problem(self.entry(key))

    def lookup(self, key: str) -> tuple[Manifest | None, str | None]:
        """(manifest, None) for a valid entry; (None, why) when the entry is corrupt, after moving
        it out of the way; (None, None) when there is none."""
        folder = self.entry(key)
        if not folder.exists():
            return None, None
        problem = entry_problem(folder)
        if problem is None:
            return read_manifest(folder), None
        self._discard(folder)
        return None, problem

    def new_staging(self) -> Path:
        """A private folder inside the cache (same file system, so the final rename is atomic)."""
        self.create_root()
        staging = self.root / _TEMP / uuid.uuid4().hex
        staging.mkdir(parents=True)
        return staging

    def commit(self, staging: Path, manifest: Manifest) -> Path:
        """Write the manifest into `staging` and rename it to its key; if another build got there
        first with a valid entry, keep theirs."""
        manifest.write(staging)
        final = self.entry(str(manifest.key))
        try:
            os.rename(staging, final)
        except OSError:
            if entry_problem(final) is not None:
                raise
            shutil.rmtree(staging, ignore_errors=True)
        self._index_add(manifest)
        return final

    def discard_staging(self, staging: Path) -> None:
        shutil.rmtree(staging, ignore_errors=True)

    def artifact_folders(self) -> list[Path]:
        """The folders holding a manifest (in the cache or a `tfcheck build --out` folder, whose
        artifacts are named by function), sorted; none when the folder does not exist."""
        if not self.root.is_dir():
            return []
        return sorted(child for child in self.root.iterdir() if (child / MANIFEST).is_file())

    def clear(self) -> int:
        """Delete every artifact, `index.json` and `.fastkeys/`; how many artifacts there were.
        Only folders holding a manifest are artifacts, so a mistyped cache folder loses nothing
        else; an entry that is a symbolic link loses the link, never what it points to."""
        folders = self.artifact_folders()
        for folder in folders:
            remove_tree(folder)
        (self.root / INDEX).unlink(missing_ok=True)
        remove_tree(self.root / FAST_KEYS)
        return len(folders)

    def trace_record(self, identity: str) -> str | None:
        """The fast key's record of the trace `identity` (`cache/fastkey.py`), or None."""
        return self._record(check_name(identity, "fast key"))

    def keep_trace_record(self, identity: str, text: str) -> None:
        self._keep(check_name(identity, "fast key"), text)

    def host_record(self, fingerprint: str) -> str | None:
        """What LLVM said of the CPU and TVM with this fingerprint (`build/targets.py`), or None."""
        return self._record(_host_record_name(fingerprint))

    def keep_host_record(self, fingerprint: str, text: str) -> None:
        self._keep(_host_record_name(fingerprint), text)

    def lifted_failure(self, key: str) -> str | None:
        """The message of the failed build of `key` with its weights as inputs, or None: its
        frozen build succeeded, so the next trace that computes `key` freezes at once."""
        return self._record(_lifted_failure_name(key))

    def keep_lifted_failure(self, key: str, message: str) -> None:
        self._keep(_lifted_failure_name(key), message)

    def _record(self, name: str) -> str | None:
        try:
            return (self.root / FAST_KEYS / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def _keep(self, name: str, text: str) -> None:
        self.create_root()
        (self.root / FAST_KEYS).mkdir(exist_ok=True)
        write_atomic(self.root / FAST_KEYS / name, text)

    def _discard(self, folder: Path) -> None:
        """Move a corrupt entry aside atomically, then delete it (another build may race us)."""
        trash = self.root / _TEMP / f"corrupt-{uuid.uuid4().hex}"
        trash.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.rename(folder, trash)
        remove_tree(trash)

    def create_root(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        mark_ignored(self.root, "the artifact cache of `tfcheck build`")

    def _index_add(self, manifest: Manifest) -> None:
        """Record the entry in index.json (read-modify-write under the cache's lock)."""
        self.create_root()
        with locked(self.root / _LOCK):
            index_path = self.root / INDEX
            try:
                index = json.loads(index_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                index = {}
            written = manifest.to_json()
            index[written["key"]] = {name: written[name] for name in ("function", "qualname", "device", "inputs", "created")}
            write_atomic(index_path, json.dumps(index, indent=2) + "\n")


def _host_record_name(fingerprint: str) -> str:
    return check_name(f"host-cpu-{fingerprint}.json", "host record")


def _lifted_failure_name(key: str) -> str:
    return f"lifted-failed-{check_name(key, 'artifact key')}"


def entry_problem(folder: Path) -> str | None:
    """Why an artifact folder cannot be used (None when it can)."""
    try:
        manifest = read_manifest(folder)
        library = manifest.library_path
        read_runtime(manifest)  # an older tfcheck recorded fewer runtime libraries: rebuild
    except ArtifactError as error:
        return str(error)
    if not library.is_file():
        return "library file missing"
    if file_sha256(library) != manifest.library_sha256:
        return "library does not match its SHA-256"
    from tfcheck.runtime.weights import checked_weights_path  # NumPy: `tfcheck ls` and `clean` run without it

    try:
        checked_weights_path(manifest)
    except ArtifactError as error:
        return str(error)
    return None
