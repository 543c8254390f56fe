"""What the build's processes tell each other: typed requests and results, JSON on the wire.

`tfcheck build` and `tfcheck bench` run each step in a child process (`compiler/process/child.py`); the
parent writes a request, the child reports a result, both as JSON. Each is a dataclass here, so
that both ends (and `tfcheck/commands/`) name the same fields, and every message carries
`contract_version`: the parent and the child are the same installation, so a mismatch means a
half-upgraded install, refused with a message rather than misread.

Every field is typed, down to the leaves: tensors are the manifest's `TensorSpec`s, symbolic
dimensions its `SymbolicDim`s, and the input and output structures the runtime's structure `Node`s
(runtime/structure.py: JSON objects of one documented form, checked where they are read), so what
the tracing child reports is what the manifest records. `from_message` rebuilds each nested
dataclass from its JSON object by the field's type; nothing is passed on as an untyped dict.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tfcheck.compiler.process.target import BuildTarget
from tfcheck.runtime.manifest import SymbolicDim, TensorSpec
from tfcheck.runtime.structure import Node

CONTRACT_VERSION = 2
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
    """`value` as `hint` says: a dataclass from its dict, each item of a list, a tuple or a dict's
    values, else as it is (JSON gives lists where the dataclass has tuples)."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [option for option in arguments if option is not type(None)]
        return _convert(options[0], value) if len(options) == 1 else value
    if origin is list:
        return [_convert(arguments[0], entry) for entry in value]
    if origin is tuple:
        items = [arguments[0]] * len(value) if arguments[1:] == (Ellipsis,) else arguments
        return tuple(_convert(item, entry) for item, entry in zip(items, value))
    if origin is dict:
        return {key: _convert(arguments[1], entry) for key, entry in value.items()}
    if dataclasses.is_dataclass(hint):
        return _build(hint, value)  # type: ignore[arg-type]
    return value


def as_json(record: object) -> dict[str, Any]:
    """A record of a message as the manifest (and the cache key) write it: its JSON object, nested
    records included, without the fields that hold None (a `CompileOptions` without `trials`)."""
    fields = ((item.name, getattr(record, item.name)) for item in dataclasses.fields(record))  # type: ignore[arg-type]
    return {name: _json_value(value) for name, value in fields if value is not None}


def _json_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return as_json(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(item) for item in value]
    return value


# --- what more than one message names ------------------------------------------------------------


@dataclass(frozen=True)
class CompileOptions:
    """The compile choices that change the generated code: part of the cache key and the manifest."""

    schedules: str  # "tfcheck-default", "metaschedule-or-default" (--tune) or "dlight-gpu" (CUDA)
    trials: int | None = None  # --tune's trials


@dataclass(frozen=True)
class OperatorCount:
    """One TFLite operator of a traced model: how often it occurs, and one output tensor's name
    (which names the TensorFlow node it came from, e.g. `model/conv1/Conv2D`)."""

    op: str  # the builtin's name; `CUSTOM:<name>` for a custom op
    count: int
    example: str

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> OperatorCount:
        """An entry of a manifest's `operators`."""
        return cls(str(entry["op"]), int(entry["count"]), str(entry["example"]))


# --- tracing: compiler/trace/tracing.py ----------------------------------------------------------


@dataclass(frozen=True)
class KeyParts:
    """Everything in the cache key besides the traced graph and the TensorFlow version, which
    only the tracing child knows (`cache.artifacts.cache_key`)."""

    target: BuildTarget
    compile_options: CompileOptions
    versions: dict[str, str]  # without "tensorflow"

    def versions_with(self, tensorflow: str) -> dict[str, str]:
        """The versions that go into the key and the manifest."""
        return {**self.versions, "tensorflow": tensorflow}


# Shape entries (`shapes=`, the config's): per entry, one shape per input tensor.
ShapeEntry = list[list[int]]
# Bounds of a symbolic dimension (`dims=`, the config's): (min, max), max None for no upper bound.
Bounds = tuple[int, int | None]


