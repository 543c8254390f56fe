"""The lint state of each project the server serves, kept warm between edits.

A project is a workspace folder, linted as `tfcheck check FOLDER` run there would lint it (its files as
tfcheck/files.py finds them, the configuration found from the folder), or one open file outside every
folder, linted alone as `tfcheck check FILE` would. Open documents are linted as the editor has them,
saved or not; an open document that `exclude` matches is not linted, as with `--force-exclude` (what
pre-commit does with the files it names).

Each pass is the CLI's own: jobs from tfcheck/jobs.py, the project pass of tfcheck/project.py to its fixed
point, each file analysed by tfcheck/analysis.py. What keeps it warm is a memo of analyses: a file
analysed before with the same content and the same job (the roots, and whatever else the project pass
gave it) is not analysed again. So a change re-analyses the changed file and each file whose job the
change altered, directly or through others, and nothing else, and the results are a cold run's. A file
that other files gave roots in the last pass is expected to get them again: the pass's first round,
which analyses it without them, reads only its summary (the rules are skipped, as for another shard's
file), and only if it ends up given nothing is that first round analysed in full.

A file on disk is read again only when it is known to have changed: the editor says so
(workspace/didChangeWatchedFiles, `Projects.files_changed`), or a save finds its stat changed
(`Projects.refresh_disk`, for editors that do not watch files). Those reads go through the lint cache,
as `tfcheck check` does, so a server started on a tree the CLI linted before reads its results there.

A file that stops parsing keeps its last good summary for the project pass: its parse error is its
one finding, while the functions it made graph code in other files stay graph code until it parses
again. (A parse failure is known by its TFC000 finding: with TFC000 deselected the summary is lost.)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tfcheck.analysis import analyze
from tfcheck.cache import LintCache, default_cache_dir, stat_signature
from tfcheck.config import Config, ConfigError, load_config
from tfcheck.files import discover
from tfcheck.findings import FileResult, Finding, InternalError, at_least
from tfcheck.jobs import FileJob, make_jobs
from tfcheck.project import analyze_project
from tfcheck.rule import Rule
from tfcheck.runner import Analyzer
from tfcheck.server.documents import OpenDocument, source_bytes

PARSE_ERROR = "TFC000"
# Lints new text of an open document with the job its last pass gave it (what `fix_text` re-lints with).
Relint = Callable[[str], list[Finding]]


@dataclass(frozen=True)
class Linted:
    """An open document's outcome: what the CLI would report for it (after `min-severity`)."""

    document: OpenDocument
    findings: list[Finding]
    errors: list[InternalError]
    project: Project | None  # None: `exclude` matches the document, or its configuration is broken


@dataclass(frozen=True)
class _Memo:
    """One analysis: the content it read (bytes of an open document, or a disk file's generation), its
    result, and the last result of this job that parsed, whose summary a parse failure keeps."""

    token: object
    result: FileResult
    good: FileResult | None


