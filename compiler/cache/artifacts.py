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
import datetime
import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from tfcheck.atomic import locked, write_atomic
from tfcheck.compiler.build.targets import canonical_json
from tfcheck.gitignore import mark_ignored
from tfcheck.runtime.bundled import read_runtime
from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.manifest import FORMAT_VERSION, Manifest, read_manifest
from tfcheck.runtime.paths import check_name, remove_tree
from tfcheck.runtime.digest import file_sha256
from tfcheck.runtime.weights import checked_weights_path

INDEX = "index.json"
_TEMP = ".tmp"


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


def cache_key(graph_sha256: str, inputs: list[dict[str, Any]], target: dict[str, Any],
              compile_options: dict[str, Any], versions: dict[str, str],
              structures: dict[str, Any] | None = None) -> str:
    """SHA-256 over the format version, frozen graph, input specs, target, options, versions and
    the input and output structures (a dict key renamed in the result leaves the graph as it was,
    but not the artifact's manifest).

    The one place the key is computed: the tracing child, right after freezing (it alone knows
    the graph and the TensorFlow version), which reports it to the parent."""
    parts = {
        "format_version": FORMAT_VERSION,
        "graph_sha256": graph_sha256,
        "inputs": inputs,
        "target": canonical_json(target),
        "compile_options": compile_options,
        "versions": versions,
        "structures": structures,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class ArtifactCache:
    """A folder of artifacts by key; safe for concurrent builds on one file system."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def entry(self, key: str) -> Path:
        return self.root / key

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
        with locked(self.root / ".lock"):
            index_path = self.root / INDEX
            try:
                index = json.loads(index_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                index = {}
            written = manifest.to_json()
            index[written["key"]] = {name: written[name] for name in ("function", "qualname", "device", "inputs", "created")}
            write_atomic(index_path, json.dumps(index, indent=2) + "\n")


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
    try:
        checked_weights_path(manifest)
    except ArtifactError as error:
        return str(error)
    return None


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def shape_tag(inputs: list[dict[str, Any]]) -> str:
    """`1x224x224x3` (inputs joined by `_`), to tell apart the artifacts of one function."""
    return "_".join("x".join(str(d) for d in spec["shape"]) or "scalar" for spec in inputs)


def export_artifact(folder: Path, out_dir: Path, name: str) -> Path:
    """Copy an artifact to `out_dir/name`, replacing an older export of the same name atomically
    enough for deployment folders: copy beside it, then swap.

    `name` must be a plain name (UnsafePathError otherwise), so that nothing outside `out_dir`
    (resolved: `--out` may be a link) is ever replaced; an older export that is a symbolic link
    is replaced as a link, and whatever it points to is left alone.
    """
    check_name(name, "export name")
    out_dir.mkdir(parents=True, exist_ok=True)
    out_dir = out_dir.resolve()
    destination = out_dir / name
    staging = out_dir / f".{name}.{uuid.uuid4().hex}"
    shutil.copytree(folder, staging)
    if os.path.lexists(destination):
        old = out_dir / f".{name}.old.{uuid.uuid4().hex}"
        os.rename(destination, old)
        remove_tree(old)
    os.rename(staging, destination)
    return destination
