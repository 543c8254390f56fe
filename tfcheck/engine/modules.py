"""Module names for files, so that imports between the files of a run can be resolved."""

from __future__ import annotations

from pathlib import Path


def module_name_for(path: Path) -> tuple[str, bool]:
    """The dotted module name of a file, found by walking up through packages (`__init__.py`).

    Returns (name, is_package). A file outside any package is a top-level module named by its stem.
    """
    path = path.resolve() if not path.is_absolute() else path
    is_package = path.name == "__init__.py"
    parts = [] if is_package else [path.stem]
    directory = path.parent
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        parts.append(directory.name)
        directory = directory.parent
    return ".".join(reversed(parts)), is_package
