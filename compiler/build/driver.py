"""`tfcheck build` in the main process: discover, lint, trace, look up, compile, verify, store.

Nothing here imports TensorFlow; TVM is imported only for the host target (unless the cache
recorded it for this machine, `compiler/build/targets.py`) and the importer's operator table (for
functions that are traced). Each function goes through its own child processes (`compiler/trace/tracing.py`, then
`compiler/build/compile.py`), and every failure becomes a `BuildRecord` with a message, so one broken
function never stops the others.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tfcheck import __version__
from tfcheck.compiler.build.export import bundle_runtime, export_artifact, runtime_record, shape_tag
from tfcheck.compiler.build.targets import TargetChoice, TargetError
from tfcheck.compiler.cache.artifacts import ArtifactCache, sources_digest
from tfcheck.compiler.cache.fastkey import recall, remember
from tfcheck.compiler.frontend.importer import unimportable
from tfcheck.compiler.frontend.top_k_order import order_hint, top_ks
from tfcheck.compiler.process.child import ChildOutcome, allow_children, run_child, stop_children, warm_up
from tfcheck.compiler.process.messages import (Bounds, CompileOptions, CompileRequest, CompileResult, KeyParts,
                                               OperatorCount, ShapeEntry, TracedVariant, TraceRequest, TraceResult,
                                               TuningOptions, as_json)
from tfcheck.compiler.process.target import BuildTarget
from tfcheck.compiler.trace.discover import AnnotatedFunction
from tfcheck.compiler.trace.symbolic import entries_example
from tfcheck.config import Config
from tfcheck.runtime.digest import file_sha256
from tfcheck.runtime.manifest import (FORMAT_VERSION, LIBRARY, WEIGHTS_FORMAT_VERSION, Manifest, SymbolicDim, TensorSpec,
                                      Verification)
from tfcheck.runtime.paths import UnsafePathError, check_name
from tfcheck.runtime.weights import WEIGHTS

if TYPE_CHECKING:
    from tfcheck.findings import Finding


@dataclass
class BuildOptions:
    """What the command line (and config) decided for this run."""

    targets: TargetChoice  # resolved once, for every function
    cache: ArtifactCache
    out_dir: Path | None = None
    lint: bool = True
    dry_run: bool = False
    shapes: dict[str, list[ShapeEntry]] = field(default_factory=dict)  # config: qualname -> entries
    dims: dict[str, dict[str, Bounds]] = field(default_factory=dict)  # config: qualname -> dimension bounds
    tuning: TuningOptions | None = None
    config: Config | None = None  # for the lint gate
    timeout: float = 1800.0
    jobs: int = 1  # functions built at once (`jobs_for` caps --jobs by memory)


@dataclass
class BuildRecord:
    """One row of the final table: one function, one shape entry, one target."""

    function: str  # module.qualname
    name: str
    target: str
    status: str  # built, cached, failed, checked (dry run)
    seconds: float = 0.0
    ops: int | None = None
    operators: list[OperatorCount] = field(default_factory=list)
    unsupported: list[OperatorCount] = field(default_factory=list)
    inputs: list[TensorSpec] = field(default_factory=list)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    verified: bool | None = None
    size: int | None = None
    artifact: str | None = None
    exported: str | None = None
    message: str | None = None
    op: str | None = None
    tuning: dict[str, Any] | None = None  # the manifest's `tuning` (tuned builds)
    budget_fallbacks: list[dict[str, Any]] = field(default_factory=list)  # the manifest's, if any
    dims: dict[str, SymbolicDim] | None = None  # symbolic dimensions: bounds and the sizes verified
    fallback: bool = False  # a symbolic build that failed can fall back to the shape entries


class Reporter(Protocol):
    def stage(self, function: AnnotatedFunction, stage: str) -> None: ...

    def done(self, function: AnnotatedFunction, records: list[BuildRecord]) -> None: ...


# The compiler's modules, every stage folder's, all of which may decide the generated code: a list
# of the "code generators" alone had missed the symbolic importer, the TFLite conversion and four
# others, so a changed importer returned the artifacts of the old one.
COMPILER_ROOT = Path(__file__).resolve().parents[1]
COMPILE_STEP = "tfcheck.compiler.build.compile"  # the compiling child's module


def versions() -> dict[str, str]:
    """The tool versions that go into the cache key and the manifest (TensorFlow's is added by
    the tracing child), with a hash of the compiler's sources (a changed schedule gets a new key
    even at the same version number)."""
    return {"tfcheck": __version__, "compiler_sources": sources_digest(COMPILER_ROOT),
            "tvm": importlib.metadata.version("apache-tvm"),
            "tvm_ffi": importlib.metadata.version("apache-tvm-ffi")}


def key_parts(options: BuildOptions, target: BuildTarget) -> KeyParts:
    """What the cache key holds besides the graph and TensorFlow's version."""
    return KeyParts(target, compile_options(options, target), versions())


