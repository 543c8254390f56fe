"""What a lint run produces: Findings (a source range, with an optional Fix made of text edits), per
file (FileResult) and for the whole run (RunResult), and the InternalErrors of tfcheck itself.

These are the types reporters (tfcheck/output/) and `tfcheck merge` read, kept apart from the runner
that produces them so that rendering a report never imports the analysis.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tfcheck.cache import StatSignature


class Severity(str, Enum):
    """How bad a finding is. `tfcheck build` refuses to compile a function with an ERROR in it."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for info, 1 for warning, 2 for error: `--min-severity` keeps findings of this rank or more."""
        return (Severity.INFO, Severity.WARNING, Severity.ERROR).index(self)


@dataclass(frozen=True)
class Edit:
    """Replace the text between two 1-based (line, column) positions; columns count characters."""

    line: int
    column: int
    end_line: int
    end_column: int
    replacement: str


@dataclass(frozen=True)
class Fix:
    """A change that resolves a finding. Unsafe fixes may change behaviour and need --unsafe-fixes."""

    message: str
    edits: tuple[Edit, ...]
    safe: bool = True


@dataclass(frozen=True)
class Finding:
    """One problem at one place. Lines and columns are 1-based; columns count characters.

    In a notebook, `cell` is the cell's number among all cells of the file (1-based, markdown
    included, as editors count them); `line`/`column` and the fix's edits count within that cell, and
    `file_line`/`file_end_line` are the lines of the .ipynb file where those cell lines sit (what
    code-scanning tools show). All three are None for a Python file.
    """

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    severity: Severity
    message: str
    fix: Fix | None = None
    suppressed: bool = field(default=False, compare=False)
    # The text of `line`, captured from what was analysed: reporters show it without opening the
    # file again (it may have changed since, or be a FIFO that a second read would block on).
    source: str | None = field(default=None, compare=False, repr=False)
    cell: int | None = None
    file_line: int | None = None
    file_end_line: int | None = None

    @property
    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.column, self.code)

    @property
    def file_lines(self) -> tuple[int, int]:
        """The first and last line in the file itself: of the .ipynb JSON text for a notebook."""
        if self.file_line is None or self.file_end_line is None:
            return self.line, self.end_line
        return self.file_line, self.file_end_line

    def with_path(self, path: str) -> Finding:
        return replace(self, path=path)

    def to_dict(self, with_source: bool = False) -> dict[str, Any]:
        """The finding as JSON data; `source` only on request (the lint cache keeps it, reports do not)."""
        data = asdict(self)
        data["severity"] = self.severity.value
        for key in ("fix", "cell", "file_line", "file_end_line"):
            if data[key] is None:
                del data[key]
        if not with_source or self.source is None:
            del data["source"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        data = dict(data)
        data["severity"] = Severity(data["severity"])
        fix = data.pop("fix", None)
        if fix is not None:
            edits = tuple(Edit(**edit) for edit in fix["edits"])
            data["fix"] = Fix(message=fix["message"], edits=edits, safe=fix["safe"])
        return cls(**data)


@dataclass
class InternalError:
    """A crash of tfcheck itself on one file (or one rule on one file). The run goes on."""

    path: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: internal error in {self.where}: {self.message}"


def describe_exception(exc: BaseException) -> str:
    """`Type: message (file.py:line)`: where a crash happened, short enough for one line of output."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" ({Path(frame.filename).name}:{frame.lineno})" if frame else ""
    return f"{type(exc).__name__}: {exc}{where}"


@dataclass
class FileResult:
    """What analysing one file produced: its findings, and the summary the project pass reads."""

    path: str
    lines: int = 0
    findings: list[Finding] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)
    errors: list[InternalError] = field(default_factory=list)
    # calls from graph code into other modules: (qualified target, caller qualname, line)
    external_calls: list[tuple[str, str, int]] = field(default_factory=list)
    # the file's Keras models and layers (qualified name, kind), and the bases it takes from other modules
    class_kinds: list[tuple[str, str]] = field(default_factory=list)
    foreign_bases: list[str] = field(default_factory=list)
    # arguments of calls into other modules whose flow this file's rules asked about (target, argument),
    # and the parameters of its functions that other files call from graph code that reach the graph
    # (function qualname, argument): the argument is a keyword or a `#position`
    asked_arguments: list[tuple[str, str]] = field(default_factory=list)
    parameter_sinks: list[tuple[str, str]] = field(default_factory=list)
    # what was read, for the cache's stat manifest; and whether the result came from the cache
    read_as: tuple[StatSignature, str] | None = None
    cached: bool = False


@dataclass
class RunResult:
    """The outcome of a run."""

    findings: list[Finding] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)
    errors: list[InternalError] = field(default_factory=list)
    path_errors: list[str] = field(default_factory=list)
    files: int = 0
    lines: int = 0
    analyzed: int = 0  # files parsed in this run (the others were answered by the cache)

    @property
    def has_errors(self) -> bool:
        return bool(self.errors or self.path_errors)


def at_least(findings: Iterable[Finding], minimum: Severity) -> list[Finding]:
    """The findings of severity `minimum` or more (`--min-severity`, `min-severity`)."""
    return [finding for finding in findings if finding.severity.rank >= minimum.rank]
