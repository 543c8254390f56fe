"""The TVM runtime libraries an artifact was built against: found, SHA-256-checked, opened once.

`tfcheck build` records in each manifest the runtime it compiled against (`runtime`: a tag, the
TVM and tvm-ffi versions, and the SHA-256 of each runtime library the artifact needs, `libtvm_ffi.so`
included), and `--out DIR` copies those libraries once into `DIR/tvm-runtime/<tag>/`, shared by the
artifacts of the folder. A production install then needs NumPy only: neither the 450 MB
`apache-tvm` wheel, whose compiler library alone is 260 MB, nor the 12 MB `apache-tvm-ffi` wheel,
whose C library `ffi.py` drives directly.

Where the libraries come from, in order:

1. the installed `apache-tvm` and `apache-tvm-ffi` wheels, when their versions and their libraries'
   bytes are exactly the recorded ones: on a build machine these are the files `import tvm` also
   opens, so a process that uses both never holds two copies of the runtime (its global functions
   would clash);
2. `<artifact folder>/../tvm-runtime/<tag>/`, the bundled copies of an exported folder.

A library of the same name already mapped into the process (by `import tvm_ffi`, `import tvm` or an
earlier artifact) is used instead when its bytes are the recorded ones, and refused otherwise:
opening a second copy from another path would load it twice.

The manifest names no path: the tag must match `RUNTIME_TAG` (no `/`, no `..`), the library names must
be ones this module knows, and every resolved path must lie inside its folder. The bytes are
checked against the recorded SHA-256 before anything is opened. The runtime is process-wide
(`RTLD_GLOBAL`), so an artifact whose runtime differs from the one already open is refused.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from tfcheck.runtime.digest import file_sha256
from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.ffi import FFI
from tfcheck.runtime.manifest import Manifest

RUNTIME_DIR = "tvm-runtime"  # not an identifier, so no exported function's folder can be named so
FFI_LIBRARY = "libtvm_ffi.so"  # from apache-tvm-ffi; the others from apache-tvm
FFI_WHEEL_PATH = "tvm_ffi/lib/libtvm_ffi.so"  # in apache-tvm-ffi's RECORD
CORE_LIBRARIES = (FFI_LIBRARY, "libtvm_runtime.so", "libtvm_runtime_extra.so")  # extra: sort, topk, random
CUDA_LIBRARIES = ("libtvm_runtime_cuda.so",)
TVM_DISTRIBUTION = "apache-tvm"
FFI_DISTRIBUTION = "apache-tvm-ffi"
RUNTIME_TAG = re.compile(r"tvm-[0-9A-Za-z]+(?:[.+-][0-9A-Za-z]+){0,15}")
_SHA256 = re.compile(r"[0-9a-f]{64}")

_lock = threading.Lock()
_ffi: dict[Path, FFI] = {}  # the binding of the libtvm_ffi.so open in this process


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


def runtime_tag(tvm_version: str, libraries: dict[str, str]) -> str:
    """`tvm-0.27.0.post1-<12 hex>`: the version, and the bytes of libtvm_ffi.so and
    libtvm_runtime.so (their SHA-256s hashed), for builds that share a runtime: CPU and CUDA
    artifacts of one build share a folder, builds with another libtvm_ffi.so do not."""
    shared = libraries[FFI_LIBRARY] + libraries["libtvm_runtime.so"]
    return f"tvm-{tvm_version}-{hashlib.sha256(shared.encode()).hexdigest()[:12]}"


def wheel_library_dir() -> Path | None:
    """`tvm/lib` of the installed apache-tvm wheel, found without importing `tvm` (a second)."""
    spec = importlib.util.find_spec("tvm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


def wheel_library(name: str) -> Path | None:
    """The runtime library `name` of the installed wheels: libtvm_ffi.so from apache-tvm-ffi (found
    through its RECORD, without importing `tvm_ffi`), the others from apache-tvm's `tvm/lib`."""
    if name != FFI_LIBRARY:
        lib_dir = wheel_library_dir()
        return None if lib_dir is None else lib_dir / name
    import importlib.metadata  # 15-60 ms: only where a wheel may be installed

    try:
        files = importlib.metadata.distribution(FFI_DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    return next((Path(str(file.locate())) for file in files if str(file) == FFI_WHEEL_PATH), None)


def wheel_libraries(device: str) -> tuple[Path, ...]:
    """The installed wheels' runtime libraries for `device`, in loading order: what a build
    records and verifies its artifacts with (ArtifactError when a wheel is missing)."""
    paths = tuple(wheel_library(name) for name in libraries_for(device))
    if any(path is None for path in paths):
        raise ArtifactError("apache-tvm or apache-tvm-ffi is not installed: `pip install tfcheck[build]`")
    return tuple(path for path in paths if path is not None)


def distribution_version(name: str) -> str | None:
    import importlib.metadata  # 15-60 ms: not on the way of a production install (see _from_wheel)

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
    if not isinstance(tag, str) or not RUNTIME_TAG.fullmatch(tag):
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
    mapped = _open_copies(runtime)
    paths = _from_wheel(runtime)
    if paths is None:
        if "tvm" in sys.modules:
            raise ArtifactError(
                f"this process imported apache-tvm {distribution_version(TVM_DISTRIBUTION)} with "
                f"apache-tvm-ffi {distribution_version(FFI_DISTRIBUTION)}, whose runtime is not the "
                f"one the artifact was built with (TVM {runtime.tvm}, tvm-ffi {runtime.tvm_ffi})")
        paths = bundled_libraries(manifest.folder, runtime)
    return tuple(mapped.get(path.name, path) for path in paths)


def _open_copies(runtime: Runtime) -> dict[str, Path]:
    """The runtime's libraries already mapped into this process, by name; ArtifactError when one
    is another build than the recorded one."""
    mapped = {}
    for name, sha in runtime.libraries:
        path = mapped_library(name)
        if path is None:
            continue
        if sha256_of(path) != sha:
            raise ArtifactError(f"this process already runs another build of {name}; the artifact "
                                f"needs TVM runtime {runtime.tag} (open: {path})")
        mapped[name] = path
    return mapped


def mapped_library(name: str) -> Path | None:
    """The file named `name` mapped into this process (`/proc/self/maps`), if any."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].endswith("/" + name):
            return Path(fields[5])
    return None


def _from_wheel(runtime: Runtime) -> tuple[Path, ...] | None:
    """The installed wheels' libraries when they are exactly the recorded ones, else None (at
    once where apache-tvm is not installed: a production install never reads package metadata)."""
    if wheel_library_dir() is None or (distribution_version(TVM_DISTRIBUTION), distribution_version(FFI_DISTRIBUTION)) != (
            runtime.tvm, runtime.tvm_ffi):
        return None
    paths = tuple(wheel_library(name) for name, _ in runtime.libraries)
    if all(path is not None and path.is_file() and sha256_of(path) == sha
           for path, (_, sha) in zip(paths, runtime.libraries)):
        return tuple(path for path in paths if path is not None)
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


def open_runtime(paths: tuple[Path, ...]) -> FFI:
    """Open the runtime libraries (`locate`'s, libtvm_ffi.so first) with RTLD_GLOBAL, where the
    artifacts' VM loader resolves its symbols; return the binding of that libtvm_ffi.so. Opening
    a file that is open already only counts a reference."""
    ffi_path, *others = paths
    with _lock:
        if ffi_path not in _ffi:
            _ffi[ffi_path] = FFI(ffi_path)
        for path in others:
            try:
                ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            except OSError as error:  # libcudart or libcuda missing, a foreign architecture
                raise ArtifactError(f"{path}: cannot open the TVM runtime: {error}") from None
        return _ffi[ffi_path]


def sha256_of(path: Path) -> str:
    """SHA-256 of a runtime library, hashed again only when its size or mtime changed (they are a
    few MB each, and every artifact of a folder shares them)."""
    stat = path.stat()
    return _sha256(path, stat.st_size, stat.st_mtime_ns)


@functools.cache
def _sha256(path: Path, _size: int, _mtime_ns: int) -> str:
    return file_sha256(path)
