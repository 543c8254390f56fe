"""The artifact contract: the `Manifest` record and its constants (docs/artifact-format.md).

`tfcheck build` writes a `Manifest` (`Manifest.to_json`) and the runtime reads it back
(`read_manifest`), so both sides share one definition of every key. It lives in the runtime because
the runtime must not import the compiler; the compiler imports it. Reading validates what the
runtime relies on (the required keys, static tensor specs, the type of every known key, the library
inside its folder) and names the file and the key in every error; the `runtime` record is checked
where it is used (`bundled.read_runtime`), so that an artifact built by an older tfcheck without
one is reported as unrunnable, with the reason, rather than skipped as unreadable.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.paths import UnsafePathError, path_inside
from tfcheck.runtime.structure import StructureError, leaf_count

FORMAT_VERSION = 1
# An artifact whose `main` takes its large constants from a weights file (runtime/weights.py): a
# runtime that reads only format 1 refuses it by its version rather than call `main` without them.
WEIGHTS_FORMAT_VERSION = 2
READABLE_FORMATS = (FORMAT_VERSION, WEIGHTS_FORMAT_VERSION)
MANIFEST = "manifest.json"
LIBRARY = "lib.so"  # the exported library's name inside an artifact folder
ENTRY = "main"  # the Relax VM function an artifact exports
CACHE_DIR = Path(".tfcheck") / "artifacts"  # where `tfcheck build` puts artifacts by default
_REQUIRED = ("format_version", "function", "inputs", "outputs", "output_structure", "device",
             "library", "library_sha256", "entry")


# A dimension of a spec: a size, or the name of a symbolic dimension listed in the manifest's
# `dims`; for outputs also None, a size the library computes from several or one the data decide
# (`tf.boolean_mask`'s rows), shown as `?`.
Dim = int | str | None


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of an artifact: a shape (sizes, or names of symbolic dimensions) and a
    dtype name."""

    name: str
    shape: tuple[Dim, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join('?' if dim is None else str(dim) for dim in self.shape)}]"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class Verification:
    """The artifact's outputs against TensorFlow's for the build's generated inputs; all None for
    a CUDA artifact built where there is no GPU (built, not run)."""

    max_abs_error: float | None = None
    max_rel_error: float | None = None
    passed: bool | None = None


@dataclass(frozen=True)
class SymbolicDim:
    """A dimension the library takes at any size from `min` to `max` (None: no upper bound) in
    steps of `step` (a U-Net of four poolings: 16, found by the build), and the sizes the build
    verified it at against TensorFlow."""

    min: int = 1
    max: int | None = None
    verified: tuple[int, ...] = ()
    step: int = 1

    def accepts(self, size: int) -> bool:
        return size >= self.min and (self.max is None or size <= self.max) and (size - self.min) % self.step == 0

    def describe(self) -> str:
        """`1 to 64`, or `at least 1`; with a step `multiples of 16, 32 to 256`, or `36 to 260 in
        steps of 16` where the minimum is no multiple of it."""
        span = f"at least {self.min}" if self.max is None else f"{self.min} to {self.max}"
        if self.step == 1:
            return span
        return f"multiples of {self.step}, {span}" if self.min % self.step == 0 else f"{span} in steps of {self.step}"

    def nearest(self, size: int) -> list[int]:
        """The sizes it takes next to `size` that lie between its bounds, below and above."""
        below = self.min + (size - self.min) // self.step * self.step
        return [near for near in dict.fromkeys((below, below + self.step)) if self.accepts(near)]

    def to_json(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max, "verified": list(self.verified),
                **({"step": self.step} if self.step != 1 else {})}


