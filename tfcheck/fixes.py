"""Applying the fixes of findings to files: `tfcheck check --fix`, `--unsafe-fixes`, `--diff`.

Rules describe a fix as text edits (tfcheck.findings.Fix/Edit, built with tfcheck/edits.py) because
the engine analyses CPython's `ast`, which keeps positions but not formatting. Applying edits as text
leaves every byte outside them untouched, so comments, blank lines and quoting survive. What text
edits cannot promise is a file that still parses; that is what libcst checks here (`edits.parses`).

The loop is ruff's: apply every fix whose edits do not overlap an already chosen one, lint the new
text again, repeat (fixes that overlapped get their turn once the text has changed), at most
MAX_ROUNDS times. A round whose result does not parse is retried fix by fix, keeping only the fixes
that leave the file parsing; a fix that would break the file is never written.
"""

from __future__ import annotations

import difflib
import io
import re
import tokenize
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tfcheck.edits import parses
from tfcheck.engine.source import ParseFailure
from tfcheck.findings import Edit, Finding, Fix, RunResult
from tfcheck.notebook import Notebook, as_python, is_notebook, notebook_sources

if TYPE_CHECKING:
    from tfcheck.config import Config

MAX_ROUNDS = 10
_NEWLINE = re.compile(r"\r\n|\r|\n")


# -- applying edits to text ------------------------------------------------------------------------
class _Offsets:
    """Converts 1-based (line, character column) positions into offsets in a text."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [match.end() for match in _NEWLINE.finditer(text)]
        self.size = len(text)

    def __call__(self, line: int, column: int) -> int:
        if line > len(self.starts):
            return self.size
        return min(self.starts[line - 1] + column - 1, self.size)

    def span(self, edit: Edit) -> tuple[int, int]:
        return self(edit.line, edit.column), self(edit.end_line, edit.end_column)


def apply_fixes(text: str, fixes: Sequence[Fix], check: Callable[[str], bool] = parses) -> tuple[str, list[Fix]]:
    """Apply the fixes that do not overlap each other, in order; return the text and the fixes applied.

    A fix is all or nothing: if one of its edits overlaps an edit already chosen, the whole fix
    waits for the next round. The result always passes `check` (parses, by default): if the chosen
    fixes together break the file, they are tried one at a time and only those that keep it parsing
    are applied.
    """
    offsets = _Offsets(text)
    chosen: list[Fix] = []
    taken: list[tuple[int, int]] = []
    for fix in fixes:
        spans = [offsets.span(edit) for edit in fix.edits]
        if any(_overlaps(span, other) for span in spans for other in taken) or _overlap_within(spans):
            continue
        chosen.append(fix)
        taken.extend(spans)
    result = _apply(text, offsets, chosen)
    if not chosen or check(result):
        return result, chosen
    return _apply_one_by_one(text, chosen, check)


def _apply_one_by_one(text: str, fixes: Sequence[Fix], check: Callable[[str], bool]) -> tuple[str, list[Fix]]:
    """Apply non-overlapping fixes one at a time (last first, so earlier positions stay valid)."""
    offsets = _Offsets(text)
    applied: list[Fix] = []
    for fix in sorted(fixes, key=lambda f: min(offsets.span(e) for e in f.edits), reverse=True):
        candidate = _apply(text, _Offsets(text), [fix])
        if check(candidate):
            text = candidate
            applied.append(fix)
    applied.reverse()
    return text, applied


def _apply(text: str, offsets: _Offsets, fixes: Iterable[Fix]) -> str:
    edits = sorted((offsets.span(edit), edit.replacement) for fix in fixes for edit in fix.edits)
    pieces: list[str] = []
    position = 0
    for (start, end), replacement in edits:
        pieces.append(text[position:start])
        pieces.append(replacement)
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Ranges overlap when they share a character; two insertions at one point also clash."""
    if a[0] == a[1] and b[0] == b[1]:
        return a[0] == b[0]
    return a[0] < b[1] and b[0] < a[1] or (a[0] == a[1] and b[0] < a[0] < b[1]) \
        or (b[0] == b[1] and a[0] < b[0] < a[1])


