"""Suppression comments: `# tfcheck: ignore[TFC001]`, `# tfcheck: ignore`, `# noqa: TFC001`, `# noqa`."""

from __future__ import annotations

import io
import re
import tokenize

from tfcheck.findings import Finding

_DIRECTIVE = re.compile(
    r"#\s*(?:tfcheck\s*:\s*ignore(?:\[(?P<codes>[^\]]*)\])?|noqa(?:\s*:\s*(?P<noqa>[A-Za-z0-9,\s]+))?)",
    re.IGNORECASE,
)
_MENTIONED = re.compile("noqa|tfcheck", re.IGNORECASE)
ALL = None  # a directive without codes suppresses every code on its line


def suppressions(text: str) -> dict[int, frozenset[str] | None]:
    """Map line number -> codes suppressed there (None: all codes). Only real comments count."""
    if not _MENTIONED.search(text):
        return {}
    found: dict[int, frozenset[str] | None] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                _add_directives(found, token.start[0], token.string)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # a file that parses always tokenizes; partial results are fine otherwise
    return found


def _add_directives(found: dict[int, frozenset[str] | None], line: int, comment: str) -> None:
    for match in _DIRECTIVE.finditer(comment):
        raw = match.group("codes") if match.group("codes") is not None else match.group("noqa")
        codes = frozenset(c.strip().upper() for c in re.split(r"[,\s]+", raw or "") if c.strip())
        if not codes or found.get(line, frozenset()) is ALL:
            found[line] = ALL
        else:
            found[line] = codes | (found.get(line) or frozenset())


def is_suppressed(finding: Finding, directives: dict[int, frozenset[str] | None]) -> bool:
    """A finding is suppressed by a directive on its first or last line naming its code or a prefix."""
    for line in {finding.line, finding.end_line}:
        if line in directives:
            codes = directives[line]
            if codes is ALL or any(finding.code.startswith(code) for code in codes):
                return True
    return False