@dataclass(frozen=True)
class TraceRequest:
    root: str  # put first on sys.path to import `module`
    module: str
    qualname: str
    path: str  # the source file, as the user would type it (messages)
    work_dir: str
    key: KeyParts
    config_shapes: list[ShapeEntry] | None = None  # the config's shape entries for this function
    # The artifact cache: with it, the child stops right after freezing when the cache holds the
    # artifact already; without it (a dry run, which reports the operators) it never does.
    cache_dir: str | None = None
    # A method: the module-level name of the instance (`qualname` is then `<instance>.<method>`,
    # or the name of a module-level `tfcheck.aot(<instance>.<method>)`).
    instance: str | None = None
    # A SavedModel folder: `qualname` is then the signature's name, `module` the folder's
    # name as an identifier, and nothing is imported.
    saved_model: str | None = None
    config_dims: dict[str, Bounds] | None = None  # the config's bounds of symbolic dimensions
    # Unknown dimensions become symbolic dimensions of one artifact (False: the per-shape
    # fallback, one artifact per shape entry, after the symbolic build failed).
    symbolic: bool = True
    # How the weights reach the converter (`tracing.prepare`): "auto", or "constants" when a build
    # with the weights as inputs failed and the driver tries again with them frozen.
    weights: str = "auto"

    @property
    def label(self) -> str:
        return f"{self.module}.{self.qualname}"


@dataclass(frozen=True)
class TracedVariant:
    """One shape entry, traced and frozen; converted (with `io.npz`) unless `cached`."""

    dir: str
    inputs: list[TensorSpec]  # symbolic dimensions by name
    graph_sha256: str
    captures_fingerprint: str
    key: str
    cached: bool = False
    outputs: list[TensorSpec] = field(default_factory=list)
    output_structure: Node = field(default_factory=dict)
    operators: list[OperatorCount] = field(default_factory=list)
    input_structure: list[Node] = field(default_factory=list)  # one node per argument
    dims: dict[str, SymbolicDim] | None = None  # symbolic dimensions: bounds and the sizes verified
    # weight inputs after the user's (`weights.npz` in `dir`); 0: the weights are frozen in the model
    weights: int = 0
    # the model is a float64 function's float32 twin, to be imported as float64 (`float64_twin.py`)
    float64: bool = False
    # why the weights are frozen although the function would take them as inputs: the failure of an
    # earlier build of this variant with them as inputs (`ArtifactCache.lifted_failure`)
    frozen_because: str | None = None
    # which unknown dimensions the function cannot run at their smallest size, and what they were
    # raised to (`symbolic.runnable_bounds`), for the build's report
    bounds_raised: str | None = None
    # per input, the range [low, high) its test values were drawn from where the build chose one: [0,
    # rows) for an int input that indexes a table (`bridge.index_tables`), or `values=`; None where
    # it is the default's (`bridge.generate_inputs`); None: every input's is
    input_values: list[tuple[float, float] | None] | None = None


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


@dataclass(frozen=True)
class SymbolicFailure:
    """A symbolic trace that the converter refused (an operator it takes only at known sizes):
    what the driver needs to fall back to the shape entries, or to say how to write some."""

    dims: dict[str, SymbolicDim]
    inputs: list[TensorSpec]
    has_shape_entries: bool


@dataclass(frozen=True)
class Stage:
    """A child has begun a stage (import, trace, convert, compile, verify): what it is doing, and
    what is still to come, which a crash or a hang in it is reported with; for a stage in native
    code that may crash (TensorFlow's converter), what to try then, and for a symbolic conversion
    what falls back; and where the stage's own output begins in the child's log, so that a crash
    quotes that output, not what the module's import printed before it."""

    name: str
    doing: str | None
    before: str | None = None
    advice: str | None = None
    symbolic: SymbolicFailure | None = None
    log_offset: int | None = None


@dataclass(frozen=True)
class ChildError:
    """A step that failed in its child: the message for the user, the TensorFlow or TFLite operator
    it names if any, and for a symbolic trace the converter refused, what falls back."""

    message: str
    op: str | None = None
    symbolic: SymbolicFailure | None = None


# --- compiling: compiler/build/compile.py --------------------------------------------------------


@dataclass(frozen=True)
class TuningOptions:
    """--tune's settings (`tuning/metaschedule.py`)."""

    trials: int
    database_dir: str
    rpc_tracker: str | None = None  # HOST:PORT: measure on the tracker's devices
    rpc_key: str | None = None


@dataclass(frozen=True)
class CompileRequest:
    variant_dir: str  # a TracedVariant's dir: model.tflite and io.npz
    target: BuildTarget
    out_dir: str  # where lib.so goes
    tuning: TuningOptions | None = None
    inputs: list[TensorSpec] | None = None  # the variant's input specs (symbolic dimensions by name)
    dims: dict[str, SymbolicDim] | None = None  # the variant's symbolic dimensions (TracedVariant.dims)
    weights: int = 0  # the model's weight inputs, bound from `weights.npz` (TracedVariant.weights)
    float64: bool = False  # the model is a float32 twin to import as float64 (TracedVariant.float64)


@dataclass(frozen=True)
class Comparison:
    """The compiled library's outputs against TensorFlow's (`build/verify.py`): the largest errors,
    whether every element is within tolerance (None: not run, a CUDA build without a GPU), and
    what failed where."""

    passed: bool | None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    message: str = ""


