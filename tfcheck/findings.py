"""What a rule reports: a Finding at a source range, with an optional Fix made of text edits."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any


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


def at_least(findings: Iterable[Finding], minimum: Severity) -> list[Finding]:
    """The findings of severity `minimum` or more (`--min-severity`, `min-severity`)."""
    return [finding for finding in findings if finding.severity.rank >= minimum.rank]
