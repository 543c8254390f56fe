"""A lint run: files -> parse -> facts -> project pass -> rules -> findings.

Each file is analysed on its own (in a process pool when there are many), producing its findings and
a small summary of the calls its graph code makes into other modules. The project pass resolves those
calls against the modules of the run; a file whose functions turn out to be graph code because another
file calls them from graph code is analysed again with those extra roots, until nothing changes.

With a cache (tfcheck/cache.py), a file whose stat matches the manifest is answered without being read,
and a file whose content was analysed before (same roots, config, rules) without being parsed. With a
shard, every file still takes part in the project pass, but files of other shards are only summarised
(their calls into other modules), never checked by the rules nor reported.
"""

from __future__ import annotations

import errno
import gc
import os
import re
import stat
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from tfcheck.cache import LintCache, content_hash, decode_findings, stat_signature
from tfcheck.config import Config
from tfcheck.engine import FileFacts, ParseFailure
from tfcheck.engine.modules import module_name_for, module_stem
from tfcheck.engine.source import SourceFile, decode_source, parse_source
from tfcheck.files import discover
from tfcheck.notebook import NotebookSource, is_notebook, load_notebook
from tfcheck.findings import FileResult, Finding, InternalError, RunResult, Severity, describe_exception
from tfcheck.rule import Rule, all_rules, matches
from tfcheck.shard import Shard
from tfcheck.suppress import is_suppressed, suppressions

# A file can hold graph code, or code that rules check outside graph code, only if it mentions one of
# these. Files without them are still parsed (syntax errors are reported everywhere) but not analysed
# unless graph code in another file calls into them.
_CANDIDATE = re.compile(
    r"function|map_fn|while_loop|switch_case|\bcond\b|\bscan\b|fold[lr]|\.map\(|\.filter\(|flat_map"
    r"|interleave|\.reduce\(|_step\b|\bcall\b|\bcase\b|eagerly"
)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
POOL_THRESHOLD_BYTES = 400_000  # below this, starting worker processes costs more than it saves
CHUNKS_PER_WORKER = 16  # small chunks, biggest files first: no worker is left alone with a long tail


@dataclass(frozen=True)
class FileJob:
    """One file to analyse: where it is, how to show it, and roots found by the project pass.

    `report` is False for files of other shards: only their calls into other modules are wanted.
    """

    path: Path
    display: str  # shown to users: relative to the current folder when inside it
    relative: str  # matched against per-file-ignores and sharded: relative to the config's folder
    module: str
    is_package: bool
    extra_roots: tuple[tuple[str, str], ...] = ()
    report: bool = True


def selected_rules(config: Config) -> list[Rule]:
    """Instances of the rules that `select`/`ignore` leave on (per-file ignores apply later)."""
    return [rule() for rule in all_rules()
            if matches(rule.code, config.select) and not matches(rule.code, config.ignore)
            and not rule.reported_by_engine]


def analyze(job: FileJob, config: Config, rules: Sequence[Rule], data: bytes | None = None) -> FileResult:
    """Parse one file, compute its facts, run the rules, apply suppressions. Never raises.

    `data` is the file's content when the caller has read it already.
    """
    with _cyclic_gc_paused():
        return _analyze_file(job, config, rules, data)


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while one file is analysed; what it leaves is collected after.

    A file's tree and facts are hundreds of thousands of long-lived objects: each full collection
    traverses them all, and the caches the rules fill trigger one every time the heap grows by a
    quarter. That took half the time of a 50k-line file, and none of it is garbage until the file is done.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _analyze_file(job: FileJob, config: Config, rules: Sequence[Rule], data: bytes | None) -> FileResult:
    result = FileResult(job.display)
    text = ""
    notebook: NotebookSource | None = None
    try:
        data = read_file(job.path, job.display)[0] if data is None else data
        if is_notebook(job.path):
            notebook = load_notebook(job.display, data)
            text = notebook.text
        else:
            text = decode_source(job.display, data)
        candidate = bool(job.extra_roots) or _CANDIDATE.search(text) is not None
        if not job.report and not candidate:
            return result  # another shard's file: only its calls into other files matter, and it has none
        result.lines = text.count("\n") + 1
        source = notebook.source if notebook is not None else parse_source(job.display, text)
    except ParseFailure as failure:
        result.findings.append(parse_failure_finding(failure))
        return _with_source(_filter(result, config, job.relative, ""), text)
    except Exception as exc:  # noqa: BLE001 - one file's crash must not stop the run
        result.errors.append(InternalError(job.display, "reading the file", describe_exception(exc)))
        return result
    if notebook is not None:
        return _in_cells(_analyze_source(job, config, rules, source, candidate, result), notebook, config, job.relative)
    return _analyze_source(job, config, rules, source, candidate, result)


