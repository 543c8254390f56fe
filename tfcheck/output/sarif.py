"""`--format sarif`: SARIF 2.1.0, as GitHub code scanning accepts it."""

from __future__ import annotations

import json
from typing import Any, TextIO

from tfcheck import __version__
from tfcheck.findings import Finding, RunResult, Severity
from tfcheck.output import OutputOptions
from tfcheck.rule import all_rules, documentation_url

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _rule_descriptor(rule: Any) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": rule.documentation()},
        "help": {"text": rule.documentation(), "markdown": rule.documentation()},
        "helpUri": documentation_url(rule.code),
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
    }


def _region(finding: Finding) -> dict[str, int]:
    """Where a finding is in the file: for a notebook, the lines of the .ipynb (JSON) file, no columns
    (they count within the cell; the result's properties say where in the cell)."""
    line, end_line = finding.file_lines
    if finding.cell is not None:
        return {"startLine": line, "endLine": end_line}
    return {"startLine": line, "startColumn": finding.column, "endLine": end_line,
            "endColumn": max(finding.end_column, 1)}


def _result(finding: Finding, index: dict[str, int]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": index[finding.code],
        "level": _LEVEL[finding.severity],
        "message": {"text": finding.message},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": finding.path, "uriBaseId": "%SRCROOT%"},
                "region": _region(finding),
            }
        }],
    }
    if finding.cell is not None:
        result["properties"] = {"notebookCell": finding.cell, "cellLine": finding.line, "cellColumn": finding.column,
                                "cellEndLine": finding.end_line, "cellEndColumn": finding.end_column}
    if finding.suppressed:
        result["suppressions"] = [{"kind": "inSource"}]
    return result


def document(findings: list[Finding]) -> dict[str, Any]:
    """A SARIF log with one run holding `findings`."""
    rules = list(all_rules())
    index = {rule.code: i for i, rule in enumerate(rules)}
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "tfcheck", "version": __version__, "informationUri":
                                "https://tfcheck.invalid", "rules": [_rule_descriptor(r) for r in rules]}},
            "columnKind": "unicodeCodePoints",
            "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "The folder tfcheck ran in"}}},
            "results": [_result(f, index) for f in findings if f.code in index],
        }],
    }


def render(result: RunResult, options: OutputOptions, stream: TextIO) -> None:
    suppressed = result.suppressed if options.show_suppressed else []
    json.dump(document(result.findings + suppressed), stream, indent=2)
    stream.write("\n")

