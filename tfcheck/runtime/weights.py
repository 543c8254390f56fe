"""An artifact's weights file: the large constants of its `main`, kept beside the library.

Exporting a constant into `lib.so` serializes it into the library's LLVM object, which takes the
compiling process about 5 times the constants' size (docs/build.md, "Memory"). An artifact built
with its weights as inputs therefore keeps its compiled `main`'s large constants (the packed
weights) in `WEIGHTS`, and `main` takes them as parameters after the user's inputs. The runtime
reads them once, when it loads the artifact, after checking the file's size and SHA-256 against
the manifest's `weights` record (docs/artifact-format.md, "Weights file").

The file is an uncompressed NumPy `.npz` whose entries are named by index (`entry`), the same format
as the build's own `weights.npz` between its tracing and compiling children. NumPy only: no
TensorFlow, no TVM.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tfcheck.runtime.digest import file_sha256
from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.target import rebuild_hint

if TYPE_CHECKING:
    from tfcheck.runtime.manifest import Manifest

WEIGHTS = "weights.npz"  # the weights file's name inside an artifact folder


def entry(index: int) -> str:
    """The NumPy name of weight `index` in a weights file (`np.load(...)[entry(i)]`)."""
    return f"weight_{index}"


def read_weights(path: Path, count: int) -> Iterator[np.ndarray]:
    """The `count` weights of `path` in order, read one at a time; ValueError (or OSError) when
    the file holds another number of weights or is not a weights file."""
    with np.load(path, allow_pickle=False) as archive:
        if len(archive.files) != count:
            raise ValueError(f"{path} holds {len(archive.files)} weights, the model takes {count}")
        for index in range(count):
            yield archive[entry(index)]


def checked_weights_path(manifest: Manifest) -> Path | None:
    """The artifact's weights file once its size and SHA-256 match the manifest's; None for an
    artifact without one. ArtifactError naming the artifact when it is missing or differs."""
    record = manifest.weights
    if record is None:
        return None
    path = manifest.weights_path
    if not path.is_file():
        raise ArtifactError(f"{manifest.folder}: weights file {record['file']} missing (the library "
                            f"of {manifest.function} takes its weights from it); {rebuild_hint(manifest)}")
    size = path.stat().st_size
    if size != record["size"]:
        raise ArtifactError(f"{manifest.folder}: weights file {record['file']} has {size} bytes, the manifest "
                            f"records {record['size']}: it was truncated, modified or corrupted; {rebuild_hint(manifest)}")
    actual = file_sha256(path)
    if actual != record["sha256"]:
        raise ArtifactError(f"{manifest.folder}: weights file {record['file']} has SHA-256 {actual}, the manifest "
                            f"records {record['sha256']}: it was modified or corrupted; {rebuild_hint(manifest)}")
    return path


def load_weights(manifest: Manifest) -> Iterator[np.ndarray]:
    """The artifact's checked weights (`checked_weights_path`), one at a time; none without a file."""
    path = checked_weights_path(manifest)
    if path is None:
        return
    try:
        yield from read_weights(path, manifest.weights["count"])  # type: ignore[index]
    except (OSError, ValueError) as error:
        raise ArtifactError(f"{manifest.folder}: cannot read weights file {path.name}: {error}; "
                            f"{rebuild_hint(manifest)}") from None
