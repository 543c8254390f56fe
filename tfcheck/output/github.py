"""`--format github`: GitHub Actions workflow commands, which show as annotations on pull requests."""

from __future__ import annotations

from typing import TextIO

from tfcheck.findings import RunResult, Severity
from tfcheck.output import OutputOptions

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(result: RunResult, options: OutputOptions, stream: TextIO) -> None:
    for f in result.findings:
        line, end_line = f.file_lines
        # a notebook's columns count within its cell, not along the JSON line the annotation points at
        columns = [f"col={f.column}", f"endColumn={f.end_column}"] if f.cell is None else []
        where = "" if f.cell is None else f" (cell {f.cell}, line {f.line})"
        properties = ",".join([
            f"file={_escape_property(f.path)}", f"line={line}", *columns[:1],
            f"endLine={end_line}", *columns[1:], f"title={_escape_property(f'{f.code} {f.name}{where}')}",
        ])
        stream.write(f"::{_LEVEL[f.severity]} {properties}::{_escape_data(f'{f.code} {f.message}')}\n")
