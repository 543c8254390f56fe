"""`--format text`: `path:line:col: CODE message`, the source line with a marker, and a summary.

Colour only on a terminal (rich decides, or --color/--no-color). A clean run prints one line.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tfcheck.findings import Finding, Severity
from tfcheck.output import OutputOptions
from tfcheck.runner import RunResult

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow", Severity.INFO: "bold blue"}


@lru_cache(maxsize=64)
def _lines(path: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


@lru_cache(maxsize=16)
def _cell_lines(path: str, cell: int) -> list[str]:
    """The lines of a notebook's cell: a notebook finding's excerpt is its cell's line, not the JSON."""
    from tfcheck.notebook import read_cell

    return read_cell(path, cell).splitlines()


def _source_excerpt(console: Console, finding: Finding) -> None:
    lines = _lines(finding.path) if finding.cell is None else _cell_lines(finding.path, finding.cell)
    if not 1 <= finding.line <= len(lines):
        return
    text = lines[finding.line - 1].expandtabs(1)
    gutter = f"{finding.line:>5} | "
    console.print(f"[dim]{gutter}[/dim]{escape(text)}", highlight=False, soft_wrap=True)
    end = finding.end_column if finding.end_line == finding.line else len(text) + 1
    width = max(1, end - finding.column)
    marker = " " * (len(gutter) + finding.column - 1) + "^" * width
    console.print(f"[{_STYLE[finding.severity]}]{marker}[/]", highlight=False, soft_wrap=True)


def _print_finding(console: Console, finding: Finding, options: OutputOptions) -> None:
    cell = "" if finding.cell is None else f"cell {finding.cell}:"
    where = f"[bold]{escape(finding.path)}[/bold]:{cell}{finding.line}:{finding.column}:"
    tag = " [dim](suppressed)[/dim]" if finding.suppressed else ""
    fixable = "" if finding.fix is None else " [cyan][*][/cyan]" if finding.fix.safe else " [cyan][-][/cyan]"
    console.print(f"{where} [{_STYLE[finding.severity]}]{finding.code}[/]{fixable} {escape(finding.message)}{tag}",
                  highlight=False, soft_wrap=True)
    if options.show_source:
        _source_excerpt(console, finding)


def _statistics(console: Console, findings: list[Finding]) -> None:
    counts = Counter((f.code, f.name) for f in findings)
    table = Table(box=None, show_header=True, header_style="bold")
    table.add_column("count", justify="right")
    table.add_column("code")
    table.add_column("name")
    for (code, name), count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        table.add_row(str(count), code, name)
    console.print(table)


def render(result: RunResult, options: OutputOptions, stream: TextIO) -> None:
    console = Console(file=stream, force_terminal=options.color, no_color=options.color is False,
                      highlight=False, width=200 if not stream.isatty() else None)
    shown = sorted(result.findings + (result.suppressed if options.show_suppressed else []), key=lambda f: f.sort_key)
    for finding in shown:
        _print_finding(console, finding, options)
    if options.statistics and shown:
        _statistics(console, shown)
    if not result.findings:
        console.print(f"[green]All checks passed[/green] ({result.files} files).", highlight=False)
        return
    files = len({f.path for f in result.findings})
    summary = f"Found {len(result.findings)} finding{'s' * (len(result.findings) != 1)} in {files} file{'s' * (files != 1)}"
    safe = sum(1 for f in result.findings if f.fix is not None and f.fix.safe)
    unsafe = sum(1 for f in result.findings if f.fix is not None and not f.fix.safe)
    fixes = [f"{safe} fixable with --fix [*]"] * bool(safe) + [f"{unsafe} more with --unsafe-fixes [-]"] * bool(unsafe)
    if fixes:
        summary += f" ({', '.join(fixes)})"
    if result.suppressed and not options.show_suppressed:
        summary += f"; {len(result.suppressed)} suppressed (--show-suppressed lists them)"
    console.print(summary + ".", highlight=False)
