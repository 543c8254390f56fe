"""Helpers shared by the rule tests: run every rule on a snippet, and read a fixture's expectations."""

from __future__ import annotations

import re
from pathlib import Path

from tfcheck.config import Config
from tfcheck.engine import analyze_source
from tfcheck.rule import all_rules
from tfcheck.runner import lint_paths

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lint"
_EXPECT = re.compile(r"# expect: ((?:TFC\d{3} ?)+)$")
_EXPECT_MISSING = re.compile(r"# expect-missing: (.+)$")


def codes_of_all_rules(snippet: str) -> set[str]:
    """The codes that all rules together report on a snippet."""
    facts = analyze_source("reference.py", snippet, "reference")
    return {finding.code for rule in all_rules() if not rule.reported_by_engine for finding in rule().check(facts)}


def expected_findings(path: Path) -> list[tuple[int, str]]:
    """The `# expect: TFC0xx ...` comments of a fixture, as sorted (line, code) pairs."""
    return sorted((number, code) for number, line in enumerate(path.read_text().splitlines(), start=1)
                  if (match := _EXPECT.search(line)) for code in match.group(1).split())


def missing_pitfalls(path: Path) -> list[tuple[int, str]]:
    """The `# expect-missing: <pitfall>` comments of a file: real pitfalls that no rule reports yet."""
    return [(number, match.group(1).strip()) for number, line in enumerate(path.read_text().splitlines(), start=1)
            if (match := _EXPECT_MISSING.search(line))]


def fixture_findings(path: Path) -> list[tuple[int, str]]:
    """What the real runner reports on a fixture file with every rule on, opt-in ones included, as
    sorted (line, code) pairs."""
    config = Config(root=FIXTURES, select=("ALL",))
    return sorted((f.line, f.code) for f in lint_paths([path], config, jobs=1).findings)
