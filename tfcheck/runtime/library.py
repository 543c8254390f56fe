"""`tfcheck.load`: compiled artifacts as callable functions, without TensorFlow.

An artifact folder holds one (function, input shapes, target); a `Library` groups the runnable
artifacts of a folder by function, and a `CompiledFunction` picks the artifact whose input shapes
match the call. Artifacts this machine cannot run are kept aside with the reasons, so one bad
artifact never hides the others, and asking for its function explains how to rebuild it.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.runtime.bundled import locate
from tfcheck.runtime.errors import ArtifactError, InputError
from tfcheck.runtime.inputs import as_array, check_array, flat_inputs, shape_problem
from tfcheck.runtime.manifest import Manifest, find_artifact_folders, read_manifest
from tfcheck.runtime.digest import file_sha256
from tfcheck.runtime.structure import StructureError, pack
from tfcheck.runtime.target import incompatibilities, rebuild_hint
from tfcheck.runtime.tvm_backend import Executable
from tfcheck.runtime.weights import load_weights

# Checked call signatures a function remembers (a symbolic batch gives one per batch size seen).
MAX_SIGNATURES = 64


class Artifact:
    """One artifact folder; its library is verified and loaded on first use, once."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self._executable: Executable | None = None
        self._lock = threading.Lock()

    def open(self) -> Executable:
        """Check the library's SHA-256 against the manifest, then load it with its weights file's
        values, if it has one (checked too: `runtime/weights.py`) (thread-safe)."""
        if self._executable is not None:  # loaded: no lock to take on every call
            return self._executable
        with self._lock:
            if self._executable is None:
                path = self.manifest.library_path
                if not path.is_file():
                    raise ArtifactError(f"{path}: library missing; {rebuild_hint(self.manifest)}")
                actual = file_sha256(path)
                if actual != self.manifest.library_sha256:
                    raise ArtifactError(
                        f"{path}: SHA-256 {actual} does not match the manifest's "
                        f"{self.manifest.library_sha256}: the library was modified or "
                        f"corrupted; {rebuild_hint(self.manifest)}")
                self._executable = Executable(path, self.manifest.entry, self.manifest.device,
                                              locate(self.manifest), load_weights(self.manifest))
            return self._executable

    def run(self, arrays: list[Any]) -> Any:
        """Run on checked inputs (from `check_array`); return outputs in the tf.function's
        structure."""
        return structure_outputs(self.manifest, self.run_flat(arrays))

    def run_flat(self, arrays: list[Any]) -> list[Any]:
        """Run on checked inputs; the outputs in flattening order, as many as the manifest lists."""
        outputs = self.open().run(arrays)
        if len(outputs) != len(self.manifest.outputs):
            raise ArtifactError(f"{self.manifest.folder}: the library returned {len(outputs)} "
                                f"outputs, the manifest lists {len(self.manifest.outputs)}")
        return outputs


def structure_outputs(manifest: Manifest, outputs: list[Any]) -> Any:
    """Rebuild the tf.function's output structure (`runtime/structure.py`)."""
    try:
        return pack(manifest.output_structure, outputs)
    except StructureError as error:
        raise ArtifactError(f"{manifest.folder}: output_structure {manifest.output_structure!r} does not fit "
                            f"{len(outputs)} outputs: {error}") from None


class CompiledFunction:
    """The runnable artifacts of one function; a call runs the one matching the input shapes."""

    def __init__(self, name: str, artifacts: Sequence[Artifact]) -> None:
        self.__name__ = name
        # Newest first: when several artifacts accept the same shapes, the latest build wins.
        self.artifacts = sorted(artifacts, key=lambda a: a.manifest.created,
                                reverse=True)
        arguments = self.artifacts[0].manifest.arguments
        # Only a function of plain tensor arguments remembers its checked signatures (`_known`).
        self._plain_arity = len(arguments) if all(a["kind"] == "tensor" for a in arguments) else -1
        self._checked: dict[tuple[Any, ...], Artifact] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        signature = None if kwargs else self._signature(args)
        artifact = self._checked.get(signature) if signature is not None else None
        if artifact is not None:  # these dtypes and shapes passed the checks before
            return artifact.run(list(args))  # the memory checks: `inputs.lendable`, per call
        artifact, arrays = self.select(args, kwargs)
        if signature is not None:
            if len(self._checked) >= MAX_SIGNATURES:
                self._checked.clear()
            self._checked[signature] = artifact
        return artifact.run(arrays)

    def _signature(self, args: Sequence[Any]) -> tuple[Any, ...] | None:
        """The (dtype, shape) of each argument when all are NumPy arrays passed by position to a
        function of plain tensor arguments, else None. The checks `select` makes depend on these
        alone (which artifact, shapes, dtypes), so a signature that passed them once needs only
        the per-call memory checks again, which the binding makes as it lends each array
        (`inputs.lendable`): a call of a small model paid about 3 us for the checks, a tenth of
        the MLP's kernel time (docs/runtime.md, "Per-call overhead")."""
        if len(args) != self._plain_arity:
            return None
        for array in args:
            if type(array) is not np.ndarray:
                return None
        return tuple((array.dtype, array.shape) for array in args)

    def select(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Artifact, list[Any]]:
        """The artifact for these arguments and the checked arrays; InputError when none fits."""
        first = self.artifacts[0].manifest
        specs = first.inputs
        values = flat_inputs(self.__name__, first.arguments, specs, args, kwargs)
        arrays = [as_array(value) for value in values]
        shapes = [tuple(array.shape) for array in arrays]
        problems = [shape_problem(self.__name__, a.manifest.inputs, a.manifest.dims or {}, shapes)
                    for a in self.artifacts]
        matching = [artifact for artifact, problem in zip(self.artifacts, problems) if problem is None]
        if not matching and len(self.artifacts) > 1:
            available = "; ".join(a.manifest.describe() for a in self.artifacts)
            given = ", ".join(f"{spec.name}: {shape}" for spec, shape in zip(specs, shapes))
            raise InputError(f"{self.__name__}(): no artifact for input shapes ({given}); "
                             f"compiled for: {available}")
        if not matching:
            raise InputError(str(problems[0]))
        artifact = matching[0]
        checked = [check_array(self.__name__, spec, value, array)
                   for spec, value, array in zip(artifact.manifest.inputs, values, arrays)]
        return artifact, checked

    def __repr__(self) -> str:
        return f"<compiled {self.__name__}: {', '.join(a.manifest.describe() for a in self.artifacts)}>"