@dataclass(frozen=True)
class Manifest:
    """One artifact's `manifest.json`; `folder` is where it was read from (not written)."""

    function: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    output_structure: dict[str, Any]
    device: str
    library: str
    library_sha256: str
    entry: str = ENTRY
    format_version: Any = FORMAT_VERSION  # compared, not trusted: another format is reported unrunnable
    key: str | None = None
    qualname: str = ""  # module + "." + qualified name; the function's name when not recorded
    module: str | None = None
    source_file: str | None = None
    source_fingerprint: str | None = None
    captures_fingerprint: str | None = None
    graph_fingerprint: str | None = None
    target: dict[str, Any] = field(default_factory=dict)
    cpu_features: tuple[str, ...] | None = None  # CPU targets only
    versions: dict[str, str] = field(default_factory=dict)
    runtime: Any = None  # a dict; validated by bundled.read_runtime
    tuned: bool = False
    compile_options: dict[str, Any] | None = None
    verify: Verification = field(default_factory=Verification)
    operators: tuple[dict[str, Any], ...] | None = None
    compile_seconds: float | None = None
    device_code: dict[str, Any] | None = None  # CUDA only
    tuning: dict[str, Any] | None = None  # --tune only
    # kernels whose first-choice schedule was over the code-size budget (compiler/schedules/budget.py)
    budget_fallbacks: tuple[dict[str, Any], ...] | None = None
    created: str = ""
    # One structure node per argument, each with its parameter's "name" (runtime/structure.py);
    # absent for artifacts built before nested inputs: then every input is one tensor argument.
    input_structure: tuple[dict[str, Any], ...] | None = None
    instance: str | None = None  # methods: the module-level name of the instance it was built from
    # Symbolic dimensions by name (the names that input and output shapes use); None: all static.
    dims: dict[str, SymbolicDim] | None = None
    # The weights file `main` takes its large constants from (runtime/weights.py): {"file", "size",
    # "sha256", "count"}; None: every constant is in the library.
    weights: dict[str, Any] | None = None
    # Per input, the range [low, high) the build drew its test values from, where it chose one: [0,
    # rows) for int ids that index a table of that many rows (a gather, an embedding), or the
    # `values=` of @tfcheck.aot; `tfcheck bench` draws from them too. null for an input with the
    # default values; None: every input has them.
    input_values: tuple[tuple[float, float] | None, ...] | None = None
    folder: Path = field(default=Path("."), compare=False)

    def __post_init__(self) -> None:
        if not self.qualname:
            object.__setattr__(self, "qualname", self.function)
        structure = self.output_structure
        if isinstance(structure, dict) and structure.get("kind") in ("tuple", "list") \
                and "length" not in structure and "items" not in structure:
            # the first manifests wrote a flat tuple without its length: it holds every output
            object.__setattr__(self, "output_structure", {**structure, "length": len(self.outputs)})

    @property
    def library_path(self) -> Path:
        """The library, links resolved; ArtifactError when it lies outside the artifact folder."""
        return file_inside(self.folder, self.library, "'library'")

    @property
    def weights_path(self) -> Path:
        """The weights file, links resolved (only for a manifest with `weights`); ArtifactError when
        it lies outside the artifact folder."""
        return file_inside(self.folder, (self.weights or {}).get("file"), "'weights'.file")

    @property
    def arguments(self) -> tuple[dict[str, Any], ...]:
        """The function's arguments: structure nodes with a "name" (see `input_structure`)."""
        if self.input_structure is not None:
            return self.input_structure
        return tuple({"name": spec.name, "kind": "tensor"} for spec in self.inputs)

    def describe(self) -> str:
        """`classify(x: float32[1, 224, 224, 3]) [cpu]`, for error messages; symbolic dimensions
        with their bounds: `mlp(x: float32[batch, 128]; batch 1 to 64) [cpu]`."""
        bounds = "; ".join(f"{name} {dim.describe()}" for name, dim in (self.dims or {}).items())
        return f"{self.function}({', '.join(map(str, self.inputs))}{'; ' + bounds if bounds else ''}) [{self.device}]"

    def to_json(self) -> dict[str, Any]:
        """The JSON object of docs/artifact-format.md; keys without a value are left out."""
        data: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.name == "folder" or value is None:
                continue
            if item.name in ("inputs", "outputs"):
                value = [spec.to_json() for spec in value]
            elif item.name == "verify":
                value = dataclasses.asdict(value)
            elif item.name == "dims":
                value = {name: dim.to_json() for name, dim in value.items()}
            elif item.name == "input_values":
                value = [None if bounds is None else list(bounds) for bounds in value]
            elif isinstance(value, tuple):
                value = list(value)
            data[item.name] = value
        return data

    def write(self, folder: Path) -> Path:
        """Write `folder/manifest.json` in one rename: a reader never sees half of it."""
        from tfcheck.atomic import write_atomic  # the build's: a runtime that only reads skips tempfile, shutil

        path = folder / MANIFEST
        write_atomic(path, json.dumps(self.to_json(), indent=2) + "\n")
        return path


