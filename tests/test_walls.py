"""The walls between tfcheck's parts (docs/architecture.md, "Walls"), read from the source with `ast`.

Every import of every module counts, the lazy ones inside functions included (a wall that only
holds at import time does not hold); imports under `if TYPE_CHECKING:` do not, since they never
run. A breach fails with the file, the line and the import. The engine's layers (kinds, index,
analyses, the FileFacts front) are walls here too.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tfcheck.engine.components import strongly_connected_components

ROOT = Path(__file__).resolve().parents[1]
# Where each installed package's sources live (pyproject.toml, [tool.setuptools] package-dir).
PACKAGE_DIRS = {"tfcheck": ROOT / "tfcheck", "tfcheck.rules": ROOT / "rules", "tfcheck.compiler": ROOT / "compiler"}
TENSORFLOW = ("tensorflow", "keras", "tf_keras")
TF_BRIDGE = "tfcheck.runtime.tf_bridge"
COMPILER_TF_BRIDGE = "tfcheck.compiler.trace.bridge"

# Import circles among tfcheck's modules that exist today, each listed by its modules (sorted);
# any circle not listed here fails the test, and a listed one that is gone must come off the list.
# Empty, and to stay so: the engine's analyses no longer import the FileFacts front at all (a wall
# below), not even for annotations.
KNOWN_CIRCLES: set[tuple[str, ...]] = set()
# The engine's layers (docs/architecture.md): analyses sit on the index and never on the front.
ENGINE_FRONT = ("tfcheck.engine", "tfcheck.engine.facts")
ENGINE_INDEX_BELOW = ("tfcheck.engine.kinds", "tfcheck.engine.names", "tfcheck.engine.scopes",
                      "tfcheck.engine.source")

# Lazy imports that close a circle on purpose, with the reason; (importer, imported).
ALLOWED_LAZY_CIRCLE_EDGES: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    importer: str  # module name
    imported: str  # module name (a module of tfcheck when it is one, else what the source names)
    path: Path
    line: int
    lazy: bool  # inside a function: runs on a call, not at import time

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.importer} imports {self.imported}" + \
            (" (lazily)" if self.lazy else "")


def module_files() -> dict[str, Path]:
    """Every module of the installed tfcheck package, by name."""
    modules: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            if package == "tfcheck" and parts and parts[0] in ("rules", "compiler"):
                continue  # not these: tfcheck.rules and tfcheck.compiler come from their own folders
            modules[name] = path
    return modules


def imports_of(name: str, path: Path, modules: set[str]) -> Iterator[Import]:
    """The imports `path` runs (module level or in a function), TYPE_CHECKING blocks left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    yield from _walk(tree, name, package, path, modules, lazy=False)


