"""The project pass: graph code that only another file of the run makes graph code, and Keras
classes built on another file's.

A function is graph code when graph code calls it, in its own file (the engine follows those calls)
or in another file of the run. Each file's result carries its summary for this pass, the calls its
graph code makes into other modules (`FileResult.external_calls`). The pass resolves each call to the
longest module of the run that prefixes its target and gives the function it names to that file as
an extra root, with the call as its reason; a file that gained roots is analysed again with all of
them, and its new summary may give roots to further files, until no file gains any (a fixed point:
roots only grow, and there are finitely many functions). Classes travel the same way: each summary
names the file's Keras models and layers and the bases its other classes take from other modules; a
file whose bases turn out to be models or layers is analysed again with their kinds, so that its
`train_step` and `call` are graph code too.

Every analysis here runs the rules too, so the last analysis of a file, the one with its final roots,
is its result. Computing all roots first from facts-only summaries, then running the rules once per
file, was measured to cost more, not less (benchmarks/project_pass.py; docs/benchmarks.md, "Project
pass"): reading, parsing and the facts a summary needs are ~80% of a file's analysis, the rules ~20%,
so a summary of every file plus a full analysis of every file took 1.5-1.7x the CPU time, while the
re-analyses here are few (21 besides 770 files' first analyses on a copy of Keras whose calls cross
files). A per-function summary from the engine (the calls each function reaches) would let the fixed
point run without re-analyses, each file that gains roots analysed once more at the end: there, 18
instead of 21.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from tfcheck.findings import FileResult
from tfcheck.jobs import FileJob

# Analyses jobs (in any order, in worker processes or not) and returns their results in job order.
AnalyzeMany = Callable[[Sequence[FileJob]], list[FileResult]]


def analyze_project(jobs: Sequence[FileJob], analyze_many: AnalyzeMany) -> dict[str, FileResult]:
    """Every file analysed with what other files give it: display path -> its final result."""
    results = {job.display: result for job, result in zip(jobs, analyze_many(jobs))}
    project = ProjectFacts(jobs)
    pending: Iterable[FileResult] = results.values()
    while changed := project.absorb(pending):
        pending = analyze_many(changed)
        results.update((result.path, result) for result in pending)
    return results


class ProjectFacts:
    """What files of a run give each other, grown from the summaries of analysed files: extra roots
    (functions other files call from graph code) and the kinds of classes other files build on.

    Two files of a run can have the same module name (scripts in folders without `__init__.py`): each
    is linted, and calls into that name resolve to the first of them. A name a file imports the way a
    script run from a subfolder does (`from tf2 import efficientdet_keras` for the run's
    `efficientdet.tf2.efficientdet_keras`) resolves to the one module of the run it ends with.
    """

    def __init__(self, jobs: Sequence[FileJob]) -> None:
        self._by_module: dict[str, FileJob] = {}
        for job in jobs:
            self._by_module.setdefault(job.module, job)
        self._module_by_display = {job.display: module for module, job in self._by_module.items()}
        self._by_suffix: dict[str, set[str]] = {}
        for module in self._by_module:
            parts = module.split(".")
            for cut in range(1, len(parts)):
                self._by_suffix.setdefault(".".join(parts[cut:]), set()).add(module)
        self._roots: dict[str, dict[str, str]] = {}  # module -> function -> why it is graph code
        self._kinds: dict[str, str] = {}  # qualified class -> model or layer
        self._bases: dict[str, list[str]] = {}  # module -> the bases its classes take from other modules
        self._given_kinds: dict[str, tuple[tuple[str, str], ...]] = {}  # module -> kinds its job carries

    def absorb(self, results: Iterable[FileResult]) -> list[FileJob]:
        """Take in the summaries of `results` (in order: the first call to a function names its reason);
        the jobs of the files that gained roots or class kinds, with all of them, in module order."""
        changed: set[str] = set()
        for result in results:
            self._take_calls(result, changed)
            self._kinds.update(result.class_kinds)
            module = self._module_by_display.get(result.path)
            if module is not None:
                self._bases[module] = result.foreign_bases
        for module, bases in self._bases.items():
            kinds = tuple(sorted((base, self._kinds[name]) for base in bases
                                 if (name := self._resolve(base)) is not None and name in self._kinds))
            if kinds != self._given_kinds.get(module, ()):
                self._given_kinds[module] = kinds
                changed.add(module)
        return [replace(self._by_module[module], extra_roots=tuple(sorted(self._roots.get(module, {}).items())),
                        foreign_kinds=self._given_kinds.get(module, ())) for module in sorted(changed)]

    def _take_calls(self, result: FileResult, changed: set[str]) -> None:
        for target, caller, line in result.external_calls:
            module, function = self._split_target(target)
            if module is None:
                continue
            file_roots = self._roots.setdefault(module, {})
            if function not in file_roots:
                file_roots[function] = f"called from graph code in {caller} ({result.path}:{line})"
                changed.add(module)

    def _resolve(self, name: str) -> str | None:
        """`name` with its module part as the run names that module, or None outside the run."""
        module, rest = self._split_target(name)
        return f"{module}.{rest}" if module is not None else None

    def _split_target(self, target: str) -> tuple[str | None, str]:
        """Split `pkg.mod.Class.method` into the longest module of the run and the rest; a module named
        as the run names it, or by the one module of the run that ends with it."""
        parts = target.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            if module in self._by_module:
                return module, ".".join(parts[cut:])
            endings = self._by_suffix.get(module, set())
            if len(endings) == 1:
                return next(iter(endings)), ".".join(parts[cut:])
        return None, target
