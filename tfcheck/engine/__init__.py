"""The analysis engine: parse a file once and compute the facts every rule reads.

`parse (source.py) -> scopes (scopes.py) -> FileIndex (index.py) -> analyses -> FileFacts (facts.py)`,
one file at a time. What crosses files, graph code that another file's graph code calls, is not
here: `FileFacts.graph.external_calls` is each file's summary, and the project pass
(tfcheck/project.py) turns those calls into the `extra_roots` a file is analysed again with.
"""

from __future__ import annotations

from pathlib import Path

from tfcheck.engine.facts import EngineSettings, FileFacts
from tfcheck.engine.modules import module_name_for
from tfcheck.engine.source import ParseFailure, parse_source, read_source

__all__ = ["EngineSettings", "FileFacts", "ParseFailure", "analyze_file", "analyze_source"]


def analyze_source(display_path: str, text: str, module_name: str = "", settings: EngineSettings | None = None,
                   extra_roots: dict[str, str] | None = None, is_package: bool = False) -> FileFacts:
    """Parse `text` and compute its facts. Raises ParseFailure for a file that does not parse."""
    return FileFacts(parse_source(display_path, text), module_name, settings, extra_roots, is_package)


def analyze_file(path: Path, config: object | None = None) -> FileFacts:
    """Read, parse and analyse one file on disk (used by `tfcheck build` to find annotated functions).

    `config` is a tfcheck.config.Config; its engine settings decide what counts as graph code.
    """
    settings = getattr(config, "engine", None)
    module_name, is_package = module_name_for(path)
    return analyze_source(str(path), read_source(path, str(path)), module_name, settings, is_package=is_package)
