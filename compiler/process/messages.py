"""What the build's processes tell each other: typed requests and results, JSON on the wire.

`tfcheck build` and `tfcheck bench` run each step in a child process (`compiler/process/child.py`); the
parent writes a request, the child reports a result, both as JSON. Each is a dataclass here, so
that both ends (and `tfcheck/commands/`) name the same fields, and every message carries
`contract_version`: the parent and the child are the same installation, so a mismatch means a
half-upgraded install, refused with a message rather than misread.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tfcheck.compiler.process.target import BuildTarget

CONTRACT_VERSION = 1
_VERSION_KEY = "contract_version"

Message = TypeVar("Message")


class ContractError(ValueError):
    """A message that does not fit its dataclass (another contract version, a missing field)."""


def to_message(message: object) -> dict[str, Any]:
    """The JSON object for a request or result dataclass."""
    return {_VERSION_KEY: CONTRACT_VERSION, **dataclasses.asdict(message)}  # type: ignore[call-overload]


def from_message(kind: type[Message], data: dict[str, Any]) -> Message:
    """The dataclass `kind` from its JSON object (nested dataclasses, lists of them, optionals)."""
    version = data.get(_VERSION_KEY)
    if version != CONTRACT_VERSION:
        raise ContractError(f"{kind.__name__}: contract version {version!r}, this tfcheck speaks "
                            f"{CONTRACT_VERSION} (a half-upgraded installation?)")
    return _build(kind, {key: value for key, value in data.items() if key != _VERSION_KEY})


def _build(kind: type[Message], data: dict[str, Any]) -> Message:
    hints = typing.get_type_hints(kind)
    names = {item.name for item in dataclasses.fields(kind)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ContractError(f"{kind.__name__}: unknown fields {', '.join(unknown)}")
    try:
        return kind(**{key: _convert(hints[key], value) for key, value in data.items()})
    except TypeError as error:  # a required field is missing
        raise ContractError(f"{kind.__name__}: {error}") from None


def _convert(hint: Any, value: Any) -> Any:
    """`value` as `hint` says: a dataclass from its dict, each item of a list, else as it is."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [option for option in typing.get_args(hint) if option is not type(None)]
        return _convert(options[0], value) if len(options) == 1 else value
    if origin is list:
        (item,) = typing.get_args(hint)
        return [_convert(item, entry) for entry in value]
    if dataclasses.is_dataclass(hint):
        return _build(hint, value)  # type: ignore[arg-type]
    return value


# --- tracing: compiler/trace/tracing.py -------------------------------------------------------------------


@dataclass(frozen=True)
class KeyParts:
    """Everything in the cache key besides the traced graph and the TensorFlow version, which
    only the tracing child knows (`artifact.cache_key`)."""

    target: BuildTarget
    compile_options: dict[str, Any]
    versions: dict[str, str]  # without "tensorflow"

    def versions_with(self, tensorflow: str) -> dict[str, str]:
        """The versions that go into the key and the manifest."""
        return {**self.versions, "tensorflow": tensorflow}


@dataclass(frozen=True)
class TraceRequest:
    root: str  # put first on sys.path to import `module`
    module: str
    qualname: str
    path: str  # the source file, as the user would type it (messages)
    work_dir: str
    key: KeyParts
    config_shapes: list[Any] | None = None  # the config's shape entries for this function
    # The artifact cache: with it, the child stops right after freezing when the cache holds the
    # artifact already; without it (a dry run, which reports the operators) it never does.
    cache_dir: str | None = None
    # A method: the module-level name of the instance (`qualname` is then `<instance>.<method>`,
    # or the name of a module-level `tfcheck.aot(<instance>.<method>)`).
    instance: str | None = None
    # A SavedModel folder: `qualname` is then the signature's name, `module` the folder's
    # name as an identifier, and nothing is imported.
    saved_model: str | None = None
    config_dims: dict[str, Any] | None = None  # the config's bounds of symbolic dimensions
    # Unknown dimensions become symbolic dimensions of one artifact (False: the per-shape
    # fallback, one artifact per shape entry, after the symbolic build failed).
    symbolic: bool = True
    # How the weights reach the converter (`trace.prepare`): "auto", or "constants" when a build
    # with the weights as inputs failed and the driver tries again with them frozen.
    weights: str = "auto"

    @property
    def label(self) -> str:
        return f"{self.module}.{self.qualname}"