class Project:
    """One folder (or one loose file) with its configuration, its files and its memo of analyses."""

    def __init__(self, config: Config, folder: Path | None) -> None:
        self.config = config
        self.folder = folder
        cache = LintCache.open(_cache_dir(config, folder), config) if folder is not None else None
        self._analyzer = Analyzer(config, jobs=1, cache=cache)  # inline: no worker processes in a server
        self._disk_files = discover([folder], config).files if folder is not None else []
        self._jobs: list[FileJob] = []
        self._base: frozenset[FileJob] = frozenset()  # `_jobs`: each file's job before the project pass
        self._jobs_for: tuple[str, ...] | None = None  # the extra (open, undiscovered) files of `_jobs`
        self._memo: dict[FileJob, _Memo] = {}
        self._generation: dict[str, int] = {}  # disk file -> how many times it is known to have changed
        self._stats: dict[str, tuple[int, ...]] = {}  # disk file -> its stat when last read
        self._final_jobs: dict[str, FileJob] = {}  # display -> the job of its last analysis in the last pass

    @property
    def rules(self) -> list[Rule]:
        """The selected rules, imported once (by the runner's Analyzer, which also reads files from disk)."""
        return self._analyzer.rules

    def excludes(self, path: Path) -> bool:
        """Whether `exclude` matches an open file, as `--force-exclude` tests a file named on the command line."""
        return self.config.is_excluded(self.config.relative(path), through_parents=True)

    def lint(self, documents: Sequence[OpenDocument]) -> list[Linted]:
        """A project pass over every file with `documents` as the editor has them; their outcomes."""
        overlays = {os.path.abspath(doc.path): doc for doc in documents if not self.excludes(doc.path)}
        jobs = self._current_jobs(overlays)
        touched: dict[FileJob, _Memo] = {}
        # Files other files gave something last time: likely again, so their first-round analysis
        # (without it) is only read for its summary, and skips the rules.
        summarize = frozenset(display for display, job in self._final_jobs.items() if job not in self._base)
        self._final_jobs = {}
        results = analyze_project(jobs, lambda batch: self._analyze_many(batch, overlays, touched, summarize))
        for job in jobs:  # summarized, yet given nothing this time: that first round is its result, in full
            if job.display in summarize and self._final_jobs.get(job.display) == job:
                results[job.display] = self._analyze_many([job], overlays, touched, frozenset())[0]
        self._memo = touched
        displays = {os.path.abspath(job.path): job.display for job in jobs}
        linted = []
        for doc in documents:
            result = results.get(displays.get(os.path.abspath(doc.path), ""))
            if result is None:
                linted.append(Linted(doc, [], [], None))
            else:
                linted.append(Linted(doc, at_least(result.findings, self.config.min_severity), result.errors, self))
        return linted

    def relint(self, document: OpenDocument) -> Relint:
        """Lint new text of `document` (a Python file's text, or a notebook's JSON) with the job the last
        pass gave it, cross-file roots included."""
        job = self._final_jobs[self._display(document)]

        def relint(text: str) -> list[Finding]:
            data = text.encode("utf-8") if document.notebook else source_bytes(text)
            return analyze(job, self.config, self.rules, data).findings
        return relint

    def files_changed(self, paths: Iterable[Path], created_or_deleted: bool) -> None:
        """Files changed on disk: read them again when next needed; a new or deleted file changes the file list."""
        for path in paths:
            key = os.path.abspath(path)
            self._generation[key] = self._generation.get(key, 0) + 1
        if created_or_deleted and self.folder is not None:
            self._disk_files = discover([self.folder], self.config).files
            self._jobs_for = None

    def refresh_disk(self) -> None:
        """Read again the files whose stat changed since they were read (for editors that watch no files)."""
        changed = [Path(path) for path, signature in self._stats.items() if _stat(path) != signature]
        self.files_changed(changed, created_or_deleted=False)

    def _display(self, document: OpenDocument) -> str:
        key = os.path.abspath(document.path)
        return next(job.display for job in self._jobs if os.path.abspath(job.path) == key)

    def _current_jobs(self, overlays: dict[str, OpenDocument]) -> list[FileJob]:
        """The run's jobs: the folder's files and the open documents it does not find (made once per file set)."""
        known = {os.path.abspath(path) for path in self._disk_files}
        extra = tuple(sorted(path for path in overlays if path not in known))
        if extra != self._jobs_for:
            self._jobs = make_jobs([*self._disk_files, *(Path(path) for path in extra)], self.config)
            self._base = frozenset(self._jobs)
            self._jobs_for = extra
        return self._jobs

    def _analyze_many(self, asked: Sequence[FileJob], overlays: dict[str, OpenDocument],
                      touched: dict[FileJob, _Memo], summarize: frozenset[str]) -> list[FileResult]:
        """`analyze_project`'s analyzer: from the memo when content and job are unchanged; open documents
        from the editor's text, the other files through the runner's Analyzer (and the lint cache).
        A first-round job of a file in `summarize` is analysed as another shard's file is: summary only."""
        jobs = [replace(job, report=False) if job.display in summarize and job in self._base else job for job in asked]
        tokens = {}
        for job, original in zip(jobs, asked):
            document = overlays.get(os.path.abspath(job.path))
            tokens[job] = document.data() if document is not None else self._generation.get(os.path.abspath(job.path), 0)
            self._final_jobs[job.display] = original
        missing = [job for job in jobs if self._memo_of(job, touched, tokens[job]) is None]
        on_disk = [job for job in missing if not isinstance(tokens[job], bytes)]
        fresh = dict(zip(on_disk, self._analyzer.run(on_disk)))
        for job in missing:
            token = tokens[job]
            result = fresh[job] if job in fresh else analyze(job, self.config, self.rules, token)  # type: ignore[arg-type]
            if result.read_as is not None:
                self._stats[os.path.abspath(job.path)] = result.read_as[0]
            previous = touched.get(job) or self._memo.get(job)
            touched[job] = _remembered(result, previous.good if previous is not None else None, token)
        return [touched[job].result for job in jobs]

    def _memo_of(self, job: FileJob, touched: dict[FileJob, _Memo], token: object) -> _Memo | None:
        memo = touched.get(job) or self._memo.get(job)
        if memo is None or memo.token != token:
            return None
        touched[job] = memo
        return memo


