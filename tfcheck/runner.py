"""A lint run: discover files -> one job each -> the project pass -> one RunResult.

This module schedules the analyses (tfcheck/analysis.py) that the project pass (tfcheck/project.py)
asks for: from the cache when it can, in a process pool when there is enough left to do, inline
otherwise. With a cache (tfcheck/cache.py), a file whose stat matches the manifest is answered without
being read, and a file whose content was analysed before (same roots, config, rules) without being
parsed. With a shard, every file still takes part in the project pass, but files of other shards are
only summarised (their calls into other modules), never checked by the rules nor reported.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tfcheck.analysis import analyze, selected_rules
from tfcheck.cache import LintCache, content_hash, stat_signature
from tfcheck.config import Config
from tfcheck.engine import ParseFailure
from tfcheck.files import discover
from tfcheck.findings import FileResult, RunResult
from tfcheck.jobs import FileJob, make_jobs
from tfcheck.project import analyze_project
from tfcheck.reading import read_file
from tfcheck.rule import Rule
from tfcheck.shard import Shard

POOL_THRESHOLD_BYTES = 400_000  # below this, starting worker processes costs more than it saves
CHUNKS_PER_WORKER = 16  # small chunks, biggest files first: no worker is left alone with a long tail


def lint_paths(paths: Sequence[Path], config: Config, *, jobs: int | None = None, force_exclude: bool = False,
               cache_dir: Path | None = None, shard: Shard | None = None) -> RunResult:
    """Lint files and folders. The public entry point of the linter (also used by `tfcheck build`).

    `cache_dir`: use and update the lint cache there (None: no cache). `shard`: report only the files
    of that shard; the project pass still sees every file.
    """
    started = time.time()
    found = discover(paths, config, force_exclude)
    cache = LintCache.open(cache_dir, config) if cache_dir is not None else None
    analyzer = Analyzer(config, jobs, cache)
    all_jobs = make_jobs(found.files, config, shard)
    try:
        results = analyze_project(all_jobs, analyzer.run)
    finally:
        analyzer.close()
    if cache is not None:
        cache.save_manifest({os.path.abspath(job.path): results[job.display].read_as for job in all_jobs
                             if results[job.display].read_as is not None}, started, analyzer.manifest)
    run = _run_result([results[job.display] for job in all_jobs if job.report])
    run.path_errors = found.errors
    run.analyzed = analyzer.analyzed
    return run


def _run_result(reported: Sequence[FileResult]) -> RunResult:
    run = RunResult(files=len(reported))
    for result in reported:
        run.findings.extend(result.findings)
        run.suppressed.extend(result.suppressed)
        run.errors.extend(result.errors)
        run.lines += result.lines
    run.findings.sort(key=lambda f: f.sort_key)
    return run


def analyze_cached(job: FileJob, config: Config, rules: Sequence[Rule], cache: LintCache | None) -> FileResult:
    """Read a file once; answer from the cache when its content was analysed before, else analyse it."""
    try:
        data, info = read_file(job.path, job.display)
    except ParseFailure:
        return analyze(job, config, rules)
    sha = content_hash(data)
    result = cache.load_result(job, sha) if cache is not None else None
    if result is None:
        result = analyze(job, config, rules, data)
        if cache is not None and not result.errors:
            cache.store_result(job, sha, result)
    result.read_as = (stat_signature(info), sha)
    return result


_worker_state: dict[str, object] = {}


def _init_worker(config: Config, cache: LintCache | None, rules: Sequence[Rule]) -> None:
    _worker_state.update(config=config, rules=rules, cache=cache)


def _analyze_in_worker(job: FileJob) -> FileResult:
    state = _worker_state
    return analyze_cached(job, state["config"], state["rules"], state["cache"])  # type: ignore[arg-type]


def default_jobs() -> int:
    """The cores this process may use (a container's CPU set, not the host's core count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Analyzer:
    """Runs `analyze` over many jobs: from the stat manifest when it can, in worker processes when the
    remaining work is large enough, inline otherwise."""

    def __init__(self, config: Config, jobs: int | None, cache: LintCache | None = None) -> None:
        self.config = config
        self.jobs = jobs if jobs is not None else default_jobs()
        self._rules: list[Rule] | None = None
        self.cache = cache
        self.manifest = cache.load_manifest() if cache is not None else {}
        self.analyzed = 0
        self._pool: ProcessPoolExecutor | None = None

    @property
    def rules(self) -> list[Rule]:
        """The rules, imported on the first file that needs analysing (a warm run may need none)."""
        if self._rules is None:
            self._rules = selected_rules(self.config)
        return self._rules

    def run(self, jobs: Sequence[FileJob]) -> list[FileResult]:
        """The results of `jobs`, in their order."""
        results: list[FileResult | None] = [self._from_manifest(job) for job in jobs]
        missing = [i for i, result in enumerate(results) if result is None]
        for i, result in zip(missing, self._analyze([jobs[i] for i in missing])):
            results[i] = result
        self.analyzed += sum(1 for i in missing if not results[i].cached)  # type: ignore[union-attr]
        return results  # type: ignore[return-value]

    def _from_manifest(self, job: FileJob) -> FileResult | None:
        """The cached result of a file whose stat is unchanged since a run recorded it; never reads it."""
        if self.cache is None:
            return None
        row = self.manifest.get(os.path.abspath(job.path))
        if row is None:
            return None
        try:
            signature = stat_signature(os.stat(job.path))
        except OSError:
            return None
        if signature != row[0]:
            return None
        result = self.cache.load_result(job, row[1])
        if result is not None:
            result.read_as = row
        return result

    def _analyze(self, jobs: Sequence[FileJob]) -> list[FileResult]:
        sizes = [_size(job) for job in jobs]
        if self.jobs <= 1 or len(jobs) < 2 or sum(sizes) < POOL_THRESHOLD_BYTES:
            return [analyze_cached(job, self.config, self.rules, self.cache) for job in jobs]
        if self._pool is None:
            # the rules are imported here, once: forked workers inherit the modules
            self._pool = ProcessPoolExecutor(self.jobs, initializer=_init_worker,
                                             initargs=(self.config, self.cache, self.rules))
        order = sorted(range(len(jobs)), key=lambda i: -sizes[i])
        chunksize = max(1, len(jobs) // (self.jobs * CHUNKS_PER_WORKER))
        results: list[FileResult | None] = [None] * len(jobs)
        for i, result in zip(order, self._pool.map(_analyze_in_worker, [jobs[i] for i in order], chunksize=chunksize)):
            results[i] = result
        return results  # type: ignore[return-value]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()


def _size(job: FileJob) -> int:
    try:
        return job.path.stat().st_size
    except OSError:
        return 0
