"""What to analyse: one FileJob per file of a run, naming it for users, for config globs and as a module."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tfcheck.config import Config
from tfcheck.engine.modules import module_name_for, module_stem
from tfcheck.shard import Shard


@dataclass(frozen=True)
class FileJob:
    """One file to analyse: where it is, how to show it, and what the project pass found for it (roots
    other files give it, kinds of the classes of other files it builds on, arguments that reach the
    graph in the files it calls).

    `report` is False for files of other shards: only their calls into other modules are wanted.
    """

    path: Path
    display: str  # shown to users: relative to the current folder when inside it
    relative: str  # matched against per-file-ignores and sharded: relative to the config's folder
    module: str
    is_package: bool
    extra_roots: tuple[tuple[str, str], ...] = ()
    # kinds of classes of other files that this file's classes are built on (qualified name, kind)
    foreign_kinds: tuple[tuple[str, str], ...] = ()
    # arguments of its calls into other files that reach the graph there (target as it names it, argument)
    reaching_arguments: tuple[tuple[str, str], ...] = ()
    report: bool = True


class JobMaker:
    """Makes the FileJob of a path, resolving each folder once: pathlib work per file (resolving every
    path component, the cwd, the package chain) was most of the time of a warm run."""

    def __init__(self, config: Config) -> None:
        self.cwd = os.getcwd()
        self.root = str(config.root.resolve())
        self._folders: dict[str, tuple[str, str]] = {}  # folder -> (its real path, its package name)

    def __call__(self, path: Path) -> FileJob:
        absolute = os.path.abspath(path)
        folder, name = os.path.split(absolute)
        real_folder, package = self._folder(folder)
        real = os.path.realpath(absolute) if os.path.islink(absolute) else os.path.join(real_folder, name)
        is_package = name == "__init__.py"
        stem = module_stem(name)
        module = package if is_package else f"{package}.{stem}" if package else stem
        return FileJob(path, _inside(absolute, self.cwd) or path.as_posix(),
                       _inside(real, self.root) or path.as_posix(), module, is_package)

    def _folder(self, folder: str) -> tuple[str, str]:
        if folder not in self._folders:
            package = module_name_for(Path(folder, "__init__.py"))[0]
            self._folders[folder] = (os.path.realpath(folder), package)
        return self._folders[folder]


def _inside(path: str, base: str) -> str | None:
    """`path` relative to `base` (POSIX), or None when it is not inside it."""
    if path == base:
        return "."
    prefix = base.rstrip(os.sep) + os.sep
    return path[len(prefix):].replace(os.sep, "/") if path.startswith(prefix) else None


def make_jobs(files: Sequence[Path], config: Config, shard: Shard | None = None) -> list[FileJob]:
    """One job per file shown under a distinct path (a symlink and its target are one file); with a
    shard, files of other shards are kept for the project pass but not reported."""
    jobs: dict[str, FileJob] = {}
    make = JobMaker(config)
    for path in files:
        job = make(path)
        if shard is not None:
            job = replace(job, report=shard.contains(job.relative))
        jobs.setdefault(job.display, job)
    return list(jobs.values())
