"""Transparent dispatch for `@tfcheck.aot` functions: the artifact when fresh, else TensorFlow.

An artifact runs only when all of these hold, and otherwise the tf.function runs (with one warning
per reason, or NotCompiledError under `TFCHECK_AOT=strict`):
  - the cache holds an artifact of this function that this machine can run (CPU features, GPU,
    versions) and whose library passes its SHA-256 check;
  - its source fingerprint equals the live function's (the source did not change);
  - its captures fingerprint equals the live captured variables' (their values did not change);
    this is checked on every call (see `CapturesGuard` for the cost), or only on the first call
    of each artifact with `TFCHECK_AOT_VERIFY=first-call`;
  - an artifact was built for the call's input shapes and dtypes.

`TFCHECK_AOT=off` always runs TensorFlow. Outputs are returned as TensorFlow tensors in the
tf.function's structure, so callers see the same types whichever backend ran.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

from tfcheck.fingerprint import source_fingerprint
from tfcheck.runtime.errors import ArtifactError, InputError, NotCompiledError
from tfcheck.runtime.library import Artifact, CompiledFunction, scan
from tfcheck.runtime.manifest import CACHE_DIR, Manifest
from tfcheck.runtime.tf_bridge import CapturesGuard, to_tensorflow

MODES = ("on", "off", "strict")
VERIFY_MODES = ("every-call", "first-call")
TENSORFLOW = "tensorflow"


class AotFallbackWarning(UserWarning):
    """An `@tfcheck.aot` function ran on TensorFlow instead of its compiled artifact."""


class _Fallback(Exception):
    """Internal: why this call cannot run an artifact."""


def aot_mode() -> str:
    """`TFCHECK_AOT`: "on" (default), "off" (always TensorFlow) or "strict" (never fall back)."""
    return _env_choice("TFCHECK_AOT", MODES)


def verify_mode() -> str:
    """`TFCHECK_AOT_VERIFY`: compare captured variables with the build's on "every-call"
    (default) or only on the "first-call" of each artifact in this process."""
    return _env_choice("TFCHECK_AOT_VERIFY", VERIFY_MODES)


def _env_choice(name: str, choices: tuple[str, ...]) -> str:
    """The environment variable's value, lower-cased; unset or empty means `choices[0]`."""
    value = os.environ.get(name, "").strip().lower() or choices[0]
    if value not in choices:
        raise ValueError(f"{name}={value!r}: use one of {', '.join(choices)}")
    return value


def artifact_roots(python_function: Any) -> list[Path]:
    """Folders to look in: `TFCHECK_ARTIFACTS` (os.pathsep-separated) when set, else the
    `.tfcheck/artifacts` cache of the working directory and of each folder above the source."""
    configured = os.environ.get("TFCHECK_ARTIFACTS")
    if configured:
        return [Path(entry) for entry in configured.split(os.pathsep) if entry]
    places = [Path.cwd()]
    source = inspect.getsourcefile(python_function)
    if source:
        places += list(Path(source).resolve().parents)
    roots: list[Path] = []
    for place in places:
        root = (place / CACHE_DIR).resolve()
        if root.is_dir() and root not in roots:
            roots.append(root)
    return roots


