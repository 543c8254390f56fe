"""The engine's layers import only the ones below: no analysis imports FileFacts, and there is no circle."""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "tfcheck" / "engine"
# The front and the package's entry points sit above every analysis.
_FRONT = {"facts", "__init__"}


def _engine_imports(path: Path) -> set[str]:
    """The tfcheck.engine modules a file imports anywhere, TYPE_CHECKING blocks included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tfcheck.engine."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.ImportFrom) and node.module == "tfcheck.engine":
            found.update(alias.name for alias in node.names)
    return found - {path.stem}


def _graph() -> dict[str, set[str]]:
    return {path.stem: _engine_imports(path) for path in ENGINE.glob("*.py")}


def test_no_analysis_imports_the_front() -> None:
    graph = _graph()
    assert {module for module, deps in graph.items() if module not in _FRONT and deps & _FRONT} == set()


def test_kinds_is_a_leaf_and_the_index_imports_no_analysis() -> None:
    graph = _graph()
    assert graph["kinds"] == set()
    assert graph["index"] <= {"kinds", "names", "scopes", "source"}


def test_engine_imports_have_no_circle() -> None:
    graph = _graph()
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join((*path, module))
        if module in done:
            return
        for dep in graph.get(module, ()):
            visit(dep, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
