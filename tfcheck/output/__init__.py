"""Renderers of a RunResult: text (rich), json, sarif, github. Each is `render(result, options, stream)`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from tfcheck.findings import RunResult


@dataclass(frozen=True)
class OutputOptions:
    show_source: bool = True
    statistics: bool = False
    show_suppressed: bool = False
    color: bool | None = None  # None: colour only on a terminal


Renderer = Callable[[RunResult, OutputOptions, TextIO], None]


def renderer(name: str) -> Renderer:
    """The render function of a format; imported on demand so `--format text` never loads SARIF code."""
    import importlib

    module = importlib.import_module(f"tfcheck.output.{FORMATS[name]}")
    return module.render


FORMATS = {"text": "text", "json": "json_format", "sarif": "sarif", "github": "github"}
