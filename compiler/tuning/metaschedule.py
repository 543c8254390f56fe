"""MetaSchedule tuning with a persistent tuning database per target, locally or through an RPC tracker.

Why a database per target: MetaSchedule looks records up by the structural hash of a task and
ignores the target, so records tuned for one CPU would silently be applied to another. Each target
therefore gets its own folder, named after a hash of its canonical JSON, under one root that is
shared by every function and project (default `~/.cache/tfcheck/tuning/`). A rebuild, or another
model with the same operator shapes, finds its tasks there and tunes nothing.

Why tuning goes to a private database first: MetaSchedule's JSON database appends records to its
files as it measures them, which is not safe when two builds tune for the same target at once. Each
run tunes into a temporary database and merges its records into the shared one under an exclusive
file lock; readers take a shared lock only while the database files are read.

Why the default schedules compete: a search of a few dozen trials per operator often ends slower
than `compiler/schedules/`' hand-written micro-kernels. Every tuned operator's default schedule is
therefore measured too, with the same builder and runner, and stored as a record in a second
database of the same folder (named after a hash of the schedules' sources, so a changed rule is
measured again). The build takes, per operator, the faster of the two, so a tuned build is never
slower than the default build, operator by operator. Both kinds of schedule pack constant weights
at build time: tuning runs on the default build's fused module, whose `layout_free_buffers` make
MetaSchedule's `RewriteLayout` postprocessor pre-pack them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import logging
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from tfcheck.compiler import schedules
from tfcheck.compiler.cache.artifacts import sources_digest
from tfcheck.compiler.schedules import blocks, default_schedule, fold_packed_weights, legalize_and_fuse, schedule_module
from tfcheck.atomic import locked, write_atomic
from tfcheck.compiler.process.messages import TuningSummary
from tfcheck.runtime.threads import use_all_cores

logger = logging.getLogger(__name__)

_TUNED = "database"  # MetaSchedule's own file names: database_workload.json, database_tuning_record.json
_LOCK = "lock"
# Where candidates run: tuning is for CPU targets (GPU builds take dlight's schedules).
_DEVICE_TYPE = "cpu"
# Seconds a builder process may take for one candidate (TVM's default, 30 s, is too short for a
# large fused convolution on a busy 2-core machine).
_BUILD_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class RpcConfig:
    """Where to measure candidates: a TVM RPC tracker and the key its devices registered with."""

    tracker_host: str
    tracker_port: int
    key: str
    session_timeout_s: float = 60.0

    @classmethod
    def parse(cls, tracker: str, key: str) -> RpcConfig:
        """Build a config from the CLI's `--rpc-tracker host:port` and `--rpc-key KEY`."""
        host, sep, port = tracker.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"--rpc-tracker must be host:port, got {tracker!r}")
        if not key:
            raise ValueError("--rpc-key must name the key the RPC servers registered with")
        return cls(host, int(port), key)


@dataclass(frozen=True)
class TuningResult:
    """A tuned module and what it cost, so builds can record how long tuning took."""

    mod: tvm.IRModule
    database_dir: Path
    tasks_total: int
    tasks_reused: int
    tasks_tuned: int
    trials: int
    seconds: float
    tasks_kept_default: int = 0
    tasks_taking_tuned: int = 0  # operators whose tuned schedule measured faster than the default
    tasks_of_unknown_size: int = 0  # operators over sizes known only at run time: not tunable (`_tunable_tasks`)

    def summary(self) -> TuningSummary:
        """What the manifest records about the tuning run (docs/artifact-format.md); the race of
        the whole models (`model_timing.py`) comes later."""
        return TuningSummary(database=str(self.database_dir), tasks=self.tasks_total, tasks_reused=self.tasks_reused,
                             tasks_tuned=self.tasks_tuned, tasks_kept_default=self.tasks_kept_default,
                             tasks_of_unknown_size=self.tasks_of_unknown_size, trials=self.trials,
                             seconds=round(self.seconds, 3))


def default_database_root() -> Path:
    """The shared root of all tuning databases: `$XDG_CACHE_HOME/tfcheck/tuning` or `~/.cache/...`."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tfcheck" / "tuning"


def target_database_dir(root: Path, target: tvm.target.Target) -> Path:
    """The folder of `target`'s database under `root`: a readable prefix plus a hash of its JSON."""
    canonical = json.dumps(_target_json(target), sort_keys=True, default=str)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    readable = "-".join(str(p) for p in (target.kind.name, target.attrs.get("mcpu", "")) if p)
    return Path(root) / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', readable)}-{digest}"


