"""Finding `@tfcheck.aot` functions statically, with the linter's engine (nothing is imported).

Recognised spellings, through the engine's name resolution (so `import tfcheck as tc` or
`from tfcheck import aot` work too)::

    @tfcheck.aot                      @tfcheck.aot(name=..., targets=[...], shapes=[...])
    @tf.function(...)                 @tf.function(...)
    def f(x): ...                     def g(x): ...

    h = tfcheck.aot(tf.function(k))   h = tfcheck.aot(name="h")(k_tf_function)   (module level)

    class Model(keras.Model):         model = Model()
        @tfcheck.aot                  serve = tfcheck.aot(model.serve)   (a method of an instance)
        @tf.function(...)
        def serve(self, x): ...
    model = Model()

A decorated method is built for the one module-level instance of its class (`model.serve`, named
`model_serve`); none or several fail that method with a message. Nested functions are reported
(only module-level names can be imported and built) instead of being skipped silently.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcheck.engine import ParseFailure, analyze_file
from tfcheck.engine.source import parse_source, read_source
from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import ClassInfo, FunctionInfo
from tfcheck.engine.modules import module_name_for
from tfcheck.notebook import is_notebook
from tfcheck.runtime.paths import UnsafePathError, check_name

AOT = "tfcheck.aot"


@dataclass(frozen=True)
class AnnotatedFunction:
    """One `@tfcheck.aot` function as written in a file."""

    path: Path
    module: str  # dotted module name, importable with `root` on sys.path
    root: Path
    qualname: str  # the module-level name the wrapper is bound to
    line: int  # first line, decorators included
    end_line: int
    name: str | None = None  # `name=` literal, if given
    shapes: list[Any] | None = None  # `shapes=` literal, if given
    dims: dict[str, Any] | None = None  # `dims=` literal, if given (validated: else `problem`)
    targets: list[str] | None = None  # `targets=`: "cpu", "cuda" or target JSON strings
    problem: str | None = None  # why it cannot be built (e.g. a nested function)
    instance: str | None = None  # a method: the module-level name of the instance it is built for
    saved_model: bool = False  # `path` is a SavedModel folder and `qualname` one of its signatures

    @property
    def label(self) -> str:
        return f"{self.module}.{self.qualname}"

    @property
    def artifact_name(self) -> str:
        """The artifact's name as the trace gives it (`bridge.load_traceable`): `name=`, else
        `<instance>_<method>` for a method, else the name the function is bound to."""
        if self.name:
            return self.name
        if self.instance:
            return f"{self.instance}_{self.qualname.rsplit('.', 1)[-1]}"
        return self.qualname


@dataclass
class DiscoveryResult:
    functions: list[AnnotatedFunction] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def resolve_module_argument(argument: str, search_path: Sequence[str] | None = None) -> Path | None:
    """The file of a dotted module name (`pkg.models`), found without importing anything."""
    relative = Path(*argument.split("."))
    for base in [str(Path.cwd()), *(search_path if search_path is not None else sys.path)]:
        for candidate in (Path(base or ".") / relative.with_suffix(".py"), Path(base or ".") / relative / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def import_root(path: Path, module: str) -> Path:
    """The sys.path entry from which `module` (the dotted name of `path`) imports."""
    root = path.resolve().parent
    levels = module.count(".") + (1 if path.name == "__init__.py" else 0)
    for _ in range(levels):
        root = root.parent
    return root


def discover(files: Sequence[Path], config: object | None = None) -> DiscoveryResult:
    """The annotated functions of `files`, in file and line order; files that cannot be read or
    parsed are errors, whether they mention `aot` or not: what does not parse cannot be searched,
    and a build that said "no @tfcheck.aot functions found" over a syntax error would mislead."""
    result = DiscoveryResult()
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            result.errors.append(f"{path}: cannot read: {error.strerror}")
            continue
        try:
            if "aot" in text:  # cheap pre-filter: no spelling of the decorator can avoid "aot"
                result.functions.extend(sorted(_annotated(analyze_file(path, config), path), key=lambda f: f.line))
            elif not is_notebook(path):  # a module the build could import; a notebook is JSON
                parse_source(str(path), read_source(path, str(path)))
        except ParseFailure as failure:
            result.errors.append(f"{failure.path}:{failure.line}: {failure.message}")
    return result


def _annotated(facts: FileFacts, path: Path) -> Iterator[AnnotatedFunction]:
    module, _ = module_name_for(path)
    root = import_root(path, module)
    for info in facts.functions:
        if isinstance(info.node, ast.Lambda):
            continue
        for decorator in info.node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            if facts.resolve(call.func if call else decorator) != AOT:
                continue
            first = min([info.node.lineno, *(d.lineno for d in info.node.decorator_list)])
            end = info.node.end_lineno or first
            if info.parent is None and info.cls is not None and info.cls.qualname == info.cls.name:
                yield _method(facts, path, module, root, info, first, end, call)
                continue
            problem = None if info.parent is None and info.cls is None else (
                f"{info.qualname} is not a module-level function or a method of a module-level class: "
                "tfcheck build imports functions by module-level name; move it to module level")
            yield _make(path, module, root, info.qualname, first, end, call, problem)
    yield from _module_level_calls(facts, path, module, root)


def _method(facts: FileFacts, path: Path, module: str, root: Path, info: FunctionInfo, line: int, end: int,
            call: ast.Call | None) -> AnnotatedFunction:
    """A decorated method, built for the one module-level instance of its class (or a subclass)
    in the module: `model = Model()` gives `model.serve`. None or several fail that method."""
    assert info.cls is not None
    instances = _instances_of(facts, info.cls)
    if len(instances) == 1:
        [(instance, _)] = instances
        return _make(path, module, root, f"{instance}.{info.name}", line, end, call, None, instance)
    where = f"{module}.{info.qualname}"
    if not instances:
        problem = (f"{where}: a method is built for the module-level instance of its class, and {module} "
                   f"creates none (add one, e.g. `model = {info.cls.name}()`, or use tfcheck.aot(model.{info.name}))")
    else:
        listed = ", ".join(f"{name} (line {line})" for name, line in instances)
        problem = (f"{where}: {module} creates {len(instances)} module-level instances of {info.cls.name} "
                   f"({listed}) and tfcheck build builds a method for one; keep one module-level instance")
    return _make(path, module, root, info.qualname, line, end, call, problem)


def _instances_of(facts: FileFacts, cls: ClassInfo) -> list[tuple[str, int]]:
    """Module-level `name = C(...)` (or `name: T = C(...)`) where C is `cls` or a subclass of it
    defined in the file, with their lines."""
    found = []
    for statement in facts.source.tree.body:
        target, value = _assignment(statement)
        if target is None or not isinstance(value, ast.Call):
            continue
        created = facts.called_class(value)
        if created is not None and any(base is cls for base in facts.class_chain(created)):
            found.append((target, statement.lineno))
    return found


def _assignment(statement: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """`name = value` or `name: T = value` at module level: the name and the value."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id, statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id, statement.value
    return None, None


