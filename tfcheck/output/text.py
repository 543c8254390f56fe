"""`--format text`: `path:line:col: CODE message`, the source line with a marker, and a summary.

Colour only on a terminal (rich decides, or --color/--no-color). A clean run prints one line.
"""

from __future__ import annotations

from collections import Counter
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tfcheck.findings import Finding, RunResult, Severity
from tfcheck.output import OutputOptions
from tfcheck.output.terminal import PIPE_WIDTH

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow", Severity.INFO: "bold blue"}


# Control characters would act on the terminal (a NUL, an escape sequence, a carriage return that
# overwrites the line): C0 controls and DEL become their Unicode "control pictures" (U+2400...), C1
# controls and bidirectional overrides (which reorder what is shown) become U+FFFD. One character
# each, so the marker under an excerpt stays aligned.
_PRINTABLE = {**{code: 0x2400 + code for code in range(0x20)}, 0x7F: 0x2421,
              **{code: 0xFFFD for code in (*range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))}}
EXCERPT_WIDTH = 120  # longer lines are cut around the finding, as ruff does


def printable(text: str) -> str:
    """`text` safe to write to a terminal, one character for one."""
    return text.translate(_PRINTABLE)


def _window(text: str, column: int, end: int) -> tuple[str, int, int]:
    """At most EXCERPT_WIDTH characters of a line around columns [column, end), with `…` where it
    was cut, and the columns moved to match."""
    if len(text) <= EXCERPT_WIDTH:
        return text, column, end
    start = max(0, min(column - 1 - EXCERPT_WIDTH // 4, len(text) - EXCERPT_WIDTH))
    stop = start + EXCERPT_WIDTH
    head, tail = ("…" if start > 0 else ""), ("…" if stop < len(text) else "")
    shift = len(head) - start
    return head + text[start:stop] + tail, column + shift, min(end, stop + 1) + shift


def _source_excerpt(console: Console, finding: Finding) -> None:
    if finding.source is None:
        return
    text = finding.source.expandtabs(1)
    end = finding.end_column if finding.end_line == finding.line else len(text) + 1
    text, column, end = _window(text, finding.column, end)
    gutter = f"{finding.line:>5} | "
    console.print(f"[dim]{gutter}[/dim]{escape(printable(text))}", highlight=False, soft_wrap=True)
    marker = " " * (len(gutter) + column - 1) + "^" * max(1, end - column)
    console.print(f"[{_STYLE[finding.severity]}]{marker}[/]", highlight=False, soft_wrap=True)


def _print_finding(console: Console, finding: Finding, options: OutputOptions) -> None:
    cell = "" if finding.cell is None else f"cell {finding.cell}:"
    where = f"[bold]{escape(printable(finding.path))}[/bold]:{cell}{finding.line}:{finding.column}:"
    tag = " [dim](suppressed)[/dim]" if finding.suppressed else ""
    fixable = "" if finding.fix is None else " [cyan][*][/cyan]" if finding.fix.safe else " [cyan][-][/cyan]"
    console.print(f"{where} [{_STYLE[finding.severity]}]{finding.code}[/]{fixable} {escape(printable(finding.message))}{tag}",
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
                      highlight=False, width=None if stream.isatty() else PIPE_WIDTH)
    shown = sorted(result.findings + (result.suppressed if options.show_suppressed else []), key=lambda f: f.sort_key)
    if options.statistics and shown:
        _statistics(console, shown)  # the table instead of the findings, then the total, as ruff's --statistics
    else:
        for finding in shown:
            _print_finding(console, finding, options)
    summary = _summary(result, options)
    if summary is not None:
        console.print(summary, highlight=False)


def _summary(result: RunResult, options: OutputOptions) -> str | None:
    """The last line: the total, or that nothing was found; none where it would not be true.

    "All checks passed" needs files and no error: over no file (an empty folder, a path that does
    not exist) it would be a false all-clear, and the command says on stderr what went wrong."""
    if not result.findings:
        errors = len(result.errors) + len(result.path_errors)
        if result.files == 0:
            return None
        if errors:
            return f"No findings in {_count(result.files, 'file')}, but {_count(errors, 'error')}: not everything was checked."
        return f"[green]All checks passed[/green] ({_count(result.files, 'file')})."
    files = len({f.path for f in result.findings})
    summary = f"Found {_count(len(result.findings), 'finding')} in {_count(files, 'file')}"
    safe = sum(1 for f in result.findings if f.fix is not None and f.fix.safe)
    unsafe = sum(1 for f in result.findings if f.fix is not None and not f.fix.safe)
    fixes = [f"{safe} fixable with --fix [*]"] * bool(safe) + [f"{unsafe} more with --unsafe-fixes [-]"] * bool(unsafe)
    if fixes:
        summary += f" ({', '.join(fixes)})"
    if result.suppressed and not options.show_suppressed:
        summary += f"; {len(result.suppressed)} suppressed (--show-suppressed lists them)"
    return summary + "."


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' * (number != 1)}"
