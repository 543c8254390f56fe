"""Reading artifact manifests (docs/artifact-format.md) and finding artifacts in a folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.paths import UnsafePathError, path_inside

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CACHE_DIR = Path(".tfcheck") / "artifacts"  # where `tfcheck build` puts artifacts by default
_REQUIRED = ("format_version", "function", "inputs", "outputs", "output_structure", "device",
             "library", "library_sha256", "entry")


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of an artifact: a static shape and a dtype name."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(str(dim) for dim in self.shape)}]"


@dataclass(frozen=True)
class Manifest:
    """The parsed manifest of one artifact folder; `raw` keeps every field for tools like `ls`."""

    folder: Path
    raw: dict[str, Any]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    @property
    def function(self) -> str:
        return str(self.raw["function"])

    @property
    def qualname(self) -> str:
        return str(self.raw.get("qualname", self.function))

    @property
    def device(self) -> str:
        return str(self.raw["device"])

    @property
    def library_path(self) -> Path:
        """The library, links resolved; ArtifactError when it lies outside the artifact folder."""
        return file_inside(self.folder, self.raw["library"], "'library'")

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(spec.shape for spec in self.inputs)

    def describe(self) -> str:
        """`classify(x: float32[1, 224, 224, 3]) [cpu]`, for error messages."""
        return f"{self.function}({', '.join(map(str, self.inputs))}) [{self.device}]"


def read_manifest(folder: Path) -> Manifest:
    """Parse and validate `folder/manifest.json`; errors name the file and the bad field."""
    path = folder / MANIFEST
    try:
        raw = json.loads(file_inside(folder, MANIFEST, MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ArtifactError(f"{path}: cannot read manifest: {error}") from None
    if not isinstance(raw, dict):
        raise ArtifactError(f"{path}: manifest is not a JSON object")
    missing = [key for key in _REQUIRED if key not in raw]
    if missing:
        raise ArtifactError(f"{path}: manifest lacks {', '.join(missing)}")
    file_inside(folder, raw["library"], "'library'")
    return Manifest(
        folder=folder,
        raw=raw,
        inputs=_specs(path, raw, "inputs"),
        outputs=_specs(path, raw, "outputs"),
    )


def file_inside(folder: Path, name: object, field: str) -> Path:
    """`folder/name`, links resolved, for a file the manifest names (docs/artifact-format.md,
    "Names and paths"); ArtifactError naming the folder and the field when it is not a plain name
    or leads out of the folder."""
    try:
        return path_inside(folder, name, field)
    except UnsafePathError as error:
        raise ArtifactError(f"{folder}: {error}") from None


def _specs(path: Path, raw: dict[str, Any], field: str) -> tuple[TensorSpec, ...]:
    """Validate a list of {"name", "shape", "dtype"}: shapes must be static."""
    entries = raw[field]
    if not isinstance(entries, list):
        raise ArtifactError(f"{path}: '{field}' must be a list")
    specs = []
    for index, entry in enumerate(entries):
        try:
            shape = tuple(int(dim) for dim in entry["shape"])
            specs.append(TensorSpec(str(entry.get("name", f"{field}_{index}")), shape,
                                    str(entry["dtype"])))
        except (KeyError, TypeError, ValueError):
            raise ArtifactError(
                f"{path}: {field}[{index}] = {entry!r} needs a static 'shape' and a 'dtype'"
            ) from None
    return tuple(specs)


def find_artifact_folders(root: Path) -> list[Path]:
    """Artifact folders under `root`: `root` itself, or its direct children with a manifest.

    This covers one artifact, a `tfcheck build --out DIR` folder and the cache (whose index.json
    is only an acceleration structure, so scanning manifests is always right).
    """
    if (root / MANIFEST).is_file():
        return [root]
    if not root.is_dir():
        raise ArtifactError(f"{root}: no such artifact folder")
    return sorted(child for child in root.iterdir() if (child / MANIFEST).is_file())