def _overlap_within(spans: list[tuple[int, int]]) -> bool:
    return any(_overlaps(a, b) for i, a in enumerate(spans) for b in spans[i + 1:])


# -- fixing files ----------------------------------------------------------------------------------
def is_applicable(finding: Finding, unsafe: bool) -> bool:
    """Whether `--fix` applies this finding's fix (unsafe ones only with `--unsafe-fixes`)."""
    return finding.fix is not None and bool(finding.fix.edits) and (finding.fix.safe or unsafe)


@dataclass
class FileFixes:
    """The outcome of fixing one file: its text before and after, and how many fixes went in."""

    path: Path
    display: str
    original: str
    fixed: str
    applied: int = 0
    encoding: str = "utf-8"

    @property
    def changed(self) -> bool:
        return self.fixed != self.original

    def diff(self) -> str:
        """A unified diff of the change, as `git diff` shows it (a/ and b/ prefixes); for a notebook, one
        per changed cell, of the cell's source (`a/train.ipynb:cell 3`), as ruff shows them."""
        if not is_notebook(self.path):
            return _unified_diff(self.original, self.fixed, self.display)
        before = notebook_sources(self.display, self.original)
        after = notebook_sources(self.display, self.fixed)
        return "".join(_unified_diff(before[cell], after[cell], f"{self.display}:cell {cell}")
                       for cell in sorted(before) if before[cell] != after.get(cell, before[cell]))

    def write(self) -> None:
        """Write the fixed text back in the file's own encoding; newlines are kept as they were."""
        self.path.write_bytes(self.fixed.encode(self.encoding))


def _unified_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 f"a/{name}", f"b/{name}")
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n"
                   for line in lines)


@dataclass
class FixRun:
    """Every file a `--fix`/`--diff` run changed (or would change)."""

    files: list[FileFixes] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # files that could not be read back to fix

    @property
    def applied(self) -> int:
        return sum(f.applied for f in self.files)


Relint = Callable[[str], list[Finding]]
# One round of fixing: the text and the applicable findings -> the new text and how many fixes went in.
ApplyRound = Callable[[str, list[Finding]], tuple[str, int]]


def _python_round(text: str, findings: list[Finding]) -> tuple[str, int]:
    new_text, done = apply_fixes(text, [f.fix for f in findings])  # type: ignore[misc]
    return new_text, len(done)


def notebook_round(display: str) -> ApplyRound:
    """A round of fixes on a notebook's raw text: each cell's fixes applied to that cell's source (the
    edits count within it), checked as the Python the cell runs, and written back into the JSON."""
    def apply_round(raw: str, findings: list[Finding]) -> tuple[str, int]:
        notebook = Notebook.parse(display, raw)
        sources = {cell.number: cell.source for cell in notebook.cells}
        by_cell: dict[int, list[Fix]] = {}
        for finding in findings:
            if finding.cell in sources:
                by_cell.setdefault(finding.cell, []).append(finding.fix)  # type: ignore[arg-type]
        done = 0
        for cell, fixes in by_cell.items():
            sources[cell], chosen = apply_fixes(sources[cell], fixes, lambda text: parses(as_python(text)))
            done += len(chosen)
        return notebook.with_sources(sources), done

    return apply_round


def fix_text(text: str, findings: Sequence[Finding], relint: Relint, unsafe: bool,
             apply_round: ApplyRound = _python_round) -> tuple[str, int]:
    """Apply fixes to `text`, linting the result again (`relint`) between rounds, ruff-style.

    Returns the fixed text and how many fixes were applied in all rounds.
    """
    applied = 0
    for _ in range(MAX_ROUNDS):
        chosen = [f for f in findings if is_applicable(f, unsafe)]
        if not chosen:
            break
        new_text, done = apply_round(text, chosen)
        if not done or new_text == text:
            break
        text, applied = new_text, applied + done
        findings = relint(text)
    return text, applied