class Dispatcher:
    """The call path of one `AotFunction` (see the module docstring)."""

    def __init__(self, wrapper: Any) -> None:
        self._wrapper = wrapper
        self._python_function = wrapper.tf_function.python_function
        self._lock = threading.Lock()
        self._compiled: CompiledFunction | str | None = None  # str: why there is none
        self._guards: dict[Path, CapturesGuard] = {}
        self._warned: set[str] = set()

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        mode = aot_mode()
        if mode == "off":
            return self._tensorflow(args, kwargs)
        try:
            artifact, arrays, guard = self._select(args, kwargs)
            outputs = artifact.run_flat(arrays)
        except _Fallback as reason:
            return self._fall_back(str(reason), mode, args, kwargs)
        except ArtifactError as error:  # bad SHA-256, unloadable library, wrong output count
            return self._fall_back(f"{self._name}: {error}", mode, args, kwargs)
        self._wrapper.backend = f"tvm:{artifact.manifest.device}"
        return to_tensorflow(guard.structured_outputs, outputs)

    def _fall_back(self, reason: str, mode: str, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        if mode == "strict":
            raise NotCompiledError(f"TFCHECK_AOT=strict: {reason}")
        self._warn_once(reason)
        return self._tensorflow(args, kwargs)

    def _tensorflow(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self._wrapper.backend = TENSORFLOW
        return self._wrapper.tf_function(*args, **kwargs)

    def _select(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Artifact, list[Any], CapturesGuard]:
        compiled = self._fresh_function()
        try:
            artifact, arrays = compiled.select(args, kwargs)
        except InputError as error:
            raise _Fallback(f"{self._name}: {error}") from None
        guard = self._guard(artifact)
        if not guard.unchanged(verify_mode() == "first-call"):
            raise _Fallback(captures_message(self._name, artifact.manifest.folder, self._source_file(),
                                             guard.ever_matched))
        return artifact, arrays, guard

    @property
    def _name(self) -> str:
        return str(self._wrapper.aot_options["name"])

    def _fresh_function(self) -> CompiledFunction:
        """The fresh, runnable artifacts of this function, looked up once per process."""
        with self._lock:
            if self._compiled is None:
                try:
                    self._compiled = self._lookup()
                except _Fallback as reason:
                    self._compiled = str(reason)
        if isinstance(self._compiled, str):
            raise _Fallback(self._compiled)  # a new exception each time: no growing traceback
        return self._compiled

    def _lookup(self) -> CompiledFunction:
        roots = artifact_roots(self._python_function)
        try:
            runnable, unavailable = _scan_all(roots)
        except ArtifactError as error:
            raise _Fallback(f"{self._name}: {error}") from None
        mine = [a for a in runnable if self._is_mine(a.manifest)]
        refused = [why for qualname, reasons in unavailable.items() for why in reasons
                   if qualname == self._qualname]
        if not mine:
            other = next((a.manifest for a in runnable if self._other_instance(a.manifest)), None)
            if other is not None:
                raise _Fallback(f"{self._name}: its artifact was built for the module-level instance "
                                f"{other.instance!r} ({other.qualname}), and this call is on another "
                                f"instance: running TensorFlow; {_SILENCE}")
            if refused:
                raise _Fallback(f"{self._name}: its artifacts cannot run here: {' | '.join(refused)}")
            where = ", ".join(map(str, roots)) or f"./{CACHE_DIR}"
            raise _Fallback(f"{self._name} is not compiled (no artifact in {where}); running "
                            f"TensorFlow. Build it with `tfcheck build {self._source_file()}`")
        current = source_fingerprint(self._wrapper.tf_function)
        fresh = [a for a in mine if a.manifest.source_fingerprint == current]
        if not fresh:
            raise _Fallback(f"{self._name}: its source changed since the last build (stale "
                            f"artifact); rebuild with `tfcheck build {self._source_file()}`")
        return CompiledFunction(self._name, fresh)

    @property
    def _qualname(self) -> str:
        return f"{self._python_function.__module__}.{self._python_function.__qualname__}"

    def _source_file(self) -> str:
        return inspect.getsourcefile(self._python_function) or "<file>"

    def _is_mine(self, manifest: Manifest) -> bool:
        """Same qualified name, or (run as a script: module __main__) same name and file; for a
        method, built for this very instance (see `_built_for`)."""
        if manifest.instance is not None:
            return self._of_this_method(manifest) and self._built_for(manifest.instance)
        if manifest.qualname == self._qualname:
            return True
        built_from = manifest.source_file
        here = inspect.getsourcefile(self._python_function)
        if manifest.function != self._name or not built_from or not here:
            return False
        return Path(here).resolve().parts[-len(Path(built_from).parts):] == Path(built_from).parts

    def _of_this_method(self, manifest: Manifest) -> bool:
        """A method artifact (`<module>.<instance>.<method>`) of this method's name."""
        return manifest.qualname.endswith(f".{manifest.instance}.{self._python_function.__name__}")

    def _other_instance(self, manifest: Manifest) -> bool:
        """An artifact of this method built for an instance other than this call's."""
        function = self._python_function
        return manifest.instance is not None and \
            manifest.qualname == f"{function.__module__}.{manifest.instance}.{function.__name__}"

    def _built_for(self, instance: str) -> bool:
        """Whether this wrapper's tf.function is the method bound to the module-level object
        `instance` of the function's module: the build traced that object's method with that
        object's variables, and another instance of the class has its own (which the captures
        check could not tell apart when they hold equal values)."""
        module = sys.modules.get(self._python_function.__module__)
        try:
            method = getattr(getattr(module, instance), self._python_function.__name__)
        except Exception:  # noqa: BLE001 - the user's attribute lookup may raise anything
            return False
        return getattr(method, "tf_function", method) is self._wrapper.tf_function

    def _guard(self, artifact: Artifact) -> CapturesGuard:
        with self._lock:
            folder = artifact.manifest.folder
            if folder not in self._guards:
                self._guards[folder] = CapturesGuard(self._wrapper.tf_function, artifact.manifest)
            return self._guards[folder]

    def _warn_once(self, message: str) -> None:
        with self._lock:
            if message in self._warned:
                return
            self._warned.add(message)
        warnings.warn(message, AotFallbackWarning, stacklevel=5)


_SILENCE = ("TFCHECK_AOT=off runs TensorFlow without this warning; TFCHECK_AOT=strict makes it an "
            "error (NotCompiledError)")


def captures_message(name: str, folder: Path, source_file: str, ever_matched: bool) -> str:
    """Why the artifact's captured values do not match, and what to do about it.

    Never matched in this process: the variables were initialised differently from the build,
    which imports the module with every random generator seeded to 0 (an unseeded Keras model gets
    new random weights in each process), so the fix is to make both processes agree. Matched once
    and then differed: the program changed them (training, `assign`) after the build.
    """
    if ever_matched:
        return (f"{name}: the values of the variables it captures changed since the first call "
                f"(assigned or trained after the build), and the artifact {folder} holds the build's "
                f"values: running TensorFlow. Once the weights are final, rebuild with "
                f"`tfcheck build {source_file}`; {_SILENCE}")
    return (f"{name}: the variables it captures do not hold the values the artifact {folder} was built "
            f"with: running TensorFlow. `tfcheck build` imports the module with every random generator "
            f"seeded to 0, so randomly initialised weights differ unless this process gives them the same "
            f"values before the first call: load the trained weights when the module is imported "
            f"(model.load_weights(...)), or call keras.utils.set_random_seed(0) before the model is "
            f"created; then run `tfcheck build {source_file}` again; {_SILENCE}")


def _scan_all(roots: list[Path]) -> tuple[list[Artifact], dict[str, list[str]]]:
    """Runnable artifacts and refusal reasons (by qualified name) over all roots; unreadable
    folders are ignored here, since they cannot be attributed to a function."""
    runnable: list[Artifact] = []
    unavailable: dict[str, list[str]] = {}
    for root in roots:
        found, refused, _ = scan(root)
        runnable += found
        for qualname, reasons in refused.items():
            unavailable.setdefault(qualname, []).extend(reasons)
    return runnable, unavailable
