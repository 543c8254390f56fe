"""`tfcheck rules` lists the rules; `tfcheck explain CODE` prints one rule's documentation."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from tfcheck.output.terminal import table_console
from tfcheck.rule import Rule, all_rules, explanation, rule_by_code, tier

# Codes in the numbering that no rule has, and why, printed under the table (and in the README's
# rules table) so that a gap is not taken for a rule that went missing.
UNUSED_CODES = {
    "TFC019": "no rule ever had this code (git history has none): TFC020-TFC024 were numbered on a branch "
              "made while TFC018 was being added on another, and TFC019 was skipped",
}


def numbering_gaps(rules: tuple[type[Rule], ...]) -> list[str]:
    """The codes between the first rule's and the last's that no rule has (each must be in UNUSED_CODES)."""
    numbers = {int(rule.code.removeprefix("TFC")) for rule in rules}
    return [f"TFC{number:03d}" for number in range(min(numbers), max(numbers)) if number not in numbers]


@click.command()
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules(output_format: str) -> None:
    """List every rule with its code, name, tier, default severity and summary.

    Default rules are on unless ignored; opt-in rules only when named in `select` or `extend-select`.
    """
    if output_format == "json":
        import json

        data = [{"code": r.code, "name": r.name, "tier": tier(r), "severity": r.severity.value,
                 "summary": r.summary()} for r in all_rules()]
        click.echo(json.dumps(data, indent=2))
        return
    table = Table(box=None, header_style="bold")
    for column in ("code", "name", "tier", "severity", "summary"):
        table.add_column(column)
    for rule in all_rules():
        table.add_row(rule.code, rule.name, tier(rule), rule.severity.value, rule.summary())
    console = table_console()
    console.print(table)
    for code in numbering_gaps(all_rules()):
        console.print(f"{code}: {UNUSED_CODES[code]}.", highlight=False)


@click.command()
@click.argument("code")
def explain(code: str) -> None:
    """Print the documentation of a rule, by code (TFC001) or name (print-in-graph)."""
    rule = rule_by_code(code)
    if rule is None:
        click.echo(f"tfcheck: error: no rule {code!r}; `tfcheck rules` lists them", err=True)
        sys.exit(2)
    Console().print(Markdown(explanation(rule)))
