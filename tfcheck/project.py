"""The project pass: graph code that only another file of the run makes graph code.

A function is graph code when graph code calls it, in its own file (the engine follows those calls)
or in another file of the run. Each file's result carries its summary for this pass, the calls its
graph code makes into other modules (`FileResult.external_calls`). The pass resolves each call to the
longest module of the run that prefixes its target and gives the function it names to that file as
an extra root, with the call as its reason; a file that gained roots is analysed again with all of
them, and its new summary may give roots to further files, until no file gains any (a fixed point:
roots only grow, and there are finitely many functions).

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
    """Every file analysed with the roots other files give it: display path -> its final result."""
    results = {job.display: result for job, result in zip(jobs, analyze_many(jobs))}
    roots = ProjectRoots(jobs)
    pending: Iterable[FileResult] = results.values()
    while changed := roots.add_calls(pending):
        pending = analyze_many(changed)
        results.update((result.path, result) for result in pending)
    return results


class ProjectRoots:
    """The extra roots of each file of a run, grown from the summaries of analysed files.

    Two files of a run can have the same module name (scripts in folders without `__init__.py`): each
    is linted, and calls into that name resolve to the first of them.
    """

    def __init__(self, jobs: Sequence[FileJob]) -> None:
        self._by_module: dict[str, FileJob] = {}
        for job in jobs:
            self._by_module.setdefault(job.module, job)
        self._roots: dict[str, dict[str, str]] = {}  # module -> function -> why it is graph code

    def add_calls(self, results: Iterable[FileResult]) -> list[FileJob]:
        """Take in the summaries of `results` (in order: the first call to a function names its reason);
        the jobs of the files that gained roots, with all their roots, in module order."""
        changed: set[str] = set()
        for result in results:
            for target, caller, line in result.external_calls:
                module, function = self._split_target(target)
                if module is None:
                    continue
                file_roots = self._roots.setdefault(module, {})
                if function not in file_roots:
                    file_roots[function] = f"called from graph code in {caller} ({result.path}:{line})"
                    changed.add(module)
        return [replace(self._by_module[module], extra_roots=tuple(sorted(self._roots[module].items())))
                for module in sorted(changed)]

    def _split_target(self, target: str) -> tuple[str | None, str]:
        """Split `pkg.mod.Class.method` into the longest module of the run and the rest."""
        parts = target.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            if module in self._by_module:
                return module, ".".join(parts[cut:])
        return None, target
