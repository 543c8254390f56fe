"""The TVM runtime libraries an artifact was built against: found, SHA-256-checked, opened once.

`tfcheck build` records in each manifest the runtime it compiled against (`runtime`: a tag, the
TVM and tvm-ffi versions, and the SHA-256 of each runtime library the artifact needs), and
`--out DIR` copies those libraries once into `DIR/tvm-runtime/<tag>/`, shared by the artifacts
of the folder. A production install then needs `apache-tvm-ffi` and NumPy only, not the 450 MB
`apache-tvm` wheel, whose compiler library alone is 260 MB.

Where the libraries come from, in order:

1. the installed `apache-tvm` wheel, when its version and its libraries' bytes are exactly the
   recorded ones: on a build machine this is the file `import tvm` also opens, so a process that
   uses both never holds two copies of the runtime (its global functions would clash);
2. `<artifact folder>/../tvm-runtime/<tag>/`, the bundled copies of an exported folder.

The manifest names no path: the tag must match `_TAG` (no `/`, no `..`), the library names must
be ones this module knows, and every resolved path must lie inside its folder. The bytes are
checked against the recorded SHA-256 before anything is opened. The runtime is process-wide
(`RTLD_GLOBAL`), so an artifact whose runtime differs from the one already open is refused.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import importlib.util
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcheck.runtime.digest import file_sha256
from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.manifest import Manifest

RUNTIME_DIR = "tvm-runtime"  # not an identifier, so no exported function's folder can be named so
CORE_LIBRARIES = ("libtvm_runtime.so", "libtvm_runtime_extra.so")  # extra: sort, topk, random
CUDA_LIBRARIES = ("libtvm_runtime_cuda.so",)
TVM_DISTRIBUTION = "apache-tvm"
FFI_DISTRIBUTION = "apache-tvm-ffi"
_TAG = re.compile(r"tvm-[0-9A-Za-z]+(?:[.+-][0-9A-Za-z]+){0,15}")
_SHA256 = re.compile(r"[0-9a-f]{64}")

_lock = threading.Lock()
_opened: dict[str, str] = {}  # library name -> SHA-256 of the copy open in this process


@dataclass(frozen=True)
class Runtime:
    """The `runtime` record of a manifest, validated."""

    tag: str
    tvm: str
    tvm_ffi: str
    libraries: tuple[tuple[str, str], ...]  # (name, SHA-256), in loading order


def libraries_for(device: str) -> tuple[str, ...]:
    """The runtime libraries an artifact for `device` needs, in loading order."""
    return CORE_LIBRARIES + (CUDA_LIBRARIES if device == "cuda" else ())


def runtime_tag(tvm_version: str, runtime_sha256: str) -> str:
    """`tvm-0.27.0.post1-<12 hex>`: the version, and the runtime's bytes for builds that share one."""
    return f"tvm-{tvm_version}-{runtime_sha256[:12]}"


