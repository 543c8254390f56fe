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
import posixpath
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
    (functions other files call from graph code), the kinds of classes other files build on, and the
    arguments of calls into other files that reach the graph there.

    Two files of a run can have the same module name (scripts in folders without `__init__.py`): each
    is linted, and a call into that name resolves to the one in the caller's folder, as Python's
    `sys.path[0]` does for a script, else to the first of them. A name a file imports the way a script
    run from a subfolder does (`from tf2 import efficientdet_keras` for the run's
    `efficientdet.tf2.efficientdet_keras`) resolves to the one module of the run it ends with.

    Arguments cross files in two steps: a file's rules ask whether an argument of a call into another
    module reaches the graph (`FileResult.asked_arguments`); the callee's file, analysed with that
    function as a root, says which of its parameters do (`FileResult.parameter_sinks`); the asking
    file is analysed again with the arguments that do (`FileJob.reaching_arguments`).
    """

    def __init__(self, jobs: Sequence[FileJob]) -> None:
        self._jobs = {job.display: job for job in jobs}
        self._by_module: dict[str, list[str]] = {}  # module -> displays of the files with that name
        for job in jobs:
            self._by_module.setdefault(job.module, []).append(job.display)
        self._by_suffix: dict[str, set[str]] = {}
        for module in self._by_module:
            parts = module.split(".")
            for cut in range(1, len(parts)):
                self._by_suffix.setdefault(".".join(parts[cut:]), set()).add(module)
        self._roots: dict[str, dict[str, str]] = {}  # display -> function -> why it is graph code
        self._kinds: dict[str, str] = {}  # qualified class -> model or layer
        self._bases: dict[str, list[str]] = {}  # display -> the bases its classes take from other modules
        self._given_kinds: dict[str, tuple[tuple[str, str], ...]] = {}  # display -> kinds its job carries
        self._asked: dict[str, list[tuple[str, str]]] = {}  # display -> arguments its rules asked about
        self._sinks: dict[str, set[tuple[str, str]]] = {}  # display -> (function, argument) reaching there
        self._reaching: dict[str, tuple[tuple[str, str], ...]] = {}  # display -> arguments its job carries

    def absorb(self, results: Iterable[FileResult]) -> list[FileJob]:
        """Take in the summaries of `results` (in order: the first call to a function names its reason);
        the jobs of the files that gained roots, class kinds or reaching arguments, with all of them, in
        module order."""
        changed: set[str] = set()
        for result in results:
            self._take_calls(result, changed)
            self._kinds.update(result.class_kinds)
            if result.path in self._jobs:
                self._bases[result.path] = result.foreign_bases
                self._asked[result.path] = result.asked_arguments
                self._sinks[result.path] = set(result.parameter_sinks)
        for display, bases in self._bases.items():
            kinds = tuple(sorted((base, self._kinds[name]) for base in bases
                                 if (name := self._resolve(base, display)) is not None and name in self._kinds))
            if kinds != self._given_kinds.get(display, ()):
                self._given_kinds[display] = kinds
                changed.add(display)
        for display, asked in self._asked.items():
            reaching = tuple(sorted(question for question in asked if self._reaches(question, display)))
            if reaching != self._reaching.get(display, ()):
                self._reaching[display] = reaching
                changed.add(display)
        return [replace(self._jobs[display], extra_roots=tuple(sorted(self._roots.get(display, {}).items())),
                        foreign_kinds=self._given_kinds.get(display, ()),
                        reaching_arguments=self._reaching.get(display, ()))
                for display in sorted(changed, key=lambda display: (self._jobs[display].module, display))]

    def _take_calls(self, result: FileResult, changed: set[str]) -> None:
        for target, caller, line in result.external_calls:
            display, function = self._split_target(target, result.path)
            if display is None:
                continue
            file_roots = self._roots.setdefault(display, {})
            if function not in file_roots:
                file_roots[function] = f"called from graph code in {caller} ({result.path}:{line})"
                changed.add(display)

    def _reaches(self, question: tuple[str, str], asker: str) -> bool:
        """Whether the argument `question` names reaches the graph in the file its target is in."""
        target, argument = question
        display, function = self._split_target(target, asker)
        return display is not None and (function, argument) in self._sinks.get(display, ())

    def _resolve(self, name: str, near: str) -> str | None:
        """`name` with its module part as the run names that module, or None outside the run."""
        display, rest = self._split_target(name, near)
        return f"{self._jobs[display].module}.{rest}" if display is not None else None

    def _split_target(self, target: str, near: str) -> tuple[str | None, str]:
        """Split `pkg.mod.Class.method` into the file of the longest module of the run and the rest; a
        module named as the run names it, or by the one module of the run that ends with it."""
        parts = target.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            endings = self._by_suffix.get(module, set())
            if module not in self._by_module and len(endings) == 1:
                module = next(iter(endings))
            if module in self._by_module:
                return self._nearest(self._by_module[module], near), ".".join(parts[cut:])
        return None, target

    @staticmethod
    def _nearest(displays: list[str], near: str) -> str:
        """Of the files with one module name, the one in the folder of `near`, else the first."""
        folder = posixpath.dirname(near)
        return next((display for display in displays if posixpath.dirname(display) == folder), displays[0])
