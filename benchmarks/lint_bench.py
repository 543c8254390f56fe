"""Benchmark `tfcheck check` against pylint and Fixit on real TensorFlow code; one re-runnable command.

    .venv/bin/python benchmarks/lint_bench.py                      # print the table
    .venv/bin/python benchmarks/lint_bench.py --write-docs docs/benchmarks.md

The corpus is a copy (in a temporary folder, so a file can be changed) of the TensorFlow and Keras
sources in site-packages (`tensorflow/python`, `keras/src`: ~966k lines). tfcheck runs on all of it:
cold (empty cache), warm (nothing changed) and after changing one file. pylint and Fixit are ~10x
slower, so they run on a subset of whole files of at least `--subset-lines` lines, with tfcheck
(`--no-cache`) on the same subset for a side-by-side figure. Peak memory is the largest sum of the
resident sizes of a command's process tree (main process plus pool workers), sampled every 20 ms.
Every command runs in its own process, as a user or a CI job would run it, on a copy of tfcheck's code
taken when the benchmark starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SITE = Path(sysconfig.get_paths()["purelib"])


def installed_folder(package: str) -> Path:
    """Where this interpreter finds `package`, without importing it: a worktree's venv reaches the main
    venv's site-packages through a path entry, so the package need not be in this venv's own SITE."""
    spec = importlib.util.find_spec(package)
    locations = spec.submodule_search_locations if spec is not None else None
    return Path(locations[0]) if locations else SITE / package


SOURCES = (installed_folder("tensorflow") / "python", installed_folder("keras") / "src")
BIN = Path(sys.executable).parent
SECTION = "## Linter"


@dataclass
class Measurement:
    """One timed command."""

    label: str
    tool: str
    lines: int
    seconds: float
    cpu_seconds: float  # user + system time of the whole process tree: what the run costs on an idle machine
    peak_mib: float
    command: str

    @property
    def lines_per_second(self) -> float:
        return self.lines / self.seconds if self.seconds else float("inf")


def count_lines(files: list[Path]) -> int:
    return sum(path.read_bytes().count(b"\n") + 1 for path in files)


def copy_corpus(sources: tuple[Path, ...], destination: Path) -> list[Path]:
    """Copy the Python files of `sources` under `destination`; returns them sorted."""
    for source in sources:
        shutil.copytree(source, destination / f"{source.parent.name}_{source.name}",
                        ignore=lambda folder, names: [n for n in names if not (n.endswith(".py") or
                                                                                Path(folder, n).is_dir())])
    return sorted(destination.rglob("*.py"))


def subset(files: list[Path], lines: int) -> list[Path]:
    """Whole files, in path order from the middle of the corpus (ops and layers), up to `lines` lines."""
    chosen: list[Path] = []
    total = 0
    for path in files[len(files) // 3:]:
        chosen.append(path)
        total += path.read_bytes().count(b"\n") + 1
        if total >= lines:
            break
    return chosen


def _tree_rss_kib(pid: int) -> int:
    """Resident KiB of a process and all its descendants (Linux /proc)."""
    total = 0
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
            for task in Path(f"/proc/{current}/task").iterdir():
                stack.extend(int(child) for child in (task / "children").read_text().split())
        except (OSError, StopIteration, ValueError):
            continue
    return total


def run(label: str, tool: str, command: list[str], lines: int, cwd: Path) -> Measurement:
    """Run a command, timing it and sampling the memory of its process tree."""
    peak = 0
    cpu_before = _children_cpu()
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kib(process.pid))
            done.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, stderr = process.communicate()
    seconds = time.perf_counter() - started
    cpu_seconds = _children_cpu() - cpu_before
    done.set()
    sampler.join()
    if b"internal error" in stderr or b"Traceback" in stderr:
        raise SystemExit(f"{label}: {tool} failed:\n{stderr.decode(errors='replace')[-2000:]}")
    shown = " ".join(os.path.relpath(part, cwd) if part.startswith(str(cwd)) else Path(part).name if
                     part.startswith(str(BIN)) else part for part in command)
    return Measurement(label, tool, lines, seconds, cpu_seconds, peak / 1024, shown)


def _children_cpu() -> float:
    """User + system seconds of every finished child process (and the descendants they waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tfcheck(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "tfcheck", "check", "--format", "json", "--exit-zero", *arguments]


def snapshot_code(destination: Path) -> None:
    """Copy tfcheck and its rules, and run that copy (PYTHONPATH wins over the editable install).

    The cache key digests tfcheck's sources, so an edit to the working tree during the benchmark would
    turn the warm run into a cold one; the copy keeps the code fixed for the whole benchmark.
    """
    import tfcheck
    import tfcheck.rules

    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(tfcheck.__file__).parent, destination / "tfcheck", ignore=skip)
    shutil.copytree(Path(tfcheck.rules.__file__).parent, destination / "tfcheck" / "rules", ignore=skip,
                    dirs_exist_ok=True)  # already there when the code run is a copy laid out as installed
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(destination), os.environ.get("PYTHONPATH")]))