def compile_options(options: BuildOptions, target: BuildTarget) -> CompileOptions:
    """The compile choices that change the generated code, for the cache key."""
    if target.device == "cuda":
        return CompileOptions("dlight-gpu")
    if options.tuning:
        return CompileOptions("metaschedule-or-default", options.tuning.trials)
    return CompileOptions("tfcheck-default")


def build_all(functions: list[AnnotatedFunction], options: BuildOptions, reporter: Reporter) -> list[BuildRecord]:
    """Build every function, up to `options.jobs` at once (each in its own child processes); the
    records come back in the functions' order whatever order they finish in, failures included."""
    lint = _LintGate(options.config) if options.lint else None
    work_root = Path(tempfile.mkdtemp(prefix="tfcheck-build-"))
    allow_children()

    clashes = export_clashes(functions) if options.out_dir is not None else {}

    def build(index: int, function: AnnotatedFunction) -> list[BuildRecord]:
        started = time.monotonic()
        if index in clashes:
            result = [BuildRecord(function.label, function.artifact_name, options.targets.default.label, "failed",
                                  message=clashes[index])]
        else:
            result = _build_for_targets(function, options, lint, work_root / str(index),
                                        lambda stage: reporter.stage(function, stage))
        for record in result:
            record.seconds = round(time.monotonic() - started, 2)
        reporter.done(function, result)
        return result

    pool = ThreadPoolExecutor(max_workers=max(1, options.jobs), thread_name_prefix="tfcheck-build")
    try:
        futures = [pool.submit(build, index, function) for index, function in enumerate(functions)]
        return [record for future in futures for record in future.result()]
    except BaseException:
        # Ctrl-C (or a bug here): the children run in their own sessions and would outlive us.
        pool.shutdown(wait=False, cancel_futures=True)
        stop_children()
        raise
    finally:
        pool.shutdown(wait=True)
        shutil.rmtree(work_root, ignore_errors=True)


def export_clashes(functions: list[AnnotatedFunction]) -> dict[int, str]:
    """Functions whose artifact name an earlier function of this build already has, by index, with
    the message that fails them: with --out, one would replace the other's folder and
    `tfcheck.load` could give only one of them that name (the first keeps it, so the outcome does
    not depend on which job finishes first)."""
    first: dict[str, AnnotatedFunction] = {}
    clashes = {}
    for index, function in enumerate(functions):
        name = function.artifact_name
        if function.problem:  # fails before anything is built (a missing signature): exports nothing
            continue
        if name not in first:
            first[name] = function
            continue
        clashes[index] = (f"{function.label}: its artifact name {name!r} is also {first[name].label}'s; "
                          "the artifacts of one --out folder need distinct names (each is a folder there "
                          "and a name of `tfcheck.load`): give one of them @tfcheck.aot(name=...)")
    return clashes


# The memory one more job may need at once: its tracing or compiling child peaked at 0.6 GiB on the
# zoo's small models (docs/benchmarks.md, "Incremental and parallel builds"); the large ones
# (ResNet50, EfficientNetB0) were not measured, hence the margin.
JOB_MEMORY = 2 * 1024**3


