"""Every rule's embedded examples: `must_flag` snippets produce its code, `must_not_flag` ones do not."""

from __future__ import annotations

import pytest

from tfcheck.engine import analyze_source
from tfcheck.rule import Rule, all_rules

RULES = [rule for rule in all_rules() if not rule.reported_by_engine]


def codes_in(rule: type[Rule], snippet: str) -> list[str]:
    facts = analyze_source("example.py", snippet, "example")
    return [finding.code for finding in rule().check(facts)]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_shape(rule: type[Rule]) -> None:
    doc = rule.documentation()
    for section in ("## What it does", "## Why is this bad", "## Example", "## Use instead"):
        assert section in doc, f"{rule.code} docstring lacks {section!r}"
    assert rule.must_flag and rule.must_not_flag, f"{rule.code} needs examples of both kinds"
    assert rule.code.startswith("TFC") and rule.name == rule.name.lower()


@pytest.mark.parametrize(("rule", "snippet"), [(r, s) for r in RULES for s in r.must_flag],
                         ids=lambda v: v.code if isinstance(v, type) else "")
def test_must_flag(rule: type[Rule], snippet: str) -> None:
    assert rule.code in codes_in(rule, snippet), f"{rule.code} missed:\n{snippet}"


@pytest.mark.parametrize(("rule", "snippet"), [(r, s) for r in RULES for s in r.must_not_flag],
                         ids=lambda v: v.code if isinstance(v, type) else "")
def test_must_not_flag(rule: type[Rule], snippet: str) -> None:
    assert rule.code not in codes_in(rule, snippet), f"{rule.code} flagged:\n{snippet}"


def test_codes_and_names_are_unique() -> None:
    codes = [r.code for r in all_rules()]
    names = [r.name for r in all_rules()]
    assert len(codes) == len(set(codes)) and len(names) == len(set(names))
