"""`[tool.tfcheck]` in the nearest pyproject.toml (or a tfcheck.toml): loading and validation.

Every key is checked: an unknown key or a value of the wrong type stops the run with a message that
names the file and the key, because a silently ignored typo in a linter's config means rules that
users believe are on are off.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any

from tfcheck.engine.facts import EngineSettings
from tfcheck.findings import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

CONFIG_FILES = ("tfcheck.toml", "pyproject.toml")
# The files a folder walk lints (ruff's default, less stubs): Python files and Jupyter notebooks.
DEFAULT_INCLUDE = ("*.py", "*.ipynb")
# The default set: every rule except the opt-in ones (a prefix never turns an opt-in rule on).
DEFAULT_SELECT = ("TFC",)


class ConfigError(Exception):
    """A configuration problem; the message names the file and the key."""


@dataclass(frozen=True)
class BuildConfig:
    """`[tool.tfcheck.build]`: defaults for `tfcheck build`."""

    target: str | None = None
    cache_dir: str | None = None
    tuning_db: str | None = None
    jobs: int | None = None  # functions built at once (default: the cores)
    # function qualname ("pkg.mod.fn") -> list of shape entries, one artifact per entry
    shapes: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    # function qualname -> {dimension name: (min, max)}: bounds of symbolic dimensions
    dims: Mapping[str, Mapping[str, tuple[int, int | None]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    """The settings of one run."""

    root: Path = field(default_factory=Path.cwd)
    source: Path | None = None
    select: tuple[str, ...] = DEFAULT_SELECT
    extend_select: tuple[str, ...] = ()  # rules on top of `select`: how an opt-in rule is turned on
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    include: tuple[str, ...] = DEFAULT_INCLUDE
    extend_include: tuple[str, ...] = ()
    respect_gitignore: bool = True
    cache_dir: str = ".tfcheck_cache"
    # Findings below it are not reported (nor counted): info is advisory, off unless asked for.
    min_severity: Severity = Severity.WARNING
    engine: EngineSettings = field(default_factory=EngineSettings)
    build: BuildConfig = field(default_factory=BuildConfig)

    def with_overrides(self, **changes: Any) -> Config:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update({key: value for key, value in changes.items() if value is not None})
        return Config(**values)

    def relative(self, path: Path) -> str:
        """A path as shown to users and matched by globs: relative to the config root when inside it."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return path.as_posix()

    def is_excluded(self, relative: str, through_parents: bool = False) -> bool:
        """Whether a path (relative, POSIX) matches an `exclude` glob.

        A folder walk tests each entry as it meets it, so only the entry itself is matched there;
        `through_parents` also matches the folders above it, for files named on the command line.
        """
        return _matches_any(relative, self.exclude, through_parents)

    def is_included(self, relative: str) -> bool:
        """Whether a folder walk lints this file: it matches `include` or `extend-include`."""
        return _matches_any(relative, self.include + self.extend_include, through_parents=False)

    def ignored_codes(self, relative: str) -> tuple[str, ...]:
        """Codes ignored in this file by `ignore` and `per-file-ignores`."""
        codes = list(self.ignore)
        for pattern, file_codes in self.per_file_ignores:
            if _matches_any(relative, (pattern,)):
                codes.extend(file_codes)
        return tuple(codes)

    def fingerprint(self) -> str:
        """A digest of everything that changes findings: part of the lint cache key."""
        data = asdict(self)
        # which files, and which findings are shown: not what a file's analysis finds
        for key in ("root", "source", "cache_dir", "build", "include", "extend_include", "min_severity"):
            data.pop(key)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _matches_any(relative: str, patterns: Sequence[str], through_parents: bool = True) -> bool:
    path = PurePosixPath(relative)
    candidates = [relative]
    if through_parents:
        candidates += [p.as_posix() for p in path.parents if p.as_posix() != "."]
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        for candidate in candidates:
            if fnmatch(candidate, pattern) or fnmatch(PurePosixPath(candidate).name, pattern):
                return True
    return False


def find_config_file(start: Path) -> Path | None:
    """The nearest tfcheck.toml, or pyproject.toml with a [tool.tfcheck] table, at or above `start`."""
    directory = start.resolve()
    if directory.is_file():
        directory = directory.parent
    for candidate_dir in (directory, *directory.parents):
        for name in CONFIG_FILES:
            candidate = candidate_dir / name
            if candidate.is_file() and (name == "tfcheck.toml" or _has_tool_table(candidate)):
                return candidate
    return None