@dataclass(frozen=True)
class TracedVariant:
    """One shape entry, traced and frozen; converted (with `io.npz`) unless `cached`."""

    dir: str
    inputs: list[dict[str, Any]]
    graph_sha256: str
    captures_fingerprint: str
    key: str
    cached: bool = False
    outputs: list[dict[str, Any]] = field(default_factory=list)
    output_structure: dict[str, Any] = field(default_factory=dict)
    operators: list[dict[str, Any]] = field(default_factory=list)
    input_structure: list[dict[str, Any]] = field(default_factory=list)  # one node per argument
    # symbolic dimensions: name -> {"min", "max" (None: unbounded), "verified": [sizes]}
    dims: dict[str, Any] | None = None
    # weight inputs after the user's (`weights.npz` in `dir`); 0: the weights are frozen in the model
    weights: int = 0
    # why the weights are frozen although the function would take them as inputs: the failure of an
    # earlier build of this variant with them as inputs (`ArtifactCache.lifted_failure`)
    frozen_because: str | None = None


@dataclass(frozen=True)
class TraceInputs:
    """What the import and the trace read besides installed packages' files (`compiler/cache/fastkey.py`)."""

    files: dict[str, str | None]  # absolute path -> SHA-256 (None: gone by the end of the trace)
    listings: dict[str, str | None]  # folder listed -> SHA-256 of its sorted names
    environment: dict[str, str | None]  # variable -> value the child started with; "*": all, hashed
    distributions: dict[str, str]  # installed distribution a module was imported from -> version
    complete: bool = True  # False when a read could not be recorded: no fast key then


@dataclass(frozen=True)
class TraceResult:
    name: str  # the artifact name: `name=` of @tfcheck.aot, else the attribute's name
    # what tfcheck.aot dispatch matches artifacts by: the Python function's own name, which
    # differs from the module attribute for `h = tfcheck.aot(tf.function(k))`
    qualname: str
    versions: dict[str, str]  # what went into the keys: KeyParts.versions and TensorFlow's
    source_fingerprint: str
    variants: list[TracedVariant]
    inputs: TraceInputs | None = None  # what the fast key checks (not in a dry run)
    has_shape_entries: bool = False  # shape entries exist: the per-shape fallback of a symbolic build


# --- compiling: compiler/build/compile.py --------------------------------------------------------------


@dataclass(frozen=True)
class CompileRequest:
    variant_dir: str  # a TracedVariant's dir: model.tflite and io.npz
    target: BuildTarget
    out_dir: str  # where lib.so goes
    tuning: dict[str, Any] | None = None  # trials, database_dir, rpc_tracker, rpc_key
    inputs: list[dict[str, Any]] | None = None  # the variant's input specs (symbolic dimensions by name)
    dims: dict[str, Any] | None = None  # the variant's symbolic dimensions (TracedVariant.dims)
    weights: int = 0  # the model's weight inputs, bound from `weights.npz` (TracedVariant.weights)


@dataclass(frozen=True)
class CompileResult:
    tvm: str
    compile_seconds: float
    verify: dict[str, Any]  # passed, max_abs_error, max_rel_error, message
    cpu_features: list[str] | None = None  # CPU targets
    device_code: dict[str, Any] | None = None  # CUDA targets
    tuning: dict[str, Any] | None = None  # tuned builds
    budget_fallbacks: list[dict[str, Any]] | None = None  # kernels over the code-size budget
    library_weights: int = 0  # the constants `main` takes from the artifact's weights file (0: no file)


# --- benchmarking: compiler/bench/latency.py --------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """How long to measure: warm-up calls, then at least `min_runs` and `min_seconds`, at most
    `max_runs` or `max_seconds` (whichever ends first)."""

    warmup: int = 3
    min_runs: int = 10
    min_seconds: float = 1.0
    max_runs: int = 500
    max_seconds: float = 10.0


@dataclass(frozen=True)
class BenchRequest:
    backend: str
    module: str
    qualname: str  # in the module
    root: str
    inputs: list[dict[str, Any]]
    budget: Budget
    outputs_path: str
    turns: list[int]  # the child's ends of its turn pipes, go and done (compiler/bench/turns.py)
    artifact: str | None = None  # the artifact folder, for the tvm backends


@dataclass(frozen=True)
class BenchResult:
    median_ms: float
    p10_ms: float
    p90_ms: float
    runs: int
    setup_s: float
