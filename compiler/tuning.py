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
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from tfcheck.compiler.schedules import schedule_module

logger = logging.getLogger(__name__)

_WORKLOADS = "database_workload.json"
_RECORDS = "database_tuning_record.json"
_LOCK = "lock"
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


def tune(
    mod: tvm.IRModule,
    target: tvm.target.Target,
    *,
    trials: int,
    database_dir: Path,
    rpc: RpcConfig | None = None,
    max_trials_per_task: int | None = None,
) -> tvm.IRModule:
    """Tune `mod` for `target` and return it with the best known schedules, ready for `tvm.compile`.

    `database_dir` is the shared root (see `default_database_root`); records go to the target's
    folder inside it. Tasks already in the database are not tuned again.
    """
    return tune_module(
        mod,
        target,
        trials=trials,
        database_dir=database_dir,
        rpc=rpc,
        max_trials_per_task=max_trials_per_task,
    ).mod


def tune_module(
    mod: tvm.IRModule,
    target: tvm.target.Target,
    *,
    trials: int,
    database_dir: Path,
    rpc: RpcConfig | None = None,
    max_trials_per_task: int | None = None,
) -> TuningResult:
    """`tune`, also reporting how many tasks were reused or tuned and how long it took."""
    if trials < 0:
        raise ValueError(f"trials must be >= 0, got {trials}")
    start = time.perf_counter()
    db_dir = target_database_dir(database_dir, target)
    _prepare_database_dir(db_dir, target)
    with target:
        lowered = _pre_tuning_passes()(mod)
    tasks = _tunable_tasks(lowered, target)
    with _locked(db_dir, exclusive=False):
        database = _open_database(db_dir)
    missing = [t for t in tasks if not _has_record(database, t, target)]
    tuned_trials = 0
    if missing and trials > 0:
        tuned_trials = _tune_missing(missing, target, trials, max_trials_per_task, rpc, db_dir)
        with _locked(db_dir, exclusive=False):
            database = _open_database(db_dir)
    scheduled = _apply_database(lowered, target, database)
    result = TuningResult(
        mod=scheduled,
        database_dir=db_dir,
        tasks_total=len(tasks),
        tasks_reused=len(tasks) - len(missing),
        tasks_tuned=len(missing) if tuned_trials else 0,
        trials=tuned_trials,
        seconds=time.perf_counter() - start,
    )
    logger.info(
        "tuning: %d tasks, %d reused, %d tuned with %d trials in %.1f s (database %s)",
        result.tasks_total,
        result.tasks_reused,
        result.tasks_tuned,
        result.trials,
        result.seconds,
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
        _atomic_write(described, text + "\n")


def _atomic_write(path: Path, text: str) -> None:
    """Write by rename, so a concurrent reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(tmp, 0o644)  # mkstemp makes it private; the database is shared
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(db_dir: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold the database's file lock: shared to read its files, exclusive to append to them."""
    with open(db_dir / _LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _open_database(db_dir: Path) -> ms.database.JSONDatabase:
    """Load a JSON database (its files are read once, here)."""
    return ms.database.JSONDatabase(
        str(db_dir / _WORKLOADS), str(db_dir / _RECORDS), allow_missing=True
    )


def _pre_tuning_passes() -> tvm.transform.Pass:
    """The passes of TVM's `static_shape_tuning` pipeline before tuning: legalize and fuse."""
    return tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.CanonicalizeBindings(),
            relax.get_pipeline("zero"),
        ]
    )


def _tunable_tasks(mod: tvm.IRModule, target: tvm.target.Target) -> list:
    """The fused operators of `mod` that MetaSchedule can tune (already scheduled ones excluded)."""
    tasks = ms.relax_integration.extract_tasks(mod, target)
    return [t for t in tasks if not t.mod.attrs.get("tirx.is_scheduled", False)]


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
            builder=ms.builder.LocalBuilder(f_build=_build_candidate, timeout_sec=_BUILD_TIMEOUT_S),
            runner=_runner(rpc),
        )
        records = private.get_all_tuning_records()
        with _locked(db_dir, exclusive=True):
            _merge(records, _open_database(db_dir))
    return len(records)


def _drop_unnamed_log_handlers() -> None:
    """Remove handlers without a name from MetaSchedule's logger before it configures it again.

    Every tuning run re-creates MetaSchedule's loggers with `logging.config.dictConfig`, listing
    the handlers found on its logger by name; an unnamed one (pytest's log capture attaches two)
    makes that fail with `'NoneType' object has no attribute 'format'`, so it cannot stay anyway.
    """
    metaschedule = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in [h for h in metaschedule.handlers if h.get_name() is None]:
        metaschedule.removeHandler(handler)


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


def _runner(rpc: RpcConfig | None) -> ms.runner.Runner:
    """Measure on this machine, or on a device the RPC tracker hands out for `rpc.key`."""
    if rpc is None:
        return ms.runner.LocalRunner()
    config = ms.runner.RPCConfig(
        tracker_host=rpc.tracker_host,
        tracker_port=rpc.tracker_port,
        tracker_key=rpc.key,
        session_timeout_sec=rpc.session_timeout_s,
    )
    return ms.runner.RPCRunner(rpc_config=config)


def _merge(records: list, shared: ms.database.JSONDatabase) -> None:
    """Append a private database's records to the shared one (caller holds the exclusive lock)."""
    for record in records:
        workload = shared.commit_workload(record.workload.mod)
        shared.commit_tuning_record(
            ms.database.TuningRecord(
                record.trace, workload, record.run_secs, record.target, record.args_info
            )
        )


def _apply_database(
    mod: tvm.IRModule, target: tvm.target.Target, database: ms.database.Database
) -> tvm.IRModule:
    """Replace each operator with its best tuned schedule; the rest get the default schedules.

    Tuned functions are marked `tirx.is_scheduled`, which the default schedules leave alone.
    """
    with target, database:
        tuned = relax.transform.MetaScheduleApplyDatabase()(mod)
    return schedule_module(tuned, target)