def _has_tool_table(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return False
    return "[tool.tfcheck" in text


def load_config(start: Path | None = None, explicit: Path | None = None) -> Config:
    """Load the configuration for a run started at `start` (default: the current directory)."""
    path = explicit or find_config_file(start or Path.cwd())
    if path is None:
        return Config(root=Path.cwd().resolve())
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    if path.name != "pyproject.toml":  # tfcheck.toml, or any file given with --config: keys at the top
        return parse_table(document, path)
    table = document.get("tool", {}).get("tfcheck")
    if table is None:
        if explicit is not None:
            raise ConfigError(f"{path}: has no [tool.tfcheck] table")
        table = {}
    return parse_table(table, path)


def parse_table(table: Mapping[str, Any], path: Path) -> Config:
    """Validate a `[tool.tfcheck]` table and build a Config from it."""
    where = "[tool.tfcheck]" if path.name == "pyproject.toml" else "tfcheck.toml"
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key {where}.{unknown[0]}; known keys: {', '.join(sorted(_KEYS))}")
    values: dict[str, Any] = {}
    for key, value in table.items():
        target, convert = _KEYS[key]
        values[target] = convert(value, f"{path}: {where}.{key}")
    engine = EngineSettings(function_aliases=values.pop("function_aliases", ()),
                            keras_call_is_graph=values.pop("keras_call_is_graph", True))
    return Config(root=path.parent.resolve(), source=path, engine=engine, **values)


def _codes(value: Any, where: str) -> tuple[str, ...]:
    return check_codes(_strings(value, where), where)


def check_codes(items: Sequence[str], where: str) -> tuple[str, ...]:
    """Rule selectors (`ALL`, a code, a prefix) that each select at least one rule; else ConfigError.

    Shared by the config keys and the command-line options (--select, --ignore), so a typo stops
    the run in both places instead of silently selecting nothing.
    """
    from tfcheck.rule import rule_codes

    codes = rule_codes()
    for item in items:
        if not (item == "ALL" or (item.startswith("TFC") and (item[3:].isdigit() or item == "TFC"))):
            raise ConfigError(f"{where}: {item!r} is not a rule code or prefix such as 'TFC001' or 'TFC0'")
        if item != "ALL" and not any(code.startswith(item) for code in codes):
            raise ConfigError(f"{where}: {item!r} selects no rule; `tfcheck rules` lists them")
    return tuple(items)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _positive(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{where}: expected a whole number of at least 1, got {value!r}")
    return value


def _severity(value: Any, where: str) -> Severity:
    names = [severity.value for severity in Severity]
    if value not in names:
        raise ConfigError(f"{where}: expected one of {', '.join(sorted(names))}, got {value!r}")
    return Severity(value)


def _per_file_ignores(value: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table of glob = [codes], got {value!r}")
    return tuple((pattern, _codes(codes, f"{where}.{pattern!r}")) for pattern, codes in value.items())


def _build(value: Any, where: str) -> BuildConfig:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table, got {value!r}")
    known = {"target": _string, "cache-dir": _string, "tuning-db": _string, "jobs": _positive,
             "shapes": _shapes, "dims": _dims}
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; known keys: {', '.join(sorted(known))}")
    return BuildConfig(**{key.replace("-", "_"): known[key](item, f"{where}.{key}") for key, item in value.items()})


def _shapes(value: Any, where: str) -> dict[str, list[list[list[int]]]]:
    """`"module.function" = [entry, ...]`, each entry a list of shapes, one per input.

    Only this nested form is accepted: a bare shape such as `[1, 8]` would be one input's shape to
    one reader and the shapes of a two-input function to another, and the build would find out only
    after importing TensorFlow. Checked here, so the error names the file, the key and the function.
    """
    if not isinstance(value, dict):
        raise ConfigError(f'{where}: expected a table of "module.function" = [shape entries], got {value!r}')
    return {name: _function_shapes(name, entries, f"{where}.{name}") for name, entries in value.items()}


def _dims(value: Any, where: str) -> dict[str, dict[str, tuple[int, int | None]]]:
    """`"module.function" = { batch = [1, 64], ... }`: bounds of each function's symbolic
    dimensions, checked as `@tfcheck.aot(dims=...)` is, with the file, key and function named."""
    from tfcheck.aot import normalize_dims

    if not isinstance(value, dict):
        raise ConfigError(f'{where}: expected a table of "module.function" = {{ batch = [1, 64] }}, got {value!r}')
    checked = {}
    for function, dims in value.items():
        _check_function_key(function, f"{where}.{function}")
        try:
            checked[function] = normalize_dims(dims) or {}
        except ValueError as error:
            raise ConfigError(f"{where}.{function}: {error}") from None
    return checked


def _check_function_key(function: str, where: str) -> None:
    if not all(part.isidentifier() for part in function.split(".")):
        raise ConfigError(f'{where}: {function!r} is not a dotted function name such as "models.vision.classify"')


def _function_shapes(function: str, entries: Any, where: str) -> list[list[list[int]]]:
    """One function's shape entries, validated; `where` names the file and the key."""
    _check_function_key(function, where)
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{where}: expected a non-empty list of shape entries such as [[[1, 224, 224, 3]]], "
                          f"got {entries!r}")
    for entry in entries:
        if _is_shape(entry) and entry:
            raise ConfigError(f"{where}: entry {entry!r} is a bare shape; each entry lists one shape per input, "
                              f"so write [{entry!r}] for a function with one input")
        if not isinstance(entry, list) or not entry or not all(_is_shape(shape) for shape in entry):
            raise ConfigError(f"{where}: entry {entry!r} is not a list of shapes, one per input, each a list "
                              "of non-negative integers (e.g. [[1, 224, 224, 3]])")
    return entries


def _is_shape(item: Any) -> bool:
    return isinstance(item, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in item)


_KEYS: dict[str, tuple[str, Callable[[Any, str], Any]]] = {
    "select": ("select", _codes),
    "extend-select": ("extend_select", _codes),
    "ignore": ("ignore", _codes),
    "per-file-ignores": ("per_file_ignores", _per_file_ignores),
    "exclude": ("exclude", _strings),
    "include": ("include", _strings),
    "extend-include": ("extend_include", _strings),
    "respect-gitignore": ("respect_gitignore", _boolean),
    "cache-dir": ("cache_dir", _string),
    "function-aliases": ("function_aliases", _strings),
    "keras-call-is-graph": ("keras_call_is_graph", _boolean),
    "min-severity": ("min_severity", _severity),
    "build": ("build", _build),
}