# The JSON type of each key read as it is (the specs and `verify` are parsed on their own).
_KINDS: dict[str, type | tuple[type, ...]] = {
    "function": str, "output_structure": dict, "device": str, "library_sha256": str, "entry": str,
    "key": str, "qualname": str, "module": str, "source_file": str,
    "source_fingerprint": str, "captures_fingerprint": str, "graph_fingerprint": str,
    "target": dict, "cpu_features": list, "versions": dict,
    "tuned": bool, "compile_options": dict, "operators": list, "compile_seconds": (int, float),
    "device_code": dict, "tuning": dict, "budget_fallbacks": list, "created": str,
    "input_structure": list, "instance": str, "weights": dict, "input_values": list,
}
# The JSON type of each key of the `weights` record.
_WEIGHTS_KINDS: dict[str, type] = {"file": str, "size": int, "sha256": str, "count": int}


def read_manifest(folder: Path) -> Manifest:
    """Parse and validate `folder/manifest.json`; errors name the file and the bad key."""
    path = folder / MANIFEST
    try:
        raw = json.loads(file_inside(folder, MANIFEST, MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ArtifactError(f"{path}: cannot read manifest: {error}") from None
    return manifest_from_json(raw, folder)


def manifest_from_json(raw: object, folder: Path) -> Manifest:
    """The `Manifest` of a parsed manifest.json of `folder` (see `read_manifest`)."""
    path = folder / MANIFEST
    if not isinstance(raw, dict):
        raise ArtifactError(f"{path}: manifest is not a JSON object")
    missing = [key for key in _REQUIRED if key not in raw]
    if missing:
        raise ArtifactError(f"{path}: manifest lacks {', '.join(missing)}")
    file_inside(folder, raw["library"], "'library'")
    known = {item.name for item in dataclasses.fields(Manifest)} - {"folder"}
    values = {key: value for key, value in raw.items() if key in known}
    for key, kind in _KINDS.items():
        if key in values and (not isinstance(values[key], kind) or isinstance(values[key], bool) != (kind is bool)):
            raise ArtifactError(f"{path}: '{key}' = {values[key]!r} is not a JSON {_json_name(kind)}")
    if "weights" in values:
        _check_weights(path, values["weights"], folder)
    values["dims"] = _dims(path, raw.get("dims"))
    values["inputs"] = _specs(path, raw, "inputs", values["dims"] or {})
    values["outputs"] = _specs(path, raw, "outputs", values["dims"] or {})
    values["verify"] = _verification(path, raw.get("verify", {}))
    for key in ("cpu_features", "operators", "budget_fallbacks", "input_structure"):
        if key in values:
            values[key] = tuple(values[key])
    if "input_values" in values:
        values["input_values"] = _input_values(path, values["input_values"], len(values["inputs"]))
    manifest = Manifest(**values, folder=folder)
    _check_structures(path, manifest)
    return manifest


def _check_structures(path: Path, manifest: Manifest) -> None:
    """The input and output structures must be well formed and hold as many tensors as the
    specs list: the runtime flattens arguments and rebuilds outputs by them."""
    checks = [("output_structure", [manifest.output_structure], len(manifest.outputs))]
    if manifest.input_structure is not None:
        checks.append(("input_structure", list(manifest.input_structure), len(manifest.inputs)))
    for key, nodes, expected in checks:
        try:
            if key == "input_structure" and not all(isinstance(node, dict) and isinstance(node.get("name"), str)
                                                    for node in nodes):
                raise StructureError("each argument needs a string 'name'")
            count = sum(leaf_count(node) for node in nodes)
        except StructureError as error:
            raise ArtifactError(f"{path}: '{key}': {error}") from None
        if count != expected:
            raise ArtifactError(f"{path}: '{key}' holds {count} tensors, the manifest lists {expected}")


def _check_weights(path: Path, record: dict[str, Any], folder: Path) -> None:
    """`weights`: a file inside the folder, its size and SHA-256, and how many weights it holds."""
    for key, kind in _WEIGHTS_KINDS.items():
        value = record.get(key)
        if not isinstance(value, kind) or isinstance(value, bool) or (kind is int and value < 0):
            raise ArtifactError(f"{path}: 'weights' = {record!r} needs a string 'file' and 'sha256' and "
                                "integers 'size' and 'count' >= 0")
    file_inside(folder, record["file"], "'weights'.file")


def _json_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "string", dict: "object", list: "array", int: "integer", bool: "boolean",
             float: "number", type(None): "null"}
    return " or ".join(names[k] for k in (kind if isinstance(kind, tuple) else (kind,)))


def _verification(path: Path, raw: object) -> Verification:
    """`verify`: each value a number, a boolean for `passed`, or null."""
    if not isinstance(raw, dict):
        raise ArtifactError(f"{path}: 'verify' must be a JSON object")
    checked = Verification(**{key: raw.get(key) for key in ("max_abs_error", "max_rel_error", "passed")})
    errors_ok = all(value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
                    for value in (checked.max_abs_error, checked.max_rel_error))
    if not errors_ok or not isinstance(checked.passed, (bool, type(None))):
        raise ArtifactError(f"{path}: 'verify' = {raw!r} needs numbers (or null) and a boolean 'passed'")
    return checked


def file_inside(folder: Path, name: object, field: str) -> Path:
    """`folder/name`, links resolved, for a file the manifest names (docs/artifact-format.md,
    "Names and paths"); ArtifactError naming the folder and the field when it is not a plain name
    or leads out of the folder."""
    try:
        return path_inside(folder, name, field)
    except UnsafePathError as error:
        raise ArtifactError(f"{folder}: {error}") from None


def _dims(path: Path, raw: object) -> dict[str, SymbolicDim] | None:
    """`dims`: {name: {"min": int >= 0, "max": int >= min or null, "verified": [int, ...], "step": int >= 1
    (optional, 1 when absent)}}."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ArtifactError(f"{path}: 'dims' must be a JSON object")
    dims = {}
    for name, entry in raw.items():
        low = entry.get("min") if isinstance(entry, dict) else None
        high = entry.get("max") if isinstance(entry, dict) else None
        verified = entry.get("verified", []) if isinstance(entry, dict) else None
        step = entry.get("step", 1) if isinstance(entry, dict) else None
        if not (_is_int(low) and low >= 0 and (high is None or (_is_int(high) and high >= low))
                and isinstance(verified, list) and all(_is_int(size) for size in verified)
                and _is_int(step) and step >= 1):
            raise ArtifactError(f"{path}: 'dims'.{name} = {entry!r} needs an integer 'min' >= 0, an integer "
                                "'max' >= min (or null), a list of integers 'verified' and, if given, an integer "
                                "'step' >= 1")
        dims[name] = SymbolicDim(low, high, tuple(verified), step)
    return dims


def _input_values(path: Path, raw: list[Any], count: int) -> tuple[tuple[float, float] | None, ...]:
    """`input_values`: one [low, high] (numbers, low < high) or null per input."""
    def number(value: object) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    if len(raw) != count or not all(entry is None or (isinstance(entry, list) and len(entry) == 2 and all(
            map(number, entry)) and entry[0] < entry[1]) for entry in raw):
        raise ArtifactError(f"{path}: 'input_values' = {raw!r} needs one [low, high] (low < high) or null per input")
    return tuple(None if entry is None else (entry[0], entry[1]) for entry in raw)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _specs(path: Path, raw: dict[str, Any], field: str, dims: dict[str, SymbolicDim]) -> tuple[TensorSpec, ...]:
    """Validate a list of {"name", "shape", "dtype"}: each dimension a size, or the name of one
    of the manifest's `dims`."""
    entries = raw[field]
    if not isinstance(entries, list):
        raise ArtifactError(f"{path}: '{field}' must be a list")
    specs = []
    for index, entry in enumerate(entries):
        try:
            shape = tuple(dim if (isinstance(dim, str) and dim in dims) or (dim is None and field == "outputs")
                          else int(dim) for dim in entry["shape"])
            specs.append(TensorSpec(str(entry.get("name", f"{field}_{index}")), shape,
                                    str(entry["dtype"])))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ArtifactError(
                f"{path}: {field}[{index}] = {entry!r} needs a 'shape' of sizes and names of 'dims', and a 'dtype'"
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