class Library:
    """Compiled functions by name (`lib.classify`, `lib["classify"]`) and qualified name."""

    def __init__(self, root: Path, artifacts: Sequence[Artifact],
                 unavailable: dict[str, list[str]], skipped: list[str]) -> None:
        self.root = root
        self.unavailable = unavailable  # qualname -> reasons its artifacts cannot run here
        self.skipped = skipped  # unreadable artifact folders
        grouped: dict[str, list[Artifact]] = defaultdict(list)
        for artifact in artifacts:
            grouped[artifact.manifest.qualname].append(artifact)
        self._by_qualname = {qualname: CompiledFunction(group[0].manifest.function, group)
                             for qualname, group in grouped.items()}
        self._qualnames_by_name: dict[str, list[str]] = defaultdict(list)
        for qualname, function in self._by_qualname.items():
            self._qualnames_by_name[function.__name__].append(qualname)
            # `module.name` also finds a function whose aot name differs from its Python name.
            module = grouped[qualname][0].manifest.module
            if module:
                self._qualnames_by_name[f"{module}.{function.__name__}"].append(qualname)

    def __getitem__(self, key: str) -> CompiledFunction:
        if key in self._by_qualname:
            return self._by_qualname[key]
        qualnames = sorted(set(self._qualnames_by_name.get(key, [])))
        if len(qualnames) == 1:
            return self._by_qualname[qualnames[0]]
        if len(qualnames) > 1:
            raise KeyError(f"{key!r} is ambiguous in {self.root}: use one of {sorted(qualnames)}")
        raise KeyError(self._missing_message(key))

    def __getattr__(self, name: str) -> CompiledFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as error:
            raise AttributeError(error.args[0]) from None

    def __contains__(self, key: object) -> bool:
        return key in self._by_qualname or key in self._qualnames_by_name

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._by_qualname))

    def __dir__(self) -> list[str]:
        names = {name for name in self._qualnames_by_name if name.isidentifier()}
        return sorted(set(super().__dir__()) | names)

    @property
    def functions(self) -> dict[str, CompiledFunction]:
        """Runnable functions by qualified name."""
        return dict(self._by_qualname)

    def _missing_message(self, key: str) -> str:
        reasons = [f"{qualname}: {'; '.join(why)}" for qualname, why in self.unavailable.items()
                   if qualname == key or qualname.rsplit(".", 1)[-1] == key]
        if reasons:
            return f"{key!r} cannot run on this machine: " + " | ".join(reasons)
        return (f"no compiled function {key!r} in {self.root}; available: "
                f"{', '.join(sorted(n for n in self._qualnames_by_name if '.' not in n)) or '(none)'}")

    def __repr__(self) -> str:
        return f"<tfcheck.Library {self.root}: {', '.join(self)}>"


def load(path: str | Path, *, lazy: bool = False) -> Library:
    """Load the artifacts in `path` (one artifact, a `tfcheck build --out` folder, or the cache).

    Libraries are SHA-256-checked and loaded now unless `lazy` (then on each one's first call).
    Raises ArtifactError when nothing in `path` can run here, naming every reason.
    """
    root = Path(path)
    runnable, unavailable, skipped = scan(root)
    if not lazy:
        runnable = _open_all(runnable, unavailable)
    if not runnable:
        problems = [f"{q}: {'; '.join(why)}" for q, why in unavailable.items()] + skipped
        raise ArtifactError(f"{root}: no artifact can run on this machine"
                            + (": " + " | ".join(problems) if problems else " (none found)"))
    return Library(root, runnable, dict(unavailable), skipped)


def scan(root: Path) -> tuple[list[Artifact], dict[str, list[str]], list[str]]:
    """Split the artifacts under `root` into runnable ones, unrunnable ones (with the reasons,
    by qualified name) and unreadable folders."""
    runnable: list[Artifact] = []
    unavailable: dict[str, list[str]] = defaultdict(list)
    skipped: list[str] = []
    for folder in find_artifact_folders(root):
        try:
            manifest = read_manifest(folder)
        except ArtifactError as error:
            skipped.append(str(error))
            continue
        reasons = incompatibilities(manifest)
        if reasons:
            unavailable[manifest.qualname].append(
                f"{folder}: {'; '.join(reasons)}; {rebuild_hint(manifest)}")
        else:
            runnable.append(Artifact(manifest))
    return runnable, unavailable, skipped


def _open_all(artifacts: list[Artifact], unavailable: dict[str, list[str]]) -> list[Artifact]:
    """Load every library now; move the ones that fail (bad SHA-256, unloadable) aside."""
    opened = []
    for artifact in artifacts:
        try:
            artifact.open()
        except ArtifactError as error:
            unavailable[artifact.manifest.qualname].append(str(error))
            continue
        opened.append(artifact)
    return opened