def fix_files(findings: Sequence[Finding], sources: dict[str, Path], relint_for: Callable[[Path], Relint],
              unsafe: bool) -> FixRun:
    """Fix every file that has applicable findings. Nothing is written here (see FileFixes.write).

    `sources` maps the paths findings are reported under to files on disk; `relint_for(path)`
    returns a function that lints new text of that file.
    """
    by_file: dict[str, list[Finding]] = {}
    for finding in findings:
        if is_applicable(finding, unsafe) and finding.path in sources:
            by_file.setdefault(finding.path, []).append(finding)
    run = FixRun()
    for display, file_findings in sorted(by_file.items()):
        path = sources[display]
        try:
            data = path.read_bytes()
            encoding = _encoding(data)
            original = data.decode(encoding)
        except (OSError, SyntaxError, UnicodeDecodeError, LookupError) as exc:
            run.errors.append(f"{display}: not fixed, cannot read it again: {exc}")
            continue
        apply_round = notebook_round(display) if is_notebook(path) else _python_round
        try:
            fixed, applied = fix_text(original, file_findings, relint_for(path), unsafe, apply_round)
        except ParseFailure as failure:  # a notebook changed on disk since it was linted
            run.errors.append(f"{display}: not fixed: {failure.message}")
            continue
        if fixed != original:
            run.files.append(FileFixes(path, display, original, fixed, applied, encoding))
    return run


def _encoding(data: bytes) -> str:
    """The encoding Python reads a file in (a BOM or a coding line, else UTF-8); checked by the lint."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return encoding


# -- the command line (`tfcheck check --fix/--diff`) ------------------------------------------------
def _fix_run(result: RunResult, config: Config, unsafe: bool) -> FixRun:
    """Fix the files of a lint run in memory, re-linting each file between rounds.

    Re-linting in later rounds analyses one file at a time, so graph code that only another file
    makes graph code (the project pass, tfcheck/project.py) is fixed in the first round only.
    """
    from tfcheck.analysis import analyze, selected_rules
    from tfcheck.jobs import JobMaker

    rules = selected_rules(config)
    make_job = JobMaker(config)

    def relint_for(path: Path) -> Relint:
        job = make_job(path)
        encoding = _encoding(path.read_bytes())
        return lambda text: analyze(job, config, rules, text.encode(encoding)).findings

    sources = {f.path: Path(f.path) for f in result.findings}
    return fix_files(result.findings, sources, relint_for, unsafe)


def print_diff(result: RunResult, config: Config, unsafe: bool) -> int:
    """`--diff`: print what --fix would change, write nothing. Exit status 1 if there are changes."""
    import click

    run = _fix_run(result, config, unsafe)
    _echo_errors(run)
    for file in run.files:
        click.echo(file.diff(), nl=False)
    click.echo(_summary(run, result, unsafe, "would fix"), err=True)
    return 1 if run.files else 0


def fix_in_place(result: RunResult, config: Config, unsafe: bool, relint: Callable[[], RunResult]) -> RunResult:
    """`--fix`: write the fixed files, then lint again and return that result (what is left)."""
    import click

    run = _fix_run(result, config, unsafe)
    _echo_errors(run)
    for file in run.files:
        file.write()
    click.echo(_summary(run, result, unsafe, "fixed"), err=True)
    return relint() if run.files else result


def _echo_errors(run: FixRun) -> None:
    import click

    for message in run.errors:
        click.echo(f"tfcheck: error: {message}", err=True)


def _summary(run: FixRun, result: RunResult, unsafe: bool, verb: str) -> str:
    """`tfcheck: fixed 3 findings in 2 files (1 more fixable with --unsafe-fixes)`."""
    files = len(run.files)
    text = f"tfcheck: {verb} {run.applied} finding{'s' * (run.applied != 1)} in {files} file{'s' * (files != 1)}"
    hidden = 0 if unsafe else sum(1 for f in result.findings if f.fix is not None and not f.fix.safe)
    return text + (f" ({hidden} more fixable with --unsafe-fixes)" if hidden else "")