def tune_module(
    mod: tvm.IRModule,
    target: tvm.target.Target,
    *,
    trials: int,
    database_dir: Path,
    rpc: RpcConfig | None = None,
    max_trials_per_task: int | None = None,
) -> TuningResult:
    """Tune `mod` for `target` and return it with the fastest known schedules, ready for `tvm.compile`,
    with what it cost.

    `database_dir` is the shared root (see `default_database_root`); records go to the target's
    folder inside it. Tasks already in the database are not tuned again.
    """
    if trials < 0:
        raise ValueError(f"trials must be >= 0, got {trials}")
    start = time.perf_counter()
    db_dir = target_database_dir(database_dir, target)
    _prepare_database_dir(db_dir, target)
    lowered = legalize_and_fuse(mod, target)
    tasks, of_unknown_size = _tunable_tasks(lowered, target)
    tuned, defaults = _open_databases(db_dir)
    missing = [t for t in tasks if not _has_record(tuned, t, target)]
    tuned_trials = 0
    if missing and trials > 0:
        tuned_trials = _tune_missing(missing, target, trials, max_trials_per_task, rpc, db_dir)
        tuned, defaults = _open_databases(db_dir)
    unmeasured = [t for t in tasks if _has_record(tuned, t, target) and not _has_record(defaults, t, target)]
    if unmeasured:
        _measure_defaults(unmeasured, target, rpc, db_dir)
        tuned, defaults = _open_databases(db_dir)
    best = ms.database.UnionDatabase(tuned, defaults)
    scheduled = fold_packed_weights(_apply_database(lowered, target, best), target)
    with_tuned = [t for t in tasks if _has_record(tuned, t, target)]
    kept_default = sum(_default_is_faster(tuned, defaults, t, target) for t in with_tuned)
    result = TuningResult(
        mod=scheduled,
        database_dir=db_dir,
        tasks_total=len(tasks),
        tasks_reused=len(tasks) - len(missing),
        tasks_tuned=len(missing) if tuned_trials else 0,
        trials=tuned_trials,
        seconds=time.perf_counter() - start,
        tasks_kept_default=kept_default,
        tasks_taking_tuned=len(with_tuned) - kept_default,
        tasks_of_unknown_size=of_unknown_size,
    )
    logger.info(
        "tuning: %d tasks, %d reused, %d tuned with %d trials in %.1f s, %d kept the default "
        "schedule (faster than the tuned one); database %s",
        result.tasks_total,
        result.tasks_reused,
        result.tasks_tuned,
        result.trials,
        result.seconds,
        result.tasks_kept_default,
        db_dir,
    )
    return result


def _target_json(target: tvm.target.Target) -> dict:
    """The target as a plain dict: the canonical form that names its database."""
    return dict(target.export())


def _prepare_database_dir(db_dir: Path, target: tvm.target.Target) -> None:
    """Create the folder and a `target.json` that tells a person which target the records are for."""
    db_dir.mkdir(parents=True, exist_ok=True)
    described = db_dir / "target.json"
    if not described.exists():
        text = json.dumps(_target_json(target), sort_keys=True, indent=2, default=str)
        write_atomic(described, text + "\n")


def _open_database(db_dir: Path, name: str) -> ms.database.JSONDatabase:
    """Load one JSON database of the folder (its files are read once, here)."""
    return ms.database.JSONDatabase(
        str(db_dir / f"{name}_workload.json"), str(db_dir / f"{name}_tuning_record.json"), allow_missing=True
    )


def _open_databases(db_dir: Path) -> tuple[ms.database.JSONDatabase, ms.database.JSONDatabase]:
    """The folder's tuned records and its measured default schedules, read under a shared lock."""
    with locked(db_dir / _LOCK, exclusive=False):
        return _open_database(db_dir, _TUNED), _open_database(db_dir, _defaults_name())


@functools.cache
def _defaults_name() -> str:
    """The name of the default schedules' database: a hash of the schedule rules' sources, so
    records of rules that have since changed are not taken for today's default schedules."""
    return f"default-{sources_digest(Path(schedules.__file__).parent)}"