def _remembered(result: FileResult, good: FileResult | None, token: object) -> _Memo:
    """A new analysis for the memo: a parse failure reports its error with the last good summary."""
    if not _failed(result):
        return _Memo(token, result, result)
    if good is None:
        return _Memo(token, result, None)
    kept = replace(good, path=result.path, lines=result.lines, findings=result.findings,
                   suppressed=result.suppressed, errors=result.errors, read_as=result.read_as, cached=False)
    return _Memo(token, kept, good)


def _failed(result: FileResult) -> bool:
    """Whether the file could not be analysed at all (unreadable, unparsable): a TFC000 on the file, not a cell."""
    return any(f.code == PARSE_ERROR and f.cell is None for f in (*result.findings, *result.suppressed))


def _stat(path: str) -> tuple[int, ...] | None:
    try:
        return stat_signature(os.stat(path))
    except OSError:
        return None


def _cache_dir(config: Config, folder: Path) -> Path:
    """Where `tfcheck check` run in `folder` keeps its lint cache (`cache-dir`, from the config file's folder)."""
    return default_cache_dir(config) if config.source is not None else folder / config.cache_dir


class Projects:
    """Every project the server lints: one per workspace folder, and one per open file outside them.

    A configuration that does not load leaves the project as it was (or unlinted, before it ever
    loaded) and is reported through `errors`, as `tfcheck check` reports it.
    """

    def __init__(self, folders: Iterable[Path]) -> None:
        self._folders = sorted((Path(folder) for folder in folders), key=lambda f: len(f.parts), reverse=True)
        self._projects: dict[Path, Project] = {}  # folder, or a loose file -> its project
        self.errors: dict[Path, str] = {}  # folder or loose file -> why its configuration did not load

    def lint(self, documents: Sequence[OpenDocument]) -> list[Linted]:
        """Each document's outcome, from a pass over each project that has open documents."""
        by_project: dict[Path, list[OpenDocument]] = {}
        for doc in documents:
            by_project.setdefault(self._key(doc.path), []).append(doc)
        linted: list[Linted] = []
        for key, docs in by_project.items():
            project = self._project(key)
            linted += project.lint(docs) if project is not None else [Linted(doc, [], [], None) for doc in docs]
        self._projects = {key: project for key, project in self._projects.items() if key in by_project
                          or key in self._folders}
        return linted

    def files_changed(self, paths: Sequence[Path], created_or_deleted: bool) -> None:
        for project in self._projects.values():
            project.files_changed(paths, created_or_deleted)

    def refresh_disk(self) -> None:
        for project in self._projects.values():
            project.refresh_disk()

    def reload_configs(self) -> None:
        """A configuration file changed: each project whose configuration differs now starts afresh."""
        for key, project in list(self._projects.items()):
            config = self._load(key)
            if config is not None and config != project.config:
                self._projects[key] = Project(config, key if key in self._folders else None)

    def _key(self, path: Path) -> Path:
        """The innermost workspace folder holding `path`, or `path` itself when no folder does."""
        absolute = Path(os.path.abspath(path))
        return next((folder for folder in self._folders if absolute.is_relative_to(folder)), absolute)

    def _project(self, key: Path) -> Project | None:
        if key not in self._projects:
            config = self._load(key)
            if config is None:
                return None
            self._projects[key] = Project(config, key if key in self._folders else None)
        return self._projects[key]

    def _load(self, key: Path) -> Config | None:
        """The configuration `tfcheck check` run in a folder (or on a loose file) would use; None if it does not load."""
        try:
            config = load_config(key if key in self._folders else key.parent)
        except ConfigError as error:
            self.errors[key] = str(error)
            return None
        self.errors.pop(key, None)
        return config.with_overrides(root=key) if config.source is None and key in self._folders else config
