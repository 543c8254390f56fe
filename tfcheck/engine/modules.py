"""Module names for files, so that imports between the files of a run can be resolved."""

from __future__ import annotations

import os
import re
from pathlib import Path

# Test code: files in a tests/ folder, `test_*.py`, `*_test.py`, `conftest.py`, `test_util.py`.
_TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)(test_[^/]*|[^/]*_test|conftest|test_util)\.py$")


def is_test_path(path: str) -> bool:
    """Whether a file is test code, where some pitfalls (eager mode on, one-off tf.functions) are deliberate."""
    return _TEST_PATH.search(path.replace("\\", "/")) is not None


def module_stem(name: str) -> str:
    """The last part of a file's module name: `mod` for `mod.py`, the whole name for a notebook."""
    return name if name.lower().endswith(".ipynb") else os.path.splitext(name)[0]


def module_name_for(path: Path) -> tuple[str, bool]:
    """The dotted module name of a file, found by walking up through packages (`__init__.py`).

    Returns (name, is_package). A file outside any package is a top-level module named by its stem.
    A notebook cannot be imported: it keeps its suffix (`train.ipynb`), so no import resolves to it.
    """
    path = path.resolve() if not path.is_absolute() else path
    is_package = path.name == "__init__.py"
    parts = [] if is_package else [module_stem(path.name)]
    directory = path.parent
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        parts.append(directory.name)
        directory = directory.parent
    return ".".join(reversed(parts)), is_package