def _tunable_tasks(mod: tvm.IRModule, target: tvm.target.Target) -> tuple[list, int]:
    """The fused operators of `mod` that MetaSchedule can tune (not already scheduled, of static
    shapes), and how many others are over sizes known only at run time. MetaSchedule measures a
    candidate on arrays of the kernel's shapes; on a kernel over a batch or an image of any size
    its search failed and took the whole build with it (`Check failed: (old_rv != nullptr &&
    new_rv != nullptr)`). Such kernels keep their default schedules."""
    tasks = [t for t in ms.relax_integration.extract_tasks(mod, target) if not t.mod.attrs.get("tirx.is_scheduled", False)]
    static = [t for t in tasks if not blocks.shape_vars(t.dispatched[0]["main"])]
    return static, len(tasks) - len(static)


def _has_record(database: ms.database.Database, task, target: tvm.target.Target) -> bool:
    """Whether the database holds a measured schedule for the task (as the apply pass finds it)."""
    return database.query_tuning_record(task.dispatched[0], target, task.task_name) is not None


def _tune_missing(
    tasks: list,
    target: tvm.target.Target,
    trials: int,
    max_trials_per_task: int | None,
    rpc: RpcConfig | None,
    db_dir: Path,
) -> int:
    """Tune `tasks` into a private database, merge it into the shared one, return trials spent.

    When no per-task limit is given, the budget is split evenly: MetaSchedule's gradient scheduler
    leaves whole tasks untuned when `trials < per_task * tasks`.
    """
    per_task = max_trials_per_task or max(1, math.ceil(trials / len(tasks)))
    total = max(trials, per_task * len(tasks)) if max_trials_per_task is None else trials
    if total < per_task * len(tasks):
        logger.warning(
            "tuning: %d trials cannot reach %d tasks x %d per task; some tasks stay untuned",
            total,
            len(tasks),
            per_task,
        )
    _drop_unnamed_log_handlers()
    _import_tensor_intrinsics()
    with tempfile.TemporaryDirectory(dir=db_dir, prefix=".run-") as work_dir:
        contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            tasks, work_dir=work_dir
        )
        private = ms.tune.tune_tasks(
            tasks=contexts,
            task_weights=weights,
            work_dir=work_dir,
            max_trials_global=total,
            max_trials_per_task=per_task,
            num_trials_per_iter=min(64, per_task),
            builder=_builder(),
            runner=_runner(rpc),
        )
        records = private.get_all_tuning_records()
        with locked(db_dir / _LOCK):
            shared = _open_database(db_dir, _TUNED)
            for record in records:
                _commit(shared, record.workload.mod, record.trace, record.run_secs, record.args_info, record.target)
    return len(records)


def _measure_defaults(tasks: list, target: tvm.target.Target, rpc: RpcConfig | None, db_dir: Path) -> None:
    """Build and run each task's default schedule as MetaSchedule measures a candidate, and store
    it (trace and run time) in the folder's default-schedule database."""
    scheduled = [(task, default_schedule(task.task_name, task.dispatched[0]["main"], target)) for task in tasks]
    candidates = [(task, found[0]) for task, found in scheduled if found is not None]
    builds = _builder().build([ms.builder.BuilderInput(sch.mod, target) for _, sch in candidates])
    measured = []
    for (task, sch), built in zip(candidates, builds):
        if built.error_msg:
            logger.warning("tuning: the default schedule of %s did not build: %s", task.task_name, built.error_msg)
            continue
        args = ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True)
        measured.append((task, sch, args, ms.runner.RunnerInput(built.artifact_path, _DEVICE_TYPE, args)))
    try:
        results = [future.result() for future in _runner(rpc).run([inputs for *_, inputs in measured])]
    finally:  # within tuning, MetaSchedule's RemoveBuildArtifact callback does this
        for built in builds:
            if built.artifact_path:
                shutil.rmtree(Path(built.artifact_path).parent, ignore_errors=True)
    with locked(db_dir / _LOCK):
        database = _open_database(db_dir, _defaults_name())
        for (task, sch, args, _), result in zip(measured, results):
            if result.error_msg:
                logger.warning("tuning: the default schedule of %s did not run: %s", task.task_name, result.error_msg)
                continue
            _commit(database, task.dispatched[0], sch.trace, result.run_secs, args, target)


def _default_is_faster(tuned: ms.database.Database, defaults: ms.database.Database, task,
                       target: tvm.target.Target) -> bool:
    """Whether the task's measured default schedule beats its best tuned one (both measured)."""
    best = [db.query_tuning_record(task.dispatched[0], target, task.task_name) for db in (tuned, defaults)]
    if any(record is None for record in best):
        return False
    tuned_secs, default_secs = (sum(map(float, r.run_secs)) / len(r.run_secs) for r in best)
    return default_secs <= tuned_secs