@dataclass(frozen=True)
class FatbinEntry:
    """One entry of a fatbin: machine code (`cubin`, `sm_90`) or PTX (`ptx`, `compute_90`)."""

    kind: str
    arch: str


@dataclass(frozen=True)
class DeviceCode:
    """A CUDA artifact's device code (`build/cuda.py`): compiled fatbins, or TVM's own format."""

    format: str  # "fatbin", or "tvm" when TVM left no CUDA source to compile
    arch: str
    fatbin_sha256: list[str]
    entries: list[FatbinEntry]  # the entries of every fatbin


@dataclass(frozen=True)
class WholeModel:
    """How the tuned model fared against the default one as a whole (`tuning/model_timing.py`)."""

    kept: str  # "tuned" or "default"
    tuned_ms: float | None = None  # median latencies, when the race ran
    default_ms: float | None = None
    why: str | None = None  # why the race did not run


@dataclass(frozen=True)
class TuningSummary:
    """What tuning did for one artifact: the manifest's `tuning` (docs/artifact-format.md)."""

    database: str
    tasks: int
    tasks_reused: int
    tasks_tuned: int
    tasks_kept_default: int
    tasks_of_unknown_size: int
    trials: int
    seconds: float
    whole_model: WholeModel | None = None


@dataclass(frozen=True)
class RefusedSchedule:
    rule: str
    code_size: int  # the estimated TIR nodes after unrolling


@dataclass(frozen=True)
class BudgetFallback:
    """A kernel whose first-choice schedule was over the code-size budget (`schedules/budget.py`)."""

    kernel: str
    schedule: str  # the schedule used instead, or "unscheduled"
    refused: list[RefusedSchedule]
    budget: int


@dataclass(frozen=True)
class KernelRecord:
    """What the build knows of one kernel of a CPU artifact (`schedules.kernel_table`), for
    `tfcheck bench --profile` to name beside its time."""

    kernel: str  # the PrimFunc's name, as the Relax VM calls it
    rule: str  # the schedule rule that scheduled it, "metaschedule" (tuned) or "unscheduled"
    buffers: str  # its parameters' shapes, "1x19x19x728 91x1x1x728x8 ..." (a symbolic extent by name)
    multiply_adds: int | None  # per call, of its convolutions, dense layers and matmuls; None: none, or unknown


# The file beside a CPU artifact's library that holds its `KernelTable` (docs/artifact-format.md).
KERNELS = "kernels.json"


@dataclass(frozen=True)
class KernelTable:
    """Every kernel of one CPU artifact: its `KERNELS` file, written by the compile child."""

    kernels: list[KernelRecord]


@dataclass(frozen=True)
class CompileResult:
    tvm: str
    compile_seconds: float
    verify: Comparison
    cpu_features: list[str] | None = None  # CPU targets
    device_code: DeviceCode | None = None  # CUDA targets
    tuning: TuningSummary | None = None  # tuned builds
    budget_fallbacks: list[BudgetFallback] = field(default_factory=list)  # kernels over the code-size budget
    library_weights: int = 0  # the constants `main` takes from the artifact's weights file (0: no file)


# --- benchmarking: compiler/bench/latency.py -----------------------------------------------------


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
    inputs: list[TensorSpec]  # concrete shapes
    budget: Budget
    outputs_path: str
    turns: list[int]  # the child's ends of its turn pipes, go and done (compiler/bench/turns.py)
    artifact: str | None = None  # the artifact folder, for the tvm backends
    input_values: list[tuple[float, float] | None] | None = None  # the manifest's (TracedVariant.input_values)


@dataclass(frozen=True)
class BenchResult:
    median_ms: float
    p10_ms: float
    p90_ms: float
    runs: int
    setup_s: float


# --- profiling: compiler/bench/profile.py --------------------------------------------------------


@dataclass(frozen=True)
class ProfileRequest:
    artifact: str  # the artifact folder
    inputs: list[TensorSpec]  # concrete shapes
    budget: Budget


@dataclass(frozen=True)
class KernelTime:
    """One kernel's share of an inference, with what the build recorded of it."""

    kernel: str
    calls: int  # per inference
    ms: float  # per inference, all its calls
    rule: str  # "vm" for the VM's own functions (allocations), "unknown" without the build's record
    buffers: str
    gflops: float | None  # from the recorded multiply-adds; None where they are not known


@dataclass(frozen=True)
class ProfileResult:
    median_ms: float  # one inference with its kernels timed
    runs: int
    kernels: list[KernelTime]  # slowest first
