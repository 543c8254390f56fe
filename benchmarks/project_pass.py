"""What the project pass (tfcheck/project.py) costs, against computing all roots from summaries first.

    .venv/bin/python benchmarks/project_pass.py                    # keras/src, and Keras renamed kerasx
    .venv/bin/python benchmarks/project_pass.py --keras OTHER_SITE_PACKAGES/keras
    .venv/bin/python benchmarks/project_pass.py FOLDER ... --repeat 3

Two schedules of the same fixed point, each timed in-process (`tfcheck.runner.lint_paths`, one
process, `-j 1`, CPU time of the process, after a warm-up run that imports everything):

- `analyze_project`: every file analysed in full (facts and rules); a file that gains roots from
  another file's graph code analysed in full again, in each round it gains some (what tfcheck does);
- `summaries_first`: the summary of every file (facts only, no rules: `FileJob.report=False`) to the
  fixed point first, then one full analysis per file with its final roots.

Both must give the same findings (checked). Keras calls itself as `keras.*`, which the engine never
follows into other files (`keras.` is not user code to it), so the renamed copy `kerasx` (imports
rewritten) is where calls cross files.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import tfcheck.runner as runner
from tfcheck.config import Config
from tfcheck.findings import FileResult
from tfcheck.jobs import FileJob
from tfcheck.project import AnalyzeMany, ProjectFacts, analyze_project

KERAS = Path(sysconfig.get_paths()["purelib"]) / "keras"
_KERAS_IMPORT = re.compile(r"\bkeras\.src\b|^(\s*)from keras import|^(\s*)import keras$", re.MULTILINE)


def summaries_first(jobs: Sequence[FileJob], analyze_many: AnalyzeMany) -> dict[str, FileResult]:
    """Roots from facts-only summaries to the fixed point, then each file once with rules."""
    final = {job.display: job for job in jobs}
    pending = analyze_many([replace(job, report=False) for job in jobs])
    roots = ProjectFacts(jobs)
    while changed := roots.absorb(pending):
        final.update((job.display, job) for job in changed)
        pending = analyze_many([replace(job, report=False) for job in changed])
    return {job.display: result for job, result in zip(final.values(), analyze_many(list(final.values())))}


SCHEDULES = {"analyze_project": analyze_project, "summaries_first": summaries_first}


def renamed_keras(keras: Path, folder: Path) -> Path:
    """A copy of Keras as package `kerasx`, its imports of itself rewritten: its src/ folder."""
    target = folder / "kerasx"
    shutil.copytree(keras, target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in target.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        path.write_text(_KERAS_IMPORT.sub(_rename, text), encoding="utf-8")
    return target / "src"


def _rename(match: re.Match[str]) -> str:
    if match[0] == "keras.src":
        return "kerasx.src"
    if match[0].lstrip().startswith("from"):
        return f"{match[1]}from kerasx import"
    return f"{match[2]}import kerasx as keras"


def measure(folder: Path, schedule: str) -> tuple[float, list[int], list[str]]:
    """CPU seconds of one run, the analyses per call of the scheduler, the findings (as JSON)."""
    calls: list[int] = []
    run = runner.Analyzer.run

    def counted(self: runner.Analyzer, jobs: Sequence[FileJob]) -> list[FileResult]:
        calls.append(len(jobs))
        return run(self, jobs)

    runner.Analyzer.run = counted  # type: ignore[method-assign]
    runner.analyze_project = SCHEDULES[schedule]  # type: ignore[assignment]
    try:
        started = time.process_time()
        result = runner.lint_paths([folder], Config(root=folder), jobs=1)
        elapsed = time.process_time() - started
    finally:
        runner.Analyzer.run = run  # type: ignore[method-assign]
        runner.analyze_project = analyze_project
    return elapsed, calls, [str(f.to_dict()) for f in result.findings]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path, help="default: keras/src and a renamed copy of it")
    parser.add_argument("--keras", type=Path, default=KERAS, help="the keras package (default: this Python's)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    if not args.folders and not (args.keras / "src").is_dir():
        parser.error(f"no Keras at {args.keras}: name one with --keras, or give folders")
    with tempfile.TemporaryDirectory() as scratch:
        folders = args.folders or [args.keras / "src", renamed_keras(args.keras, Path(scratch))]
        runner.lint_paths([folders[0]], Config(root=folders[0]), jobs=1)  # warm-up: imports, rule caches
        print("| folder | schedule | analyses per round | CPU s (each run) |\n|---|---|---|---|")
        for folder in folders:
            findings: dict[str, list[str]] = {}
            for schedule in SCHEDULES:
                times = []
                for _ in range(args.repeat):
                    elapsed, calls, findings[schedule] = measure(folder, schedule)
                    times.append(f"{elapsed:.2f}")
                print(f"| {folder.parent.name}/{folder.name} | {schedule} | {calls} | {', '.join(times)} |")
            if len({tuple(f) for f in findings.values()}) != 1:
                raise SystemExit(f"{folder}: the schedules disagree on the findings")


if __name__ == "__main__":
    main()
