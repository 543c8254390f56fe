"""An unchanged rebuild of fixtures/aot: wall time, and whether the main process imported TVM or TensorFlow.

    .venv/bin/python benchmarks/build_unchanged.py [--large] [--repeat 3]

fixtures/aot is copied into a fresh folder and built once (`--jobs 2`) into a fresh cache; then
it is rebuilt unchanged `--repeat` times on the fast path (docs/build.md, "Incremental builds"),
and as many times with the cache's record of the host CPU removed before each run: what an
unchanged rebuild cost when the main process imported TVM to name the host CPU for the fast key.
Each row: the median wall time of the `tfcheck build` process (start to exit), the statuses, and
the heavy modules the main process imported. ResNet50, MobileNetV2 and EfficientNetB0 take minutes
each to compile on a 2-core machine, so they are left out unless `--large` is given.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LARGE = ("resnet50.py", "mobilenet_v2.py", "efficientnet_b0.py")
# `tfcheck build` in a fresh process; the last line on stderr lists the heavy modules it imported.
BUILD = """
import atexit, json, sys
from tfcheck.cli import main
atexit.register(lambda: print(json.dumps([m for m in ("tvm", "tensorflow") if m in sys.modules]), file=sys.stderr))
main(["build", ".", "--cache-dir", sys.argv[1], "--jobs", "2", "--format", "json"])
"""


def build(folder: Path, cache: Path) -> tuple[float, list[str], list[str]]:
    """Wall seconds, the records' statuses and the heavy modules imported, for one build."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", BUILD, str(cache)], cwd=folder, capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"tfcheck build failed ({done.returncode}):\n{done.stderr}")
    statuses = [record["status"] for record in json.loads(done.stdout)["functions"]]
    return wall, statuses, json.loads(done.stderr.splitlines()[-1])


def row(name: str, runs: list[tuple[float, list[str], list[str]]]) -> str:
    walls = [wall for wall, _, _ in runs]
    _, statuses, imported = runs[-1]
    counts = ", ".join(f"{statuses.count(s)} {s}" for s in sorted(set(statuses)))
    return (f"| {name} | {statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f}) | {counts} | "
            f"{', '.join(imported) or 'neither'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", action="store_true", help="also ResNet50, MobileNetV2 and EfficientNetB0")
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tfcheck-unchanged-"))
    folder, cache = work / "aot", work / "cache"
    shutil.copytree(REPO / "fixtures" / "aot", folder,
                    ignore=shutil.ignore_patterns("__pycache__", *(() if arguments.large else LARGE)))
    files = sorted(path.name for path in folder.glob("*.py"))
    try:
        cold = build(folder, cache)
        fast = [build(folder, cache) for _ in range(arguments.repeat)]
        with_tvm = []
        for _ in range(arguments.repeat):
            for record in (cache / ".fastkeys").glob("host-cpu-*.json"):
                record.unlink()
            with_tvm.append(build(folder, cache))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"fixtures/aot files built: {', '.join(files)}")
    print("| build | wall s, median (min-max) | statuses | main process imported |")
    print("|---|---:|---|---|")
    print(row("cold (empty cache)", [cold]))
    print(row("unchanged, host CPU recorded in the cache", fast))
    print(row("unchanged, host CPU not recorded (asks TVM, as before)", with_tvm))


if __name__ == "__main__":
    main()
