"""What a rule reports: a Finding at a source range, with an optional Fix made of text edits."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any


class Severity(str, Enum):
    """How bad a finding is. `tfcheck build` refuses to compile a function with an ERROR in it."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


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
    """One problem at one place. Lines and columns are 1-based; columns count characters."""

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

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.code)

    def with_path(self, path: str) -> Finding:
        return replace(self, path=path)

    def to_dict(self, with_source: bool = False) -> dict[str, Any]:
        """The finding as JSON data; `source` only on request (the lint cache keeps it, reports do not)."""
        data = asdict(self)
        data["severity"] = self.severity.value
        if self.fix is None:
            del data["fix"]
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