def jobs_for(requested: int | None, available: int | None = None) -> tuple[int, str | None]:
    """How many functions to build at once: `requested` (default: the cores this process may use),
    capped so that each job has `JOB_MEMORY` of the memory available now; with a note when capped."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    wanted = requested or cores
    if available is None:
        import psutil

        available = int(psutil.virtual_memory().available)
    jobs = max(1, min(wanted, available // JOB_MEMORY))
    if jobs == wanted:
        return jobs, None
    return jobs, (f"building {jobs} function{'s' if jobs > 1 else ''} at once instead of {wanted}: "
                  f"{available / 1024**3:.1f} GiB of memory available, a build may take "
                  f"{JOB_MEMORY / 1024**3:.0f} GiB")


def _build_for_targets(function: AnnotatedFunction, options: BuildOptions, lint: _LintGate | None,
                       work_dir: Path, on_stage: Callable[[str], None]) -> list[BuildRecord]:
    """Build `function` for each of its targets; with several, each export name says its target."""
    try:
        # A dry run compiles nothing, so it traces once, whatever the targets.
        targets = [options.targets.default] if options.dry_run else options.targets.for_function(function.targets)
    except TargetError as error:
        failed = BuildRecord(function.label, function.name or function.qualname, ",".join(function.targets or []),
                             "failed", message=f"{function.label}: targets={function.targets!r}: {error}")
        return [failed]
    records = []
    for number, target in enumerate(targets):
        suffix = f"__{target.label.replace(':', '-')}" if len(targets) > 1 else ""
        records += _build_one(function, options, target, lint, work_dir / str(number), on_stage, suffix)
    if lint is not None and function.saved_model:
        for record in records:
            record.message = record.message or f"{function.label}: not linted: a SavedModel holds graphs, not " \
                                               "the Python source that the lint gate reads"
    return records


def _build_one(function: AnnotatedFunction, options: BuildOptions, target: BuildTarget, lint: _LintGate | None,
               work_dir: Path, on_stage: Callable[[str], None], export_suffix: str = "") -> list[BuildRecord]:
    failed = BuildRecord(function.label, function.name or function.qualname, target.label, "failed")
    if function.problem:
        failed.message = function.problem
        return [failed]
    if lint is not None and not function.saved_model:
        on_stage("lint")
        blocking = lint.errors_in(function)
        if blocking:
            failed.message = f"{function.label}: error-level findings would be frozen into the artifact " \
                             "(--no-lint skips this check):\n" + "\n".join(blocking)
            return [failed]
    request = _trace_request(function, options, target, work_dir)
    records = _trace_and_build(function, options, request, failed, on_stage, export_suffix)
    failed_symbolic = next((record for record in records if record.dims and record.status == "failed"), None)
    if failed_symbolic is None:
        return records
    if not failed_symbolic.fallback:
        # An operator that takes no symbolic size (named in the message): concrete shapes work.
        failed_symbolic.message = (
            f"{(failed_symbolic.message or '').rstrip('.')}; to build one artifact per size instead, list the "
            "concrete shapes: "
            + entries_example([list(spec.shape) for spec in failed_symbolic.inputs], function.label,
                              not function.saved_model, failed_symbolic.dims))
        return records
    # The symbolic artifact failed (an operator that takes no symbolic size, or a mismatch):
    # the shape entries still give one artifact each, as without symbolic dimensions.
    per_shape = replace(request, symbolic=False, work_dir=str(work_dir / "per-shape"))
    records = _trace_and_build(function, options, per_shape, failed, on_stage, export_suffix)
    for record in records:
        record.message = "; ".join(filter(None, [
            f"{function.label}: no symbolic artifact ({failed_symbolic.message}); built one artifact per "
            "shape entry instead", record.message]))
    return records


def _trace_and_build(function: AnnotatedFunction, options: BuildOptions, request: TraceRequest,
                     failed: BuildRecord, on_stage: Callable[[str], None], export_suffix: str) -> list[BuildRecord]:
    """Trace (or recall the trace), then build each traced variant for the request's target."""
    traced = None if options.dry_run else recall(options.cache, request)
    if traced is None:
        if not options.dry_run:
            warm_up(COMPILE_STEP, options.timeout)  # TVM's import overlaps the trace
        outcome = run_child("tfcheck.compiler.trace.tracing", request, TraceResult, Path(request.work_dir),
                            on_stage=on_stage, timeout=options.timeout, forked=True)
        traced = outcome.result
        if traced is None:
            return [_trace_failure(function, failed, outcome)]
        if not options.dry_run:
            remember(options.cache, request, traced)
    try:
        export_names = _export_names(traced.name, traced.variants, export_suffix)
    except UnsafePathError as error:
        failed.message = f"{function.label}: {error}"
        return [failed]
    records = [
        _build_variant(function, options, request.key.target, traced, variant, export_name, on_stage)
        for variant, export_name in zip(traced.variants, export_names)
    ]
    for record, variant in zip(records, traced.variants):
        record.dims = variant.dims
        record.fallback = traced.has_shape_entries
        if variant.bounds_raised:
            record.message = "; ".join(filter(None, [f"{function.label}: {variant.bounds_raised}", record.message]))
        if variant.frozen_because:
            _say_frozen(function, record, variant.frozen_because)
    lifted = [(record, variant) for record, variant in zip(records, traced.variants)
              if variant.weights and record.status == "failed"]
    if not lifted:
        return records
    # The weights as inputs took a route the frozen model does not (an operator TVM imports only
    # with constant operands): build it frozen, as without lifting, and say why.
    frozen = replace(request, weights="constants", work_dir=str(Path(request.work_dir) / "frozen"))
    records = _trace_and_build(function, options, frozen, failed, on_stage, export_suffix)
    for record in records:
        _say_frozen(function, record, lifted[0][0].message or "")
    if all(record.status in ("built", "cached") for record in records):
        for record, variant in lifted:  # the next build of these keys goes straight to the frozen route
            options.cache.keep_lifted_failure(variant.key, record.message or "")
    return records


