"""`tfcheck merge`: one report from the reports of several `tfcheck check --shard I/N` jobs.

Inputs are `--format json` or `--format sarif` reports (each is recognised by its content, so a CI job
may mix them). Findings are de-duplicated (a path error, or a file given to two shards, is reported
once) and rendered in any output format, so shards can write JSON and the final job write SARIF.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from tfcheck.commands.check import EXIT_ERROR, exit_code, write_report
from tfcheck.findings import Finding, RunResult, Severity
from tfcheck.output import FORMATS, OutputOptions

_SEVERITY = {"error": Severity.ERROR, "warning": Severity.WARNING, "note": Severity.INFO}


class ReportError(Exception):
    """An input that is not a tfcheck JSON or SARIF report; the message names the file."""


def read_report(path: Path) -> list[Finding]:
    """The findings of a JSON or SARIF report (suppressed ones keep `suppressed=True`)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: not a JSON or SARIF report: {exc}") from None
    try:
        if isinstance(document, list):
            return [Finding.from_dict(item) for item in document]
        if isinstance(document, dict) and "runs" in document:
            return [finding for run in document["runs"] for finding in _sarif_findings(run)]
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ReportError(f"{path}: malformed report: {type(exc).__name__}: {exc}") from None
    raise ReportError(f"{path}: not a JSON (a list of findings) or SARIF (an object with runs) report")


def _sarif_findings(run: dict[str, Any]) -> list[Finding]:
    """Findings back from the SARIF results that `--format sarif` writes (fixes are not in SARIF)."""
    names = {rule["id"]: rule["name"] for rule in run["tool"]["driver"].get("rules", [])}
    findings = []
    for result in run.get("results", []):
        location = result["locations"][0]["physicalLocation"]
        region = location["region"]
        findings.append(Finding(
            path=location["artifactLocation"]["uri"], line=region["startLine"], column=region.get("startColumn", 1),
            end_line=region.get("endLine", region["startLine"]), end_column=region.get("endColumn", 1),
            code=result["ruleId"], name=names.get(result["ruleId"], result["ruleId"]),
            severity=_SEVERITY[result.get("level", "warning")], message=result["message"]["text"],
            suppressed=bool(result.get("suppressions"))))
    return findings


def merge_findings(reports: list[list[Finding]]) -> RunResult:
    """The union of several reports, each finding once, in the order `check` reports them."""
    unique: dict[str, Finding] = {}
    for findings in reports:
        for finding in findings:
            key = json.dumps({**finding.to_dict(), "fix": None}, sort_keys=True)  # SARIF carries no fixes
            if key not in unique or unique[key].fix is None:
                unique[key] = finding
    ordered = sorted(unique.values(), key=lambda f: (f.sort_key, f.message))
    return RunResult(findings=[f for f in ordered if not f.suppressed],
                     suppressed=[f for f in ordered if f.suppressed], files=len({f.path for f in ordered}))


@click.command()
@click.argument("reports", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--format", "output_format", type=click.Choice(sorted(FORMATS)), default="text", show_default=True)
@click.option("--output-file", "-o", type=click.Path(path_type=Path, dir_okay=False), help="Write the report here.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (2 still means an error).")
def merge(reports: tuple[Path, ...], output_format: str, output_file: Path | None, exit_zero: bool) -> None:
    """Merge the JSON or SARIF reports of `tfcheck check --shard I/N` jobs into one report.

    Exit status: 0 no findings, 1 findings, 2 an input could not be read.
    """
    try:
        result = merge_findings([read_report(path) for path in reports])
    except ReportError as exc:
        click.echo(f"tfcheck: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    options = OutputOptions(show_source=False, show_suppressed=True, color=False if output_file else None)
    write_report(result, output_format, options, output_file)
    sys.exit(exit_code(result, exit_zero))