def _walk(node: ast.AST, name: str, package: str, path: Path, modules: set[str], lazy: bool) -> Iterator[Import]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for statement in child.orelse:
                yield from _walk(statement, name, package, path, modules, lazy)
            continue
        if isinstance(child, ast.Import):
            for alias in child.names:
                yield Import(name, alias.name, path, child.lineno, lazy)
        elif isinstance(child, ast.ImportFrom):
            base = _absolute(child, package)
            for alias in child.names:
                submodule = f"{base}.{alias.name}"
                yield Import(name, submodule if submodule in modules else base, path, child.lineno, lazy)
        inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _walk(child, name, package, path, modules, inner)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` names, relative imports resolved."""
    if not node.level:
        return str(node.module)
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def all_imports() -> list[Import]:
    modules = module_files()
    return [found for name, path in modules.items() for found in imports_of(name, path, set(modules))]


def _within(module: str, *packages: str) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def _is_core(module: str) -> bool:
    """tfcheck's own modules outside the compiler, the rules and the CLI commands (whose job is
    to import the compiler, lazily, when a command runs)."""
    return _within(module, "tfcheck") and not _within(module, "tfcheck.compiler", "tfcheck.rules",
                                                       "tfcheck.commands", "tfcheck.cli")


# The engine's front for rules: FileFacts (which re-exports the vocabulary rules name), what a value
# can be, and scopes' FunctionInfo/ClassInfo/Binding. An analysis a rule needs is a FileFacts method.
RULES_MAY_IMPORT = frozenset({"tfcheck.engine", "tfcheck.engine.facts", "tfcheck.engine.kinds", "tfcheck.engine.scopes"})

# (what, who, may not import what): each a predicate on the importing and the imported module.
WALLS = {
    "the runtime (and tfcheck.aot) imports no TensorFlow outside runtime/tf_bridge.py": (
        lambda importer: _within(importer, "tfcheck.runtime", "tfcheck.aot") and importer != TF_BRIDGE,
        lambda imported: _within(imported, *TENSORFLOW)),
    "the runtime imports neither `tvm` nor `tvm_ffi` (`[runtime]` installs neither; runtime/ffi.py "
    "drives the bundled libtvm_ffi.so)": (
        lambda importer: _within(importer, "tfcheck.runtime", "tfcheck.aot"),
        lambda imported: _within(imported, "tvm", "tvm_ffi")),
    "the runtime imports no compiler": (
        lambda importer: _within(importer, "tfcheck.runtime", "tfcheck.aot"),
        lambda imported: _within(imported, "tfcheck.compiler")),
    "rules read the engine only through its facts and vocabulary (facts, kinds, scopes)": (
        lambda importer: _within(importer, "tfcheck.rules"),
        lambda imported: _within(imported, "tfcheck.engine") and imported not in RULES_MAY_IMPORT),
    "rules import no compiler": (
        lambda importer: _within(importer, "tfcheck.rules"),
        lambda imported: _within(imported, "tfcheck.compiler")),
    "the engine imports no rule": (
        lambda importer: _within(importer, "tfcheck.engine"),
        lambda imported: _within(imported, "tfcheck.rules")),
    "engine analyses import the index and the layers below, never the FileFacts front": (
        lambda importer: _within(importer, "tfcheck.engine") and importer not in ENGINE_FRONT,
        lambda imported: imported in ENGINE_FRONT),
    "engine/kinds.py is a leaf": (
        lambda importer: importer == "tfcheck.engine.kinds",
        lambda imported: _within(imported, "tfcheck")),
    "engine/index.py imports no analysis": (
        lambda importer: importer == "tfcheck.engine.index",
        lambda imported: _within(imported, "tfcheck.engine") and imported not in ENGINE_INDEX_BELOW),
    "the engine and tfcheck's core import no compiler": (
        _is_core,
        lambda imported: _within(imported, "tfcheck.compiler")),
    "the compiler imports TensorFlow in one module, its bridge (compiler/trace/bridge.py)": (
        lambda importer: _within(importer, "tfcheck.compiler") and importer != COMPILER_TF_BRIDGE,
        lambda imported: _within(imported, *TENSORFLOW)),
}


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return all_imports()


@pytest.mark.parametrize("wall", sorted(WALLS))
def test_walls_hold(imports: list[Import], wall: str) -> None:
    who, what = WALLS[wall]
    breaches = [str(found) for found in imports if who(found.importer) and what(found.imported)]
    assert not breaches, f"{wall}:\n" + "\n".join(breaches)


# The compiler's stage folders (docs/architecture.md, "The compiler") and the folders each may
# import: imports run one way, from the conductors (build/) down to what every step runs on
# (process/). Nothing imports build/; the schedules import no other stage, trace/ least of all.
STAGES: dict[str, frozenset[str]] = {
    "build": frozenset({"trace", "frontend", "schedules", "tuning", "cache", "process"}),
    "bench": frozenset({"trace", "process"}),
    "tuning": frozenset({"schedules", "cache", "process"}),
    "trace": frozenset({"cache", "process"}),
    "frontend": frozenset({"schedules", "process"}),
    "schedules": frozenset(),
    "cache": frozenset({"process"}),
    "process": frozenset(),
}
# Inside schedules/: the pipeline (apply.py, the package) over the three kinds of pass, the rules over
# the lowering passes whose marks they leave, and all of them over the shared questions (blocks, cpu,
# tiling, budget: "helpers").
SCHEDULE_PARTS: dict[str, frozenset[str]] = {
    "pipeline": frozenset({"rewrites", "rules", "lowering", "helpers"}),
    "rewrites": frozenset({"helpers"}),
    "rules": frozenset({"lowering", "helpers"}),
    "lowering": frozenset({"helpers"}),
    "helpers": frozenset(),
}


def _folder(module: str, root: Path) -> str | None:
    """The folder of `root` whose tree holds `module`'s file ("" for a file directly in `root`);
    None for a module outside it."""
    path = _module_paths().get(module)
    if path is None or root not in path.parents:
        return None
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else ""


@functools.cache
def _module_paths() -> dict[str, Path]:
    return module_files()


def _stage(module: str) -> str | None:
    return _folder(module, PACKAGE_DIRS["tfcheck.compiler"])


def _schedule_part(module: str) -> str | None:
    folder = _folder(module, PACKAGE_DIRS["tfcheck.compiler"] / "schedules")
    if folder == "":
        return "pipeline" if module in ("tfcheck.compiler.schedules", "tfcheck.compiler.schedules.apply") else "helpers"
    return folder


def _breaches(imports: list[Import], part: Callable[[str], str | None],
              allowed: dict[str, frozenset[str]]) -> list[str]:
    """The imports from one folder into another that `allowed` does not list."""
    breaches = []
    for found in imports:
        source, target = part(found.importer), part(found.imported)
        if source is not None and target is not None and source != target and target not in allowed[source]:
            breaches.append(f"{found} ({source}/ may import {', '.join(sorted(allowed[source])) or 'no other folder'})")
    return breaches


def test_the_compiler_is_stage_folders_whose_imports_run_one_way(imports: list[Import]) -> None:
    loose = [name for name in module_files() if _stage(name) not in (None, *STAGES) and name != "tfcheck.compiler"]
    assert not loose, f"compiler modules outside the stage folders: {loose}"
    assert not circles([Import(source, target, ROOT, 0, False) for source, targets in STAGES.items()
                        for target in targets]), "the stage folders' own order has a circle"
    breaches = _breaches(imports, _stage, STAGES)
    assert not breaches, "imports against the stage order:\n" + "\n".join(breaches)


def test_the_schedules_passes_import_one_way(imports: list[Import]) -> None:
    breaches = _breaches(imports, _schedule_part, SCHEDULE_PARTS)
    assert not breaches, "imports against the order inside schedules/:\n" + "\n".join(breaches)


def test_the_stage_order_sees_an_import_the_wrong_way() -> None:
    """The order checks are only as good as the folders they find: a trace module importing the
    verifier (as the tracing child once did, for a file name) and a lowering pass importing a rule
    are breaches; a rule importing a lowering pass is not."""
    wrong = [Import("tfcheck.compiler.trace.tracing", "tfcheck.compiler.build.verify", ROOT, 1, False),
             Import("tfcheck.compiler.schedules.lowering.tails", "tfcheck.compiler.schedules.rules.rows", ROOT, 1, True)]
    right = Import("tfcheck.compiler.schedules.rules.rows", "tfcheck.compiler.schedules.lowering.tails", ROOT, 1, False)
    assert len(_breaches(wrong, _stage, STAGES)) == 1 and len(_breaches(wrong, _schedule_part, SCHEDULE_PARTS)) == 1
    assert _breaches([right], _schedule_part, SCHEDULE_PARTS) == []


def circles(edges: list[Import]) -> set[tuple[str, ...]]:
    """The strongly connected components of more than one module (or a module importing itself),
    each as its sorted module names."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, set()).add(edge.imported)
    components = strongly_connected_components(sorted(graph), lambda module: sorted(graph.get(module, ())))
    return {tuple(sorted(c)) for c in components if len(c) > 1 or c[0] in graph.get(c[0], ())}


def _tfcheck_edges(imports: list[Import], lazy: bool) -> list[Import]:
    modules = set(module_files())
    return [found for found in imports if found.imported in modules and (lazy or not found.lazy)
            and (found.importer, found.imported) not in ALLOWED_LAZY_CIRCLE_EDGES]


def test_no_new_import_circle_at_import_time(imports: list[Import]) -> None:
    new = circles(_tfcheck_edges(imports, lazy=False)) - KNOWN_CIRCLES
    assert not new, "import circles among tfcheck's modules:\n" + "\n".join(" -> ".join(c) for c in sorted(new))


def test_no_new_import_circle_through_lazy_imports(imports: list[Import]) -> None:
    """A lazy import that closes a circle hides a dependency the wrong way round; the few that
    are meant are listed, with the reason, in ALLOWED_LAZY_CIRCLE_EDGES."""
    new = circles(_tfcheck_edges(imports, lazy=True)) - KNOWN_CIRCLES
    assert not new, "import circles through lazy imports:\n" + "\n".join(" -> ".join(c) for c in sorted(new))


def test_the_known_circles_still_exist(imports: list[Import]) -> None:
    """An allow-listed circle that was broken comes off the list, so it cannot come back unseen."""
    gone = KNOWN_CIRCLES - circles(_tfcheck_edges(imports, lazy=True))
    assert not gone, f"no longer circles, remove from KNOWN_CIRCLES: {sorted(gone)}"


def test_the_reader_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    """The checks above are only as good as the import reader: lazy imports count, TYPE_CHECKING
    ones do not, relative imports resolve."""
    source = tmp_path / "mod.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tensorflow\n"
                      "from . import sibling\nfrom ..up import thing\n"
                      "def f():\n    import tensorflow as tf\n    from tfcheck.compiler import trace\n")
    found = {(i.imported, i.lazy) for i in imports_of("tfcheck.runtime.mod", source, {"tfcheck.runtime.sibling"})}
    assert found == {("typing", False), ("tfcheck.runtime.sibling", False), ("tfcheck.up", False),
                     ("tensorflow", True), ("tfcheck.compiler", True)}
    assert circles([Import("a", "b", source, 1, False), Import("b", "a", source, 1, True),
                    Import("b", "c", source, 1, False)]) == {("a", "b")}