def _trace_failure(function: AnnotatedFunction, failed: BuildRecord, outcome: ChildOutcome[TraceResult]) -> BuildRecord:
    """The failed record of a trace that failed; when the symbolic route failed to convert, with
    its dims and inputs, so that `_build_one` falls back to the shape entries or says how."""
    record = replace(failed, message=f"{function.label}: {outcome.error}", op=outcome.op)
    if outcome.symbolic:
        record.dims, record.inputs = outcome.symbolic.dims, outcome.symbolic.inputs
        record.fallback = outcome.symbolic.has_shape_entries
    return record


def _say_frozen(function: AnnotatedFunction, record: BuildRecord, lifted_failure: str) -> None:
    """Put in front of a built (or cached) record's message why its weights are frozen into the
    graph; after a failed one's, that the build with the weights as inputs failed before it (in
    the same words, or in its own). A failure never begins "built with": RetinaNet's unsorted top k
    and yolov3-tf2's soft-NMS failed both ways and read as if they had built (issue 42)."""
    if record.status == "failed":
        same = _failure_line(lifted_failure, function.label) == _failure_line(record.message or "", function.label)
        record.message = "; ".join(filter(None, [record.message, (
            "the build with the weights as inputs, tried first, failed the same way" if same else
            f"the build with the weights as inputs, tried first, failed too: {lifted_failure}")]))
        return
    record.message = "; ".join(filter(None, [
        f"{function.label}: built with its weights frozen into the graph, which costs more memory "
        f"(with the weights as inputs: {lifted_failure})", record.message]))