def _analyze_source(job: FileJob, config: Config, rules: Sequence[Rule], source: SourceFile, candidate: bool,
                    result: FileResult) -> FileResult:
    """Facts and rules on a parsed file; `candidate`: whether the file can hold anything to report."""
    if not candidate:
        return result
    try:
        facts = FileFacts(source, job.module, config.engine, dict(job.extra_roots), job.is_package)
    except RecursionError:
        result.findings.append(parse_failure_finding(ParseFailure(job.display, "too deeply nested to analyse")))
        return result
    except Exception as exc:  # noqa: BLE001 - one file's crash must not stop the run
        result.errors.append(InternalError(job.display, "the engine", describe_exception(exc)))
        return result
    result.external_calls = [(c.target, c.caller, c.line) for c in facts.graph.external_calls]
    if not job.report:
        return result
    for rule in rules:
        try:
            result.findings.extend(rule.check(facts))
        except Exception as exc:  # noqa: BLE001
            result.errors.append(InternalError(job.display, f"rule {rule.code} ({rule.name})", describe_exception(exc)))
    return _with_source(_filter(result, config, job.relative, source.text), source.text)


def _in_cells(result: FileResult, notebook: NotebookSource, config: Config, relative: str) -> FileResult:
    """A notebook's findings moved from the module of its code cells to their cells, with the cells that
    did not parse reported."""
    failures = _filter(FileResult(result.path, findings=list(notebook.failures)), config, relative, "").findings
    result.findings = sorted([notebook.to_cell(f) for f in result.findings] + failures, key=lambda f: f.sort_key)
    result.suppressed = [notebook.to_cell(f) for f in result.suppressed]
    return result


def _with_source(result: FileResult, text: str) -> FileResult:
    """Give each finding the text of its line, so that no reporter reads the file a second time."""
    if not (result.findings or result.suppressed):
        return result
    lines = _LINE_BREAK.split(text)  # the breaks `ast` counts: str.splitlines also splits on \f, \x1c, ...

    def attach(finding: Finding) -> Finding:
        return replace(finding, source=lines[finding.line - 1]) if 1 <= finding.line <= len(lines) else finding

    result.findings = [attach(f) for f in result.findings]
    result.suppressed = [attach(f) for f in result.suppressed]
    return result


