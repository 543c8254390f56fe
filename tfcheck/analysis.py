"""One file: read -> decode (or a notebook's code cells) -> parse -> facts -> rules -> suppressions.

`analyze` never raises: a file that cannot be read or parsed is a TFC000 finding, a crash of the
engine or of one rule an InternalError, and the run goes on. Besides its findings, a file's result
carries the summary the project pass (tfcheck/project.py) reads: the calls its graph code makes into
other modules.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from tfcheck.config import Config
from tfcheck.engine import FileFacts, ParseFailure
from tfcheck.engine.source import SourceFile, decode_source, parse_source
from tfcheck.findings import FileResult, Finding, InternalError, Severity, describe_exception
from tfcheck.jobs import FileJob
from tfcheck.notebook import NotebookSource, is_notebook, load_notebook
from tfcheck.reading import read_file
from tfcheck.rule import Rule, all_rules, enabled_codes, matches
from tfcheck.suppress import is_suppressed, suppressions

# A file can hold graph code, or code that rules check outside graph code, only if it mentions one of
# these. Files without them are still parsed (syntax errors are reported everywhere) but not analysed
# unless graph code in another file calls into them.
_CANDIDATE = re.compile(
    r"function|map_fn|while_loop|switch_case|\bcond\b|\bscan\b|fold[lr]|\.map\(|\.filter\(|flat_map"
    r"|interleave|\.reduce\(|_step\b|\bcall\b|\bcase\b|eagerly|update_state"
)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def selected_rules(config: Config) -> list[Rule]:
    """Instances of the rules `select`, `extend-select` and `ignore` turn on (per-file ignores apply later)."""
    codes = _enabled(config)
    return [rule() for rule in all_rules() if rule.code in codes and not rule.reported_by_engine]


def _enabled(config: Config) -> frozenset[str]:
    return enabled_codes(config.select + config.extend_select, config.ignore)


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
        candidate = bool(job.extra_roots or job.foreign_kinds or job.reaching_arguments) \
            or _CANDIDATE.search(text) is not None
        if not job.report and not candidate:
            return result  # another shard's file: only its calls into other files matter, and it has none
        result.lines = text.count("\n") + 1
        source = notebook.source if notebook is not None else parse_source(job.display, text)
    except ParseFailure as failure:
        result.findings.append(_parse_failure_finding(failure))
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
        facts = FileFacts(source, job.module, config.engine, dict(job.extra_roots), job.is_package,
                          dict(job.foreign_kinds), job.reaching_arguments)
    except RecursionError:
        result.findings.append(_parse_failure_finding(ParseFailure(job.display, "too deeply nested to analyse")))
        return result
    except Exception as exc:  # noqa: BLE001 - one file's crash must not stop the run
        result.errors.append(InternalError(job.display, "the engine", describe_exception(exc)))
        return result
    result.external_calls = [(c.target, c.caller, c.line) for c in facts.graph.external_calls]
    result.class_kinds = facts.keras_class_summary()
    result.foreign_bases = facts.foreign_bases()
    try:
        result.parameter_sinks = facts.parameter_sinks(name for name, _ in job.extra_roots)
    except Exception as exc:  # noqa: BLE001 - one file's crash must not stop the run
        result.errors.append(InternalError(job.display, "the engine", describe_exception(exc)))
    if job.report:
        for rule in rules:
            try:
                result.findings.extend(rule.check(facts))
            except Exception as exc:  # noqa: BLE001
                result.errors.append(InternalError(job.display, f"rule {rule.code} ({rule.name})",
                                                   describe_exception(exc)))
    result.asked_arguments = sorted(facts.flows.asked)
    if not job.report:
        return result
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


def _parse_failure_finding(failure: ParseFailure) -> Finding:
    return Finding(failure.path, failure.line, failure.column, failure.line, failure.column,
                   "TFC000", "parse-error", Severity.ERROR, failure.message)


def _filter(result: FileResult, config: Config, relative: str, text: str) -> FileResult:
    """Drop findings ignored for this file; move suppressed ones aside."""
    ignored = config.ignored_codes(relative)
    codes = _enabled(config)  # the rules ran only if on; the engine's own findings (TFC000) are checked here
    kept = [f for f in result.findings if f.code in codes and not matches(f.code, ignored)]
    directives = suppressions(text) if text else {}
    result.findings = sorted((f for f in kept if not is_suppressed(f, directives)), key=lambda f: f.sort_key)
    result.suppressed = [replace(f, suppressed=True) for f in kept if is_suppressed(f, directives)]
    return result