def _failure_line(message: str, label: str) -> str:
    """A failure's first line without the function's label (`label: ` may lead it twice) and with
    its numbers left out, to tell whether two builds failed alike: RetinaNet's two mismatches
    differed only in how many of 1600000 elements were off (1585614, 1585659)."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    while line.startswith(f"{label}: "):
        line = line[len(label) + 2:]
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", line)


def _export_names(name: str, variants: list[TracedVariant], suffix: str) -> list[str]:
    """Each variant's folder name under --out (`name[__<shape tag>][__<target>]`), checked before
    anything is compiled: UnsafePathError for a name that is not a plain name (a `../x` would
    replace a folder outside --out)."""
    check_name(name, "artifact name")
    several = len(variants) > 1
    export_names = [(f"{name}__{shape_tag(variant.inputs)}" if several else name) + suffix for variant in variants]
    for export_name in export_names:
        check_name(export_name, "export name")
    return export_names


def _trace_request(function: AnnotatedFunction, options: BuildOptions, target: BuildTarget,
                   work_dir: Path) -> TraceRequest:
    """What the tracing child needs; the cache folder lets it stop right after freezing when the
    cache already holds the artifact (not in a dry run, which reports the operators)."""
    config_shapes = options.shapes.get(function.label) or options.shapes.get(function.qualname)
    config_dims = options.dims.get(function.label, options.dims.get(function.qualname))  # {} counts: all unbounded
    return TraceRequest(root=str(function.root), module=function.module, qualname=function.qualname,
                        path=display_path(function.path), work_dir=str(work_dir), key=key_parts(options, target),
                        config_shapes=config_shapes, config_dims=config_dims,
                        cache_dir=None if options.dry_run else str(options.cache.root),
                        instance=function.instance,
                        saved_model=str(function.path.resolve()) if function.saved_model else None)


def _build_variant(function: AnnotatedFunction, options: BuildOptions, target: BuildTarget, traced: TraceResult,
                   variant: TracedVariant, export_name: str, on_stage: Callable[[str], None]) -> BuildRecord:
    cache = options.cache
    if variant.cached:
        return _from_cache(function, options, target, variant.key, traced.name, export_name)
    record = BuildRecord(function.label, traced.name, target.label, "checked",
                         ops=sum(op.count for op in variant.operators),
                         operators=variant.operators, unsupported=unimportable(variant.operators),
                         inputs=variant.inputs)
    if record.unsupported:
        record.status = "failed"
        record.op = ", ".join(op.op for op in record.unsupported)
        record.message = f"{function.label}: TVM's TFLite importer cannot import " + "; ".join(
            f"{op.op} (from TensorFlow node {op.example!r})" for op in record.unsupported)
        return record
    if options.dry_run:
        return record
    manifest, corrupt = cache.lookup(variant.key)
    if manifest is None:
        manifest = _compile_and_store(function, options, target, traced, variant, record, on_stage)
        if manifest is None:
            return record
        record.status = "built"
        if corrupt:
            record.message = f"rebuilt: the cached entry was corrupt ({corrupt})"
    else:  # stored by a concurrent build since the tracing step looked
        record.status = "cached"
    _finish(record, manifest, cache.entry(variant.key), options, export_name)
    return record


def _from_cache(function: AnnotatedFunction, options: BuildOptions, target: BuildTarget, key: str, name: str,
                export_name: str) -> BuildRecord:
    """The record of an artifact that the tracing step found in the cache."""
    record = BuildRecord(function.label, name, target.label, "cached")
    manifest, problem = options.cache.lookup(key)
    if manifest is None:
        record.status = "failed"
        record.message = f"{function.label}: the cached artifact {key[:12]} went away during the build " \
                         f"({problem or 'removed'}); run the build again"
        return record
    record.operators = [OperatorCount.from_json(entry) for entry in manifest.operators or ()]
    record.ops = sum(op.count for op in record.operators)
    record.inputs = list(manifest.inputs)
    _finish(record, manifest, options.cache.entry(key), options, export_name)
    return record


def _finish(record: BuildRecord, manifest: Manifest, folder: Path, options: BuildOptions,
            export_name: str) -> None:
    """Fill in what the artifact says, and export it when --out was given."""
    _fill_verify(record, manifest.verify)
    record.tuning = manifest.tuning
    record.budget_fallbacks = list(manifest.budget_fallbacks or ())
    record.artifact = str(folder.resolve())
    record.size = (folder / manifest.library).stat().st_size
    if options.out_dir is not None:
        problem = bundle_runtime(manifest.runtime, options.out_dir)
        if problem is not None:
            record.status, record.message = "failed", f"{record.function}: {problem}"
            return
        record.exported = str(export_artifact(folder, options.out_dir, export_name))


def _compile_and_store(function: AnnotatedFunction, options: BuildOptions, target: BuildTarget, traced: TraceResult,
                       variant: TracedVariant, record: BuildRecord, on_stage: Callable[[str], None]) -> Manifest | None:
    """Compile into a staging folder; store only a verified (or, for CUDA without a GPU,
    not runnable here) artifact. Fills `record` with the failure otherwise."""
    cache = options.cache
    staging = cache.new_staging()
    request = CompileRequest(variant_dir=variant.dir, target=target, out_dir=str(staging),
                             tuning=options.tuning, inputs=variant.inputs, dims=variant.dims,
                             weights=variant.weights, float64=variant.float64)
    compiled = run_child(COMPILE_STEP, request, CompileResult, Path(variant.dir),
                         on_stage=on_stage, timeout=options.timeout, forked=True)
    result = compiled.result
    if result is None or result.verify.passed is False:
        cache.discard_staging(staging)
        record.status = "failed"
        if result is None:
            record.message = f"{function.label}: {compiled.error}"
        else:
            _fill_verify(record, _verification(result))
            record.message = (f"{function.label}: the artifact does not match TensorFlow: {result.verify.message}"
                              f"{_top_k_order_hint(variant)}")
        return None
    manifest = _manifest(function, options, target, traced, variant, result, staging / LIBRARY)
    cache.commit(staging, manifest)
    return manifest


def _top_k_order_hint(variant: TracedVariant) -> str:
    """Why a function with a top k may not match: its order where TensorFlow leaves it to its kernel
    (`tf.math.top_k(..., sorted=False)` of fewer than the axis), or near-equal values trading
    places (`frontend/top_k_order.py`)."""
    model = Path(variant.dir) / "model.tflite"
    if not model.is_file() or not any(operator.op == "TOPK_V2" for operator in variant.operators):
        return ""
    return order_hint(top_ks(model))


def _manifest(function: AnnotatedFunction, options: BuildOptions, target: BuildTarget, traced: TraceResult,
              variant: TracedVariant, result: CompileResult, library: Path) -> Manifest:
    """The manifest of docs/artifact-format.md, with `operators`, `compile_options`,
    `compile_seconds`, for CUDA `device_code`, for tuned builds `tuning`, and `budget_fallbacks`
    when a kernel's schedule was over the code-size budget."""
    return Manifest(
        key=variant.key,
        function=traced.name,
        qualname=traced.qualname,
        module=function.module,
        source_file=display_path(function.path),
        source_fingerprint=traced.source_fingerprint,
        captures_fingerprint=variant.captures_fingerprint,
        graph_fingerprint=variant.graph_sha256,
        inputs=tuple(variant.inputs),
        outputs=tuple(variant.outputs),
        output_structure=variant.output_structure,
        input_structure=tuple(variant.input_structure),
        instance=function.instance,
        target=target.json,
        device=target.device,
        cpu_features=tuple(result.cpu_features) if result.cpu_features is not None else None,
        versions=traced.versions,
        runtime=runtime_record(target.device),
        library=LIBRARY,
        library_sha256=file_sha256(library),
        weights=_weights_record(library.parent / WEIGHTS, result.library_weights),
        format_version=WEIGHTS_FORMAT_VERSION if result.library_weights else FORMAT_VERSION,
        tuned=bool(options.tuning),
        compile_options=as_json(compile_options(options, target)),
        verify=_verification(result),
        operators=tuple(as_json(operator) for operator in variant.operators),
        compile_seconds=result.compile_seconds,
        device_code=as_json(result.device_code) if result.device_code else None,
        tuning=as_json(result.tuning) if result.tuning else None,
        budget_fallbacks=tuple(as_json(fallback) for fallback in result.budget_fallbacks) or None,
        dims=variant.dims or None,
        input_values=tuple(None if each is None else tuple(each) for each in variant.input_values)
        if variant.input_values else None,
        created=now_utc(),
    )