def read_file(path: Path, display: str) -> tuple[bytes, os.stat_result]:
    """A file's bytes and the stat of what was read. Anything but a readable regular file is a ParseFailure.

    Opened non-blocking and checked with fstat before reading, so a FIFO or a device named `.py` is
    reported instead of hanging the run.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ParseFailure(display, f"cannot read file: {_open_error(path, exc)}") from None
    with open(descriptor, "rb", closefd=True) as stream:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ParseFailure(display, "cannot read file: not a regular file")
        try:
            return stream.read(), info
        except OSError as exc:
            raise ParseFailure(display, f"cannot read file: {exc.strerror or exc}") from None


def _open_error(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return "broken symbolic link"
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    return exc.strerror or str(exc)


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


def analyze_cached(job: FileJob, config: Config, rules: Sequence[Rule], cache: LintCache | None) -> FileResult:
    """Read a file once; answer from the cache when its content was analysed before, else analyse it."""
    try:
        data, info = read_file(job.path, job.display)
    except ParseFailure:
        return analyze(job, config, rules)
    sha = content_hash(data)
    result = _lookup(cache, job, sha) if cache is not None else None
    if result is None:
        result = analyze(job, config, rules, data)
        if cache is not None and not result.errors:
            cache.store(_entry_key(cache, job, sha, job.report), _payload(result))
    result.read_as = (stat_signature(info), sha)
    return result


def _entry_key(cache: LintCache, job: FileJob, sha: str, report: bool) -> str:
    return cache.entry_key(sha, (job.display, job.relative, job.module, job.is_package, job.extra_roots, report))


def _lookup(cache: LintCache, job: FileJob, sha: str) -> FileResult | None:
    """A cached result for this content; a summary request is also answered by a full entry."""
    for report in (True, False) if not job.report else (True,):
        data = cache.load(_entry_key(cache, job, sha, report))
        if data is not None:
            result = _from_payload(job.display, data)
            if result is not None:
                return result
    return None


def _payload(result: FileResult) -> dict[str, object]:
    return {"lines": result.lines, "findings": [f.to_dict(with_source=True) for f in result.findings],
            "suppressed": [f.to_dict(with_source=True) for f in result.suppressed],
            "external_calls": [list(call) for call in result.external_calls]}


def _from_payload(display: str, data: dict[str, object]) -> FileResult | None:
    """Rebuild a FileResult from a cache entry; None when anything in it is malformed."""
    try:
        calls = [(str(target), str(caller), int(line)) for target, caller, line in data["external_calls"]]  # type: ignore[union-attr]
        lines = data["lines"]
        if not isinstance(lines, int):
            return None
        return FileResult(display, lines, decode_findings(data["findings"]), decode_findings(data["suppressed"]),
                          external_calls=calls, cached=True)
    except (KeyError, TypeError, ValueError):
        return None


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
        result = _lookup(self.cache, job, row[1])
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


def make_job(path: Path, config: Config) -> FileJob:
    module, is_package = module_name_for(path.absolute())
    return FileJob(path, display_path(path), config.relative(path), module, is_package)


def display_path(path: Path) -> str:
    """How a path is shown: relative to the current folder when inside it, else as given."""
    try:
        return path.absolute().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.as_posix()


def lint_paths(paths: Sequence[Path], config: Config, *, jobs: int | None = None, force_exclude: bool = False,
               cache_dir: Path | None = None, shard: Shard | None = None) -> RunResult:
    """Lint files and folders. The public entry point of the linter (also used by `tfcheck build`).

    `cache_dir`: use and update the lint cache there (None: no cache). `shard`: report only the files
    of that shard; the project pass still sees every file.
    """
    started = time.time()
    found = discover(paths, config, force_exclude)
    run = RunResult(path_errors=found.errors)
    cache = LintCache.open(cache_dir, config) if cache_dir is not None else None
    analyzer = Analyzer(config, jobs, cache)
    try:
        all_jobs = _jobs(found.files, config, shard)
        results = {job.display: result for job, result in zip(all_jobs, analyzer.run(all_jobs))}
        _resolve_cross_file(all_jobs, results, analyzer)
    finally:
        analyzer.close()
    if cache is not None:
        cache.save_manifest({os.path.abspath(job.path): results[job.display].read_as for job in all_jobs
                             if results[job.display].read_as is not None}, started, analyzer.manifest)
    reported = {job.display for job in all_jobs if job.report}
    for result in results.values():
        if result.path in reported:
            run.findings.extend(result.findings)
            run.suppressed.extend(result.suppressed)
            run.errors.extend(result.errors)
            run.lines += result.lines
    run.files = len(reported)
    run.analyzed = analyzer.analyzed
    run.findings.sort(key=lambda f: f.sort_key)
    return run


class _JobMaker:
    """`make_job` for many files, resolving each folder once: pathlib work per file (resolving every
    path component, the cwd, the package chain) was most of the time of a warm run."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.cwd = os.getcwd()
        self.root = str(config.root.resolve())
        self._folders: dict[str, tuple[str, str]] = {}  # folder -> (its real path, its package name)

    def __call__(self, path: Path) -> FileJob:
        absolute = os.path.abspath(path)
        folder, name = os.path.split(absolute)
        real_folder, package = self._folder(folder)
        real = os.path.realpath(absolute) if os.path.islink(absolute) else os.path.join(real_folder, name)
        is_package = name == "__init__.py"
        stem = module_stem(name)
        module = package if is_package else f"{package}.{stem}" if package else stem
        return FileJob(path, _inside(absolute, self.cwd) or path.as_posix(),
                       _inside(real, self.root) or path.as_posix(), module, is_package)

    def _folder(self, folder: str) -> tuple[str, str]:
        if folder not in self._folders:
            package = module_name_for(Path(folder, "__init__.py"))[0]
            self._folders[folder] = (os.path.realpath(folder), package)
        return self._folders[folder]


def _inside(path: str, base: str) -> str | None:
    """`path` relative to `base` (POSIX), or None when it is not inside it."""
    if path == base:
        return "."
    prefix = base.rstrip(os.sep) + os.sep
    return path[len(prefix):].replace(os.sep, "/") if path.startswith(prefix) else None


def _jobs(files: Sequence[Path], config: Config, shard: Shard | None) -> list[FileJob]:
    """One job per file shown under a distinct path (a symlink and its target are one file)."""
    jobs: dict[str, FileJob] = {}
    make = _JobMaker(config)
    for path in files:
        job = make(path)
        if shard is not None:
            job = replace(job, report=shard.contains(job.relative))
        jobs.setdefault(job.display, job)
    return list(jobs.values())


def _resolve_cross_file(all_jobs: Sequence[FileJob], results: dict[str, FileResult], analyzer: Analyzer) -> None:
    """Mark functions called from graph code in other files as graph code, to a fixed point.

    Two files of a run can have the same module name (scripts in folders without `__init__.py`): each
    is linted, and calls into that name resolve to the first of them.
    """
    by_module: dict[str, FileJob] = {}
    for job in all_jobs:
        by_module.setdefault(job.module, job)
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