def _module_level_calls(facts: FileFacts, path: Path, module: str, root: Path) -> Iterator[AnnotatedFunction]:
    """`name = tfcheck.aot(fn)` and `name = tfcheck.aot(options...)(fn)` at module level."""
    for statement in facts.source.tree.body:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.Call)):
            continue
        call = statement.value
        options = call.func if isinstance(call.func, ast.Call) else call
        if facts.resolve(options.func) != AOT or not call.args:
            continue
        argument = _unwrap_tf_function(facts, call.args[0])
        instance = _instance_receiver(facts, argument)
        wrapped = _bound_method(facts, argument) if instance else facts.function_target(argument)
        line, end = (wrapped[0].node.lineno, wrapped[0].node.end_lineno) if wrapped else (statement.lineno, statement.end_lineno)
        start = min(line, statement.lineno)
        yield _make(path, module, root, statement.targets[0].id, start, max(end or start, statement.end_lineno or start),
                    options, None, instance)


def _instance_receiver(facts: FileFacts, expr: ast.expr) -> str | None:
    """`model` in `tfcheck.aot(model.serve)`, when `model` is assigned at module level (an
    imported module's function, `tfcheck.aot(mod.fn)`, is no method)."""
    if not (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)):
        return None
    bindings = facts.module_scope.bindings.get(expr.value.id, [])
    return expr.value.id if bindings and all(b.kind == "assign" for b in bindings) else None