def _weights_record(path: Path, count: int) -> dict[str, Any] | None:
    """The manifest's `weights` (tfcheck/runtime/weights.py) for the weights file the compile
    child wrote with `count` values; None when it wrote none."""
    if not count:
        return None
    return {"file": WEIGHTS, "size": path.stat().st_size, "sha256": file_sha256(path), "count": count}


def _verification(result: CompileResult) -> Verification:
    """The manifest's `verify`: the comparison without its message."""
    return Verification(result.verify.max_abs_error, result.verify.max_rel_error, result.verify.passed)


def now_utc() -> str:
    """The manifest's `created`: UTC, to the second."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it is inside it (as the user would type it)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _fill_verify(record: BuildRecord, verify: Verification) -> None:
    record.max_abs_error = verify.max_abs_error
    record.max_rel_error = verify.max_rel_error
    record.verified = verify.passed


class _LintGate:
    """Runs the linter once per file and answers which error-level findings fall in a function."""

    def __init__(self, config: Config | None) -> None:
        self._config = config
        self._by_file: dict[Path, list[Finding]] = {}
        self._lock = threading.Lock()  # parallel builds share the gate; each file is linted once

    def errors_in(self, function: AnnotatedFunction) -> list[str]:
        from tfcheck.findings import Severity
        from tfcheck.runner import lint_paths

        path = function.path.resolve()
        with self._lock:
            if path not in self._by_file:
                self._by_file[path] = lint_paths([path], self._config, jobs=1, force_exclude=False).findings
        return [f"{f.path}:{f.line}: {f.code} {f.message}" for f in self._by_file[path]
                if f.severity == Severity.ERROR and f.line <= function.end_line and f.end_line >= function.line]
