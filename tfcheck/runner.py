"""A lint run: files -> parse -> facts -> project pass -> rules -> findings.

Each file is analysed on its own (in a process pool when there are many), producing its findings and
a small summary of the calls its graph code makes into other modules. The project pass resolves those
calls against the modules of the run; a file whose functions turn out to be graph code because another
file calls them from graph code is analysed again with those extra roots, until nothing changes.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from tfcheck.config import Config
from tfcheck.engine import EngineSettings, FileFacts, ParseFailure
from tfcheck.engine.modules import module_name_for
from tfcheck.engine.source import parse_source, read_source
from tfcheck.files import discover
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule, all_rules, matches
from tfcheck.suppress import is_suppressed, suppressions

# A file can hold graph code, or code that rules check outside graph code, only if it mentions one of
# these. Files without them are still parsed (syntax errors are reported everywhere) but not analysed
# unless graph code in another file calls into them.
_CANDIDATE = re.compile(
    r"function|map_fn|while_loop|switch_case|\bcond\b|\bscan\b|fold[lr]|\.map\(|\.filter\(|flat_map"
    r"|interleave|\.reduce\(|_step\b|\bcall\b|\bcase\b|eagerly"
)
POOL_THRESHOLD_BYTES = 400_000  # below this, starting worker processes costs more than it saves


@dataclass(frozen=True)
class FileJob:
    """One file to analyse: where it is, how to show it, and roots found by the project pass."""

    path: Path
    display: str  # shown to users: relative to the current folder when inside it
    relative: str  # matched against per-file-ignores: relative to the config's folder
    module: str
    is_package: bool
    extra_roots: tuple[tuple[str, str], ...] = ()


@dataclass
class InternalError:
    """A crash of tfcheck itself on one file (or one rule on one file). The run goes on."""

    path: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: internal error in {self.where}: {self.message}"


@dataclass
class FileResult:
    """What analysing one file produced."""

    path: str
    lines: int = 0
    findings: list[Finding] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)
    errors: list[InternalError] = field(default_factory=list)
    # calls from graph code into other modules: (qualified target, caller qualname, line)
    external_calls: list[tuple[str, str, int]] = field(default_factory=list)


@dataclass
class RunResult:
    """The outcome of a run."""

    findings: list[Finding] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)
    errors: list[InternalError] = field(default_factory=list)
    path_errors: list[str] = field(default_factory=list)
    files: int = 0
    lines: int = 0

    @property
    def has_errors(self) -> bool:
        return bool(self.errors or self.path_errors)


def selected_rules(config: Config) -> list[Rule]:
    """Instances of the rules that `select`/`ignore` leave on (per-file ignores apply later)."""
    return [rule() for rule in all_rules()
            if matches(rule.code, config.select) and not matches(rule.code, config.ignore)
            and not rule.reported_by_engine]


def analyze(job: FileJob, config: Config, rules: Sequence[Rule]) -> FileResult:
    """Parse one file, compute its facts, run the rules, apply suppressions. Never raises."""
    result = FileResult(job.display)
    try:
        text = read_source(job.path, job.display)
        result.lines = text.count("\n") + 1
        source = parse_source(job.display, text)
    except ParseFailure as failure:
        result.findings.append(parse_failure_finding(failure))
        return _filter(result, config, job.relative, "")
    if not job.extra_roots and not _CANDIDATE.search(text):
        return result
    try:
        facts = FileFacts(source, job.module, config.engine, dict(job.extra_roots), job.is_package)
    except RecursionError:
        result.findings.append(parse_failure_finding(ParseFailure(job.display, "too deeply nested to analyse")))
        return result
    except Exception as exc:  # noqa: BLE001 - one file's crash must not stop the run
        result.errors.append(InternalError(job.display, "the engine", _describe(exc)))
        return result
    result.external_calls = [(c.target, c.caller, c.line) for c in facts.graph.external_calls]
    for rule in rules:
        try:
            result.findings.extend(rule.check(facts))
        except Exception as exc:  # noqa: BLE001
            result.errors.append(InternalError(job.display, f"rule {rule.code} ({rule.name})", _describe(exc)))
    return _filter(result, config, job.relative, text)


def parse_failure_finding(failure: ParseFailure) -> Finding:
    return Finding(failure.path, failure.line, failure.column, failure.line, failure.column,
                   "TFC000", "parse-error", Severity.ERROR, failure.message)


def _filter(result: FileResult, config: Config, relative: str, text: str) -> FileResult:
    """Drop findings ignored for this file; move suppressed ones aside."""
    ignored = config.ignored_codes(relative)
    kept = [f for f in result.findings if matches(f.code, config.select) and not matches(f.code, ignored)]
    directives = suppressions(text) if text else {}
    result.findings = sorted((f for f in kept if not is_suppressed(f, directives)), key=lambda f: f.sort_key)
    result.suppressed = [replace(f, suppressed=True) for f in kept if is_suppressed(f, directives)]
    return result


def _describe(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" ({Path(frame.filename).name}:{frame.lineno})" if frame else ""
    return f"{type(exc).__name__}: {exc}{where}"


_worker_state: dict[str, object] = {}


def _init_worker(config: Config) -> None:
    _worker_state["config"] = config
    _worker_state["rules"] = selected_rules(config)


def _analyze_in_worker(job: FileJob) -> FileResult:
    return analyze(job, _worker_state["config"], _worker_state["rules"])  # type: ignore[arg-type]


class Analyzer:
    """Runs `analyze` over many jobs, in worker processes when the work is large enough."""

    def __init__(self, config: Config, jobs: int | None) -> None:
        self.config = config
        self.jobs = jobs if jobs is not None else (os.cpu_count() or 1)
        self.rules = selected_rules(config)
        self._pool: ProcessPoolExecutor | None = None

    def run(self, jobs: Sequence[FileJob]) -> list[FileResult]:
        if self.jobs <= 1 or len(jobs) < 2 or _total_size(jobs) < POOL_THRESHOLD_BYTES:
            return [analyze(job, self.config, self.rules) for job in jobs]
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.jobs, initializer=_init_worker, initargs=(self.config,))
        chunksize = max(1, len(jobs) // (self.jobs * 8))
        return list(self._pool.map(_analyze_in_worker, jobs, chunksize=chunksize))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()


def _total_size(jobs: Iterable[FileJob]) -> int:
    total = 0
    for job in jobs:
        try:
            total += job.path.stat().st_size
        except OSError:
            pass
    return total


def make_job(path: Path, config: Config) -> FileJob:
    module, is_package = module_name_for(path.absolute())
    return FileJob(path, display_path(path), config.relative(path), module, is_package)


def display_path(path: Path) -> str:
    """How a path is shown: relative to the current folder when inside it, else as given."""
    try:
        return path.absolute().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.as_posix()


def lint_paths(paths: Sequence[Path], config: Config, *, jobs: int | None = None,
               force_exclude: bool = False) -> RunResult:
    """Lint files and folders. The public entry point of the linter (also used by `tfcheck build`)."""
    found = discover(paths, config, force_exclude)
    run = RunResult(path_errors=found.errors)
    analyzer = Analyzer(config, jobs)
    try:
        by_module = {job.module: job for job in map(lambda p: make_job(p, config), found.files)}
        results = {job.display: result for job, result in zip(by_module.values(), analyzer.run(list(by_module.values())))}
        _resolve_cross_file(by_module, results, analyzer)
    finally:
        analyzer.close()
    for result in results.values():
        run.findings.extend(result.findings)
        run.suppressed.extend(result.suppressed)
        run.errors.extend(result.errors)
        run.lines += result.lines
    run.files = len(results)
    run.findings.sort(key=lambda f: f.sort_key)
    return run


def _resolve_cross_file(by_module: dict[str, FileJob], results: dict[str, FileResult], analyzer: Analyzer) -> None:
    """Mark functions called from graph code in other files as graph code, to a fixed point."""
    roots: dict[str, dict[str, str]] = {}
    pending = list(results.values())
    while pending:
        changed: set[str] = set()
        for result in pending:
            for target, caller, line in result.external_calls:
                module, function = _split_target(target, by_module)
                if module is None:
                    continue
                job = by_module[module]
                file_roots = roots.setdefault(job.display, {})
                if function not in file_roots:
                    file_roots[function] = f"called from graph code in {caller} ({result.path}:{line})"
                    changed.add(module)
        jobs = [replace(by_module[m], extra_roots=tuple(sorted(roots[by_module[m].display].items())))
                for m in sorted(changed)]
        pending = analyzer.run(jobs)
        for result in pending:
            results[result.path] = result


def _split_target(target: str, by_module: dict[str, FileJob]) -> tuple[str | None, str]:
    """Split `pkg.mod.Class.method` into the longest module of the run and the rest."""
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        if module in by_module:
            return module, ".".join(parts[cut:])
    return None, target