def measure(corpus: Path, files: list[Path], small: list[Path], jobs: int, others: bool) -> list[Measurement]:
    total, subset_lines = count_lines(files), count_lines(small)
    cache = corpus / "cache"
    tree = [str(corpus / "src" / "tensorflow_python"), str(corpus / "src" / "keras_src")]
    results = [
        run("full corpus, cold (empty cache)", "tfcheck", tfcheck("-j", str(jobs), "--cache-dir", str(cache), *tree),
            total, corpus),
        run("full corpus, warm (nothing changed)", "tfcheck",
            tfcheck("-j", str(jobs), "--cache-dir", str(cache), *tree), total, corpus),
    ]
    changed = next(path for path in files if "ops/array_ops.py" in path.as_posix())
    changed.write_text(changed.read_text() + "\n\ndef _benchmark_edit():\n    return 1\n")
    results.append(run(f"full corpus, one file changed ({changed.name})", "tfcheck",
                       tfcheck("-j", str(jobs), "--cache-dir", str(cache), *tree), total, corpus))
    names = [str(path) for path in small]
    results.append(run("subset, cold", "tfcheck", tfcheck("-j", str(jobs), "--no-cache", *names), subset_lines, corpus))
    if others:
        results.append(run("subset", "pylint", [str(BIN / "pylint"), f"--jobs={jobs}", "--disable=C,R,I",
                                                "--score=n", "--exit-zero", *names], subset_lines, corpus))
        results.append(run("subset", "fixit", [str(BIN / "fixit"), "lint", *names], subset_lines, corpus))
    return results


def table(results: list[Measurement]) -> str:
    rows = ["| run | tool | lines | wall s | lines/s (wall) | CPU s | lines per CPU s | peak memory (MiB) |",
            "|---|---|--:|--:|--:|--:|--:|--:|"]
    rows += [f"| {m.label} | {m.tool} | {m.lines:,} | {m.seconds:.2f} | {m.lines_per_second:,.0f} | "
             f"{m.cpu_seconds:.2f} | {m.lines / max(m.cpu_seconds, 1e-9):,.0f} | {m.peak_mib:,.0f} |" for m in results]
    return "\n".join(rows)


def _folders(files: list[Path]) -> str:
    return ", ".join(sorted({f"`{'/'.join(path.parent.parts[-2:])}/`" for path in files}))


def section(results: list[Measurement], files: int, small_files: list[Path], jobs: int) -> str:
    small = len(small_files)
    machine = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    return "\n".join([
        SECTION, "",
        f"Reproduce: `.venv/bin/python benchmarks/lint_bench.py --jobs {jobs} --write-docs docs/benchmarks.md` "
        "(copies the corpus to a temporary folder; every command runs in its own process).", "",
        f"Corpus: the TensorFlow 2.21 and Keras 3 sources from site-packages (`tensorflow/python`, `keras/src`; "
        f"{files:,} files). pylint (`--disable=C,R,I`, i.e. errors and warnings) and Fixit (default rules) are "
        f"an order of magnitude slower, so they run on a subset of {small:,} whole files, with tfcheck on the "
        "same subset beside them. Peak memory: the largest sum of resident sizes over the command's process "
        "tree (main process plus pool workers), sampled every 20 ms. CPU s: user + system time of the "
        "whole process tree; on a machine shared with other jobs, wall time overstates what a run costs, "
        "CPU time does not (lines per CPU s is about what one otherwise idle core does).", "",
        f"Subset: {_folders(small_files)}.", "",
        f"Machine: {machine}. Timings on a shared machine are noisy; re-run for figures to quote.", "",
        table(results), "",
        "Targets (issue 3): cold >= 20,000 lines/s, warm >= 500,000 lines/s, one changed file in a warm tree "
        "< 1 s end to end, peak memory < 1 GB.", "",
        "Commands:", "",
        *[f"- {m.tool} ({m.label}): `{m.command if len(m.command) < 200 else m.command[:200] + ' ...'}`"
          for m in results], "",
    ])


def write_section(document: Path, text: str) -> None:
    """Replace the `## Linter` section of `document` (up to the next `## ` heading), or append it."""
    existing = document.read_text(encoding="utf-8") if document.exists() else "# Benchmarks\n"
    lines = existing.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == SECTION), None)
    if start is None:
        updated = existing.rstrip("\n") + "\n\n" + text
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        updated = "\n".join(lines[:start] + text.rstrip("\n").splitlines() + ([""] + lines[end:] if end < len(lines) else []))
    document.write_text(updated.rstrip("\n") + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes for every tool")
    parser.add_argument("--subset-lines", type=int, default=25_000, help="lines given to pylint and Fixit")
    parser.add_argument("--skip-others", action="store_true", help="run tfcheck only")
    parser.add_argument("--write-docs", type=Path, help="replace the '## Linter' section of this markdown file")
    args = parser.parse_args()
    missing = [str(source) for source in SOURCES if not source.is_dir()]
    if missing:
        raise SystemExit(f"corpus not installed: {', '.join(missing)}")
    with tempfile.TemporaryDirectory(prefix="tfcheck-lint-bench-") as folder:
        corpus = Path(folder)
        snapshot_code(corpus / "code")
        files = copy_corpus(SOURCES, corpus / "src")
        small = subset(files, args.subset_lines)
        results = measure(corpus, files, small, args.jobs, not args.skip_others)
    print(table(results))
    if args.write_docs is not None:
        write_section(args.write_docs, section(results, len(files), small, args.jobs))
        print(f"wrote the {SECTION!r} section of {args.write_docs}")


if __name__ == "__main__":
    main()