def wheel_library_dir() -> Path | None:
    """`tvm/lib` of the installed apache-tvm wheel, found without importing `tvm` (a second)."""
    spec = importlib.util.find_spec("tvm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


def wheel_libraries(device: str) -> tuple[Path, ...]:
    """The installed apache-tvm wheel's runtime libraries for `device`, in loading order: what a
    build records and verifies its artifacts with (ArtifactError when the wheel is missing)."""
    lib_dir = wheel_library_dir()
    if lib_dir is None:
        raise ArtifactError("apache-tvm is not installed: `pip install tfcheck[build]`")
    return tuple(lib_dir / name for name in libraries_for(device))


def distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def read_runtime(manifest: Manifest) -> Runtime:
    """The manifest's `runtime` record; ArtifactError when it is missing or malformed."""
    where = f"{manifest.folder}/manifest.json"
    record = manifest.runtime
    if not isinstance(record, dict):
        raise ArtifactError(f"{where}: no 'runtime' record (built by an older tfcheck)")
    tag, libraries = record.get("tag"), record.get("libraries")
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        raise ArtifactError(f"{where}: runtime tag {tag!r} is not of the form tvm-<version>-<hex>")
    if not all(isinstance(record.get(key), str) for key in ("tvm", "tvm_ffi")):
        raise ArtifactError(f"{where}: the runtime record needs 'tvm' and 'tvm_ffi' versions")
    needed = libraries_for(manifest.device)
    if not isinstance(libraries, dict) or sorted(libraries) != sorted(needed) or not all(
            isinstance(sha, str) and _SHA256.fullmatch(sha) for sha in libraries.values()):
        raise ArtifactError(f"{where}: runtime libraries must be exactly {', '.join(needed)}, "
                            "each with a SHA-256")
    return Runtime(tag, record["tvm"], record["tvm_ffi"],
                   tuple((name, libraries[name]) for name in needed))


def problems(manifest: Manifest) -> list[str]:
    """Why this process cannot open the artifact's runtime; empty when it can."""
    try:
        locate(manifest)
    except ArtifactError as error:
        return [str(error)]
    return []


def locate(manifest: Manifest) -> tuple[Path, ...]:
    """The verified runtime libraries for this artifact, in loading order (see the module doc)."""
    runtime = read_runtime(manifest)
    installed_ffi = distribution_version(FFI_DISTRIBUTION)
    if installed_ffi != runtime.tvm_ffi:
        raise ArtifactError(f"built with apache-tvm-ffi {runtime.tvm_ffi}, installed: "
                            f"{installed_ffi or 'none'} (`pip install apache-tvm-ffi=={runtime.tvm_ffi}`)")
    _check_open_runtime(runtime)
    wheel = _from_wheel(runtime)
    if wheel is not None:
        return wheel
    if "tvm" in sys.modules:
        raise ArtifactError(f"this process imported apache-tvm {distribution_version(TVM_DISTRIBUTION)}, "
                            f"whose runtime is not the one the artifact was built with (TVM {runtime.tvm})")
    return bundled_libraries(manifest.folder, runtime)


def _check_open_runtime(runtime: Runtime) -> None:
    """Refuse a runtime that differs from a library of the same name already open here."""
    for name, sha in runtime.libraries:
        if _opened.get(name, sha) != sha:
            raise ArtifactError(f"this process already runs another build of {name}; the artifact "
                                f"needs TVM runtime {runtime.tag}")


def _from_wheel(runtime: Runtime) -> tuple[Path, ...] | None:
    """The installed wheel's libraries when they are exactly the recorded ones, else None."""
    lib_dir = wheel_library_dir()
    if lib_dir is None or distribution_version(TVM_DISTRIBUTION) != runtime.tvm:
        return None
    paths = tuple(lib_dir / name for name, _ in runtime.libraries)
    if all(path.is_file() and sha256_of(path) == sha for path, (_, sha) in zip(paths, runtime.libraries)):
        return paths
    return None


def bundled_libraries(artifact_folder: Path, runtime: Runtime) -> tuple[Path, ...]:
    """`<export root>/tvm-runtime/<tag>/<name>`, each inside that folder and matching its SHA-256."""
    folder = artifact_folder.resolve().parent / RUNTIME_DIR / runtime.tag
    if not folder.is_dir():
        raise ArtifactError(f"no TVM runtime: {folder} does not exist (export with `tfcheck build "
                            f"--out`) and apache-tvm {runtime.tvm} is not installed")
    resolved = folder.resolve()
    paths = []
    for name, sha in runtime.libraries:
        path = (resolved / name).resolve()
        if path.parent != resolved:
            raise ArtifactError(f"{folder / name}: points outside {folder}")
        if not path.is_file():
            raise ArtifactError(f"{folder / name}: missing from the bundled TVM runtime")
        actual = sha256_of(path)
        if actual != sha:
            raise ArtifactError(f"{path}: SHA-256 {actual} does not match the manifest's {sha}: "
                                "the bundled TVM runtime was modified or corrupted")
        paths.append(path)
    return tuple(paths)


def open_runtime(paths: tuple[Path, ...]) -> Any:
    """Import tvm_ffi and open the runtime libraries not open yet (RTLD_GLOBAL: the artifacts'
    VM loader resolves its symbols there); return the `tvm_ffi` module."""
    import tvm_ffi  # loads libtvm_ffi.so, which libtvm_runtime.so needs by its soname

    with _lock:
        for path in paths:
            if path.name not in _opened:
                try:
                    ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
                except OSError as error:  # libcudart or libcuda missing, a foreign architecture
                    raise ArtifactError(f"{path}: cannot open the TVM runtime: {error}") from None
                _opened[path.name] = sha256_of(path)
    return tvm_ffi


def sha256_of(path: Path) -> str:
    """SHA-256 of a runtime library, hashed again only when its size or mtime changed (they are a
    few MB each, and every artifact of a folder shares them)."""
    stat = path.stat()
    return _sha256(path, stat.st_size, stat.st_mtime_ns)


@functools.cache
def _sha256(path: Path, _size: int, _mtime_ns: int) -> str:
    return file_sha256(path)