def _drop_unnamed_log_handlers() -> None:
    """Remove handlers without a name from MetaSchedule's logger before it configures it again.

    Every tuning run re-creates MetaSchedule's loggers with `logging.config.dictConfig`, listing
    the handlers found on its logger by name; an unnamed one (pytest's log capture attaches two)
    makes that fail with `'NoneType' object has no attribute 'format'`, so it cannot stay anyway.
    """
    metaschedule = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in [h for h in metaschedule.handlers if h.get_name() is None]:
        metaschedule.removeHandler(handler)


@functools.cache
def _import_tensor_intrinsics() -> None:
    """Import `tvm.s_tir.tensor_intrin` (every `TuneContext` does) in seconds instead of a minute:
    its ~250 TVMScript functions each call `inspect.stack()` (see `frame_lookups_once`)."""
    with frame_lookups_once():
        import tvm.s_tir.tensor_intrin  # noqa: F401


@contextlib.contextmanager
def frame_lookups_once() -> Iterator[None]:
    """Within the block, `inspect.getmodule` looks up a frame whose file is not a module's once per
    file name.

    `inspect.stack()` looks up the module of every frame on the stack. A frame whose file is not a
    module's (`<frozen importlib._bootstrap>` on every import, `<frozen runpy>` under `python -m`,
    `<string>`, TVM's own `<ast>`) is looked up by scanning all of `sys.modules`, again on every
    call: 38 s of the tensor intrinsics' 44 s import in a process that imported TVM alone, more
    where pytest or TensorFlow are loaded. For a frame the answer depends only on the file name (a
    frame has no `__name__` to match a module by), so it is kept.
    """
    scan = inspect.getmodule
    known: dict[str, object] = {}

    def getmodule(obj: object, _filename: str | None = None) -> object:
        if _filename is None or not inspect.isframe(obj) or not _filename.startswith("<"):
            return scan(obj, _filename)
        if _filename not in known:
            known[_filename] = scan(obj, _filename)
        return known[_filename]

    inspect.getmodule = getmodule
    try:
        yield
    finally:
        inspect.getmodule = scan


def _build_candidate(mod: tvm.IRModule, target: tvm.target.Target, _params: dict | None):
    """MetaSchedule's default candidate build, without importing `tvm.s_tir.tensor_intrin`.

    The default build imports every tensor intrinsic (CUDA, ROCm, ARM, ...) in each builder
    process: 30-60 s of TVMScript parsing on this 2-core machine, longer than the builder's
    timeout, so the first candidates fail. Candidates arrive already scheduled (tensorized blocks
    are inlined), so the build does not need the intrinsics registered.
    """
    from tvm.driver import build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target)


def _builder() -> ms.builder.Builder:
    """Build candidates in local worker processes (also for remote measurement: the tracker's
    devices only run what this machine compiled)."""
    return ms.builder.LocalBuilder(f_build=_build_candidate, timeout_sec=_BUILD_TIMEOUT_S)


def _runner(rpc: RpcConfig | None) -> ms.runner.Runner:
    """Measure on this machine (its workers inherit the thread count a loaded artifact gets), or on
    a device the RPC tracker hands out for `rpc.key` (its server's environment sets the threads)."""
    if rpc is None:
        use_all_cores()
        return ms.runner.LocalRunner()
    config = ms.runner.RPCConfig(
        tracker_host=rpc.tracker_host,
        tracker_port=rpc.tracker_port,
        tracker_key=rpc.key,
        session_timeout_sec=rpc.session_timeout_s,
    )
    return ms.runner.RPCRunner(rpc_config=config)


def _commit(database: ms.database.JSONDatabase, workload: tvm.IRModule, trace, run_secs: list,
            args_info: list, target: tvm.target.Target) -> None:
    """Append one measured schedule to a database (the caller holds the exclusive lock)."""
    record = ms.database.TuningRecord(trace, database.commit_workload(workload), run_secs, target, args_info)
    database.commit_tuning_record(record)


def _apply_database(
    mod: tvm.IRModule, target: tvm.target.Target, database: ms.database.Database
) -> tvm.IRModule:
    """Replace each operator with its fastest measured schedule (tuned, or the measured default);
    operators without records get the default schedules.

    Functions taken from the database are marked `tirx.is_scheduled`, which the default schedules leave alone.
    """
    with target, database:
        tuned = relax.transform.MetaScheduleApplyDatabase()(mod)
    return schedule_module(tuned, target)
