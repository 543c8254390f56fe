"""`--format json`: a list of findings, one object each (see Finding.to_dict)."""

from __future__ import annotations

import json
from typing import TextIO

from tfcheck.findings import RunResult
from tfcheck.output import OutputOptions


def render(result: RunResult, options: OutputOptions, stream: TextIO) -> None:
    findings = result.findings + (result.suppressed if options.show_suppressed else [])
    json.dump([f.to_dict() for f in sorted(findings, key=lambda f: f.sort_key)], stream, indent=2)
    stream.write("\n")
