"""A code missing from the rules' numbering is explained (issue 40, item 12): TFC019 is no rule,
and `tfcheck rules` and the README's rules table say why."""

from __future__ import annotations

from tests.conftest import REPO
from tfcheck.commands.rules import UNUSED_CODES, numbering_gaps
from tfcheck.rule import all_rules


def test_every_gap_in_the_numbering_is_explained() -> None:
    gaps = numbering_gaps(all_rules())
    assert "TFC019" in gaps
    assert sorted(UNUSED_CODES) == gaps  # a rule removed or added out of order needs its line here


def test_rules_prints_a_footnote_per_gap(project, run_cli) -> None:
    result = run_cli(project({}), "rules")
    assert result.exit_code == 0
    for code, why in UNUSED_CODES.items():
        assert f"{code}: {why}." in result.stdout.splitlines()


def test_the_readme_rules_table_names_the_gaps() -> None:
    readme = (REPO / "README.md").read_text()
    for code in UNUSED_CODES:
        assert f"| {code} |" in readme
