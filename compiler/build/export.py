"""`tfcheck build --out`: artifacts copied out of the cache for deployment, with their TVM runtime.

`export_artifact` copies one artifact to `<out>/<name>/`; `runtime_record` goes into every
manifest and names the TVM runtime the artifact was built against; `bundle_runtime` copies the recorded libraries from the
installed apache-tvm and apache-tvm-ffi wheels into `<out>/tvm-runtime/<tag>/` once per `--out`
folder (7.0 MB, libtvm_ffi.so included), so that the folder runs with
`pip install tfcheck[runtime]` (NumPy alone) instead of the 450 MB and 12 MB wheels. See tfcheck/runtime/bundled.py for how the runtime finds and checks them.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from tfcheck.atomic import copy_atomic
from tfcheck.runtime.bundled import (FFI_DISTRIBUTION, RUNTIME_DIR, TVM_DISTRIBUTION,
                                     distribution_version, runtime_tag, sha256_of, wheel_libraries,
                                     wheel_library)
from tfcheck.runtime.manifest import TensorSpec
from tfcheck.runtime.paths import check_name, remove_tree


def runtime_record(device: str) -> dict[str, Any]:
    """The manifest's `runtime`: tag, exact TVM and tvm-ffi versions, and the SHA-256 of each
    runtime library an artifact for `device` loads (libtvm_ffi.so included)."""
    libraries = {path.name: sha256_of(path) for path in wheel_libraries(device)}
    tvm_version = str(distribution_version(TVM_DISTRIBUTION))
    return {"tag": runtime_tag(tvm_version, libraries), "tvm": tvm_version,
            "tvm_ffi": distribution_version(FFI_DISTRIBUTION), "libraries": libraries}


def bundle_runtime(record: dict[str, Any], out_dir: Path) -> str | None:
    """Copy the runtime libraries of a manifest's `runtime` record into `out_dir/tvm-runtime/<tag>/`
    (each file atomically, skipping the ones already there intact); why it could not, or None."""
    folder = out_dir / RUNTIME_DIR / record["tag"]
    folder.mkdir(parents=True, exist_ok=True)
    for name, sha in record["libraries"].items():
        target = folder / name
        if target.is_file() and sha256_of(target) == sha:
            continue
        source = wheel_library(name)
        if source is None or not source.is_file() or sha256_of(source) != sha:
            return (f"cannot bundle {name}: the installed apache-tvm "
                    f"({distribution_version(TVM_DISTRIBUTION) or 'none'}) and apache-tvm-ffi "
                    f"({distribution_version(FFI_DISTRIBUTION) or 'none'}) are not the build the "
                    f"artifact recorded ({record['tvm']}, {record['tvm_ffi']}); rebuild it")
        copy_atomic(source, target)
    return None


def shape_tag(inputs: list[TensorSpec]) -> str:
    """`1x224x224x3` (inputs joined by `_`), to tell apart the artifacts of one function."""
    return "_".join("x".join(str(d) for d in spec.shape) or "scalar" for spec in inputs)


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
