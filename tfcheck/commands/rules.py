"""`tfcheck rules` lists the rules; `tfcheck explain CODE` prints one rule's documentation."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from tfcheck.output.terminal import table_console
from tfcheck.rule import all_rules, rule_by_code, tier


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
    table_console().print(table)


@click.command()
@click.argument("code")
def explain(code: str) -> None:
    """Print the documentation of a rule, by code (TFC001) or name (print-in-graph)."""
    rule = rule_by_code(code)
    if rule is None:
        click.echo(f"tfcheck: error: no rule {code!r}; `tfcheck rules` lists them", err=True)
        sys.exit(2)
    Console().print(Markdown(f"# {rule.code} {rule.name} ({rule.severity.value}, {tier(rule)})\n\n"
                             f"{rule.documentation()}"))
