"""Incremental and parallel `tfcheck build`: cold builds with --jobs 1 and 2, then rebuilds.

    .venv/bin/python benchmarks/build_incremental.py [--models mlp attention cnn_bn lstm] [--jobs 1 2]

The models (files of fixtures/aot/) are copied into a fresh folder. For each --jobs value, a
build from an empty cache; then, with the last cache, an unchanged rebuild that traces every
function again (the fast-key records removed first: what every rebuild cost before them) and an
unchanged rebuild on the fast path. Each row: wall time, CPU time of the build's processes (user +
system, the `tfcheck` process and every child), the largest resident memory of one child and of
all the build's processes together (sampled every 0.1 s), and the statuses.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
TFCHECK = [sys.executable, "-m", "tfcheck"]


class MemoryPeak:
    """The peak RSS of one descendant and of the whole tree of `pid`, sampled in a thread."""

    def __init__(self, pid: int) -> None:
        self.child = self.total = 0
        self._root = psutil.Process(pid)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(0.1):
            try:
                processes = [self._root, *self._root.children(recursive=True)]
                sizes = [process.memory_info().rss for process in processes]
            except psutil.Error:
                continue
            self.child = max(self.child, *sizes[1:], 0)
            self.total = max(self.total, sum(sizes))

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def run_build(folder: Path, cache: Path, jobs: int) -> dict[str, Any]:
    """One `tfcheck build` of `folder`, timed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    process = subprocess.Popen([*TFCHECK, "build", str(folder), "--cache-dir", str(cache), "--jobs", str(jobs),
                                "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=folder)
    peak = MemoryPeak(process.pid)
    stdout, _ = process.communicate()
    peak.stop()
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    statuses = [record["status"] for record in json.loads(stdout)["functions"]]
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "child_peak_mib": peak.child >> 20,
            "total_peak_mib": peak.total >> 20, "statuses": statuses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["mlp", "attention", "cnn_bn", "lstm"])
    parser.add_argument("--jobs", nargs="+", type=int, default=[1, 2])
    arguments = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tfcheck-build-bench-"))
    folder = work / "models"
    folder.mkdir()
    for model in arguments.models:
        shutil.copy(REPO / "fixtures" / "aot" / f"{model}.py", folder)
    rows = []
    for jobs in arguments.jobs:
        cache = work / f"cache-jobs{jobs}"
        rows.append((f"cold, --jobs {jobs}", run_build(folder, cache, jobs)))
    shutil.rmtree(cache / ".fastkeys")
    rows.append((f"unchanged, traced again (no fast key), --jobs {jobs}", run_build(folder, cache, jobs)))
    rows.append((f"unchanged, fast key, --jobs {jobs}", run_build(folder, cache, jobs)))
    print(f"models: {', '.join(arguments.models)}")
    print("| build | wall s | CPU s | peak RSS of one child | peak RSS, all processes | statuses |")
    print("|---|---:|---:|---:|---:|---|")
    for name, row in rows:
        counts = ", ".join(f"{row['statuses'].count(s)} {s}" for s in sorted(set(row["statuses"])))
        print(f"| {name} | {row['wall_s']} | {row['cpu_s']} | {row['child_peak_mib']} MiB | "
              f"{row['total_peak_mib']} MiB | {counts} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