def _bound_method(facts: FileFacts, expr: ast.expr) -> list[FunctionInfo]:
    """The method `model.serve` is, when `model`'s class is defined in the file (for the lines
    that the lint gate checks)."""
    assert isinstance(expr, ast.Attribute)
    cls = facts.instance_class(expr.value)
    method = facts.method_of(cls, expr.attr) if cls is not None else None
    return [method] if method is not None else []


def _unwrap_tf_function(facts: FileFacts, expr: ast.expr) -> ast.expr:
    """`tf.function(f, ...)` -> `f`, so that the lint gate covers the wrapped function's lines."""
    if isinstance(expr, ast.Call) and expr.args and facts.resolve(expr.func) in facts.tf_function_names:
        return expr.args[0]
    return expr


def _make(path: Path, module: str, root: Path, qualname: str, line: int, end_line: int,
          call: ast.Call | None, problem: str | None, instance: str | None = None) -> AnnotatedFunction:
    keywords = {k.arg: k.value for k in call.keywords if k.arg} if call is not None else {}
    targets, targets_problem = _targets(keywords.get("targets"))
    name = _literal(keywords.get("name"))
    dims, dims_problem = _dims(f"{module}.{qualname}", keywords.get("dims"))
    return AnnotatedFunction(
        path=path, module=module, root=root, qualname=qualname, line=line, end_line=end_line,
        name=name, shapes=_literal(keywords.get("shapes")), dims=dims, targets=targets,
        problem=problem or targets_problem or dims_problem or _name_problem(f"{module}.{qualname}", name),
        instance=instance,
    )


def _dims(label: str, node: ast.expr | None) -> tuple[dict[str, Any] | None, str | None]:
    """A literal `dims=` checked before anything is traced (the decorator raises the same error
    when the module is imported); a non-literal one is left to the traced wrapper's options."""
    from tfcheck.aot import normalize_dims

    value = _literal(node)
    if node is None or value is None:
        return None, None
    try:
        return normalize_dims(value), None
    except ValueError as error:
        return None, f"{label}: line {node.lineno}: {error}"


def _name_problem(label: str, name: Any) -> str | None:
    """Why a literal `name=` cannot name an artifact (it becomes a folder under --out), found
    before anything is traced; the traced name is checked again by the build (compiler/build/driver.py)."""
    if name is None:  # absent, or not a literal
        return None
    try:
        check_name(name, "artifact name")
    except UnsafePathError as error:
        return f"{label}: {error}"
    return None


def _targets(node: ast.expr | None) -> tuple[list[str] | None, str | None]:
    """`targets=` as a list of strings (None when absent, None or empty), or why it cannot be used:
    the build decides what to compile before importing anything, so unlike `shapes=` it must be
    written as a literal."""
    if node is None:
        return None, None
    value = _literal(node)
    if isinstance(value, str):
        value = [value]
    if value is None and isinstance(node, ast.Constant):
        return None, None
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        return None, (f"targets= on line {node.lineno} must be a literal string or list of strings "
                      "(\"cpu\", \"cuda\" or target JSON): tfcheck build reads it without importing the module")
    return list(value) or None, None


def _literal(node: ast.expr | None) -> Any:
    """The value of a literal keyword argument; None when absent or not a literal (the traced
    wrapper's `aot_options` is authoritative anyway)."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None
