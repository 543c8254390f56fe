"""Which files a run lints: walking folders, `include`, `.gitignore`, `exclude`, and paths that do not exist.

A folder walk lints the files `include` (default `*.py`, `*.ipynb`) or `extend-include` match.

Paths given explicitly are linted even when `exclude` matches them (as in ruff), unless
`force_exclude` is set: the pre-commit hook sets it, because pre-commit passes every staged file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tfcheck.config import Config

# Folders that never hold code to lint, whatever the ignore files say.
ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox",
                            ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tfcheck_cache", ".tfcheck",
                            "node_modules", "site-packages", ".eggs"})


@dataclass
class Discovery:
    """The files to lint, and problems with the paths asked for (reported, never fatal)."""

    files: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _IgnorePattern:
    base: Path
    regex: re.Pattern[str]
    negated: bool
    directory_only: bool


def _compile_gitignore_line(line: str, base: Path) -> _IgnorePattern | None:
    """Translate one .gitignore line into a regex over paths relative to the file's folder."""
    line = line.rstrip("\n").rstrip()
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    line = line.replace("\\#", "#").replace("\\!", "!")
    directory_only = line.endswith("/")
    line = line.rstrip("/")
    anchored = "/" in line
    line = line.lstrip("/")
    regex = ""
    i = 0
    while i < len(line):
        if line.startswith("**/", i):
            regex += "(?:.*/)?"
            i += 3
        elif line.startswith("/**", i) and i + 3 == len(line):
            regex += "/.*"
            i += 3
        elif line[i] == "*":
            regex += "[^/]*"
            i += 1
        elif line[i] == "?":
            regex += "[^/]"
            i += 1
        elif line[i] == "[":
            end = line.find("]", i + 1)
            if end == -1:
                regex += re.escape(line[i])
                i += 1
            else:
                regex += "[" + line[i + 1:end].replace("!", "^", 1) + "]"
                i = end + 1
        else:
            regex += re.escape(line[i])
            i += 1
    prefix = "" if anchored else "(?:.*/)?"
    return _IgnorePattern(base, re.compile(f"^{prefix}{regex}$"), negated, directory_only)


def _read_gitignore(directory: Path) -> list[_IgnorePattern]:
    try:
        text = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    base = directory.absolute()
    return [p for p in (_compile_gitignore_line(line, base) for line in text.splitlines()) if p]


def _is_ignored(path: Path, is_dir: bool, patterns: Sequence[_IgnorePattern]) -> bool:
    """Git's rule: the last matching pattern wins."""
    ignored = False
    for pattern in patterns:
        if pattern.directory_only and not is_dir:
            continue
        try:
            relative = path.relative_to(pattern.base).as_posix()
        except ValueError:
            continue
        if pattern.regex.match(relative):
            ignored = not pattern.negated
    return ignored


def _inherited_gitignores(directory: Path, stop: Path) -> list[_IgnorePattern]:
    """The .gitignore files of the folders above `directory`, up to the repository root."""
    chain: list[Path] = []
    for parent in (directory, *directory.parents):
        chain.append(parent)
        if (parent / ".git").exists() or parent == stop:
            break
    patterns: list[_IgnorePattern] = []
    for parent in reversed(chain[1:]):
        patterns.extend(_read_gitignore(parent))
    return patterns


def discover(paths: Sequence[Path], config: Config, force_exclude: bool = False) -> Discovery:
    """Expand paths into the sorted, de-duplicated list of files to lint (Python files and notebooks)."""
    found = Discovery()
    seen: set[Path] = set()
    for path in paths:
        if not os.path.lexists(path):
            found.errors.append(f"{path}: no such file or directory")
            continue
        if path.is_dir():
            files = _walk(path, config)
        elif force_exclude and config.is_excluded(config.relative(path), through_parents=True):
            continue
        else:
            files = iter([path])
        for file in files:
            key = Path(os.path.abspath(file))
            if key not in seen:
                seen.add(key)
                found.files.append(file)
    found.files.sort()
    return found


class _Included:
    """`include` + `extend-include` for a folder walk. `*.py`-style patterns are a suffix test on the name
    (a walk meets every file of a monorepo); other globs are matched against the path from the config's folder."""

    def __init__(self, config: Config) -> None:
        patterns = config.include + config.extend_include
        self.config = config
        self.suffixes = tuple(p[1:] for p in patterns if _SUFFIX_GLOB.fullmatch(p))
        self.globs = any(not _SUFFIX_GLOB.fullmatch(p) for p in patterns)

    def __call__(self, name: str, path: Path) -> bool:
        if name.endswith(self.suffixes):
            return True
        return self.globs and self.config.is_included(self.config.relative(path))


_SUFFIX_GLOB = re.compile(r"\*\.[\w.-]+")


def _walk(root: Path, config: Config) -> Iterator[Path]:
    """Included files under `root`, skipping ignored and excluded folders; never follows symlinked folders."""
    included = _Included(config)
    inherited = _inherited_gitignores(root.absolute(), config.root) if config.respect_gitignore else []
    stack: list[tuple[Path, list[_IgnorePattern]]] = [(root, inherited)]
    while stack:
        directory, patterns = stack.pop()
        if config.respect_gitignore:
            patterns = patterns + _read_gitignore(directory)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir and entry.name in ALWAYS_SKIPPED:
                continue
            if config.exclude and config.is_excluded(config.relative(path)):
                continue
            if patterns and _is_ignored(path.absolute(), is_dir, patterns):
                continue
            if is_dir:
                stack.append((path, patterns))
            elif included(entry.name, path):
                yield path
