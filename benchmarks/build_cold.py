"""A cold build (a new cache) of small fixtures, with the fork server and without it: wall time.

    .venv/bin/python benchmarks/build_cold.py [--rounds 3] [FILE ...]

Each round builds the files (default: fixtures/aot's mlp, range_loop, symbolic and attention,
five functions; `mlp.py` alone for one) into a new cache twice, in turns: as `tfcheck build`
does by default, tracing and compiling children forked from servers that imported TensorFlow and
TVM once (docs/build.md, "Where a small function's build time goes"), and with
`TFCHECK_FORK_SERVER=0`, a fresh process per child. Prints each round's wall seconds (start to
exit of the `tfcheck build` process) and the medians with their ratio. Figures: docs/build.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMALL = ["mlp.py", "range_loop.py", "symbolic.py", "attention.py"]
MODES = {"forked": "1", "fresh": "0"}


def build(files: list[str], switch: str) -> float:
    """Wall seconds of one `tfcheck build` of `files` into a new cache."""
    environment = {**os.environ, "TFCHECK_FORK_SERVER": switch, "TF_CPP_MIN_LOG_LEVEL": "2"}
    with tempfile.TemporaryDirectory(prefix="tfcheck-cold-") as cache:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "tfcheck", "build", *files, "--cache-dir", cache],
                              cwd=REPO, env=environment, capture_output=True, text=True)
        seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"tfcheck build failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="files to build (default: four small fixtures of fixtures/aot)")
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    files = arguments.files or [f"fixtures/aot/{name}" for name in SMALL]
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    for round_number in range(arguments.rounds):
        for mode, switch in MODES.items():
            times[mode].append(build(files, switch))
        print(f"round {round_number + 1}: " + ", ".join(f"{mode} {times[mode][-1]:.1f} s" for mode in MODES))
    medians = {mode: statistics.median(values) for mode, values in times.items()}
    print(f"median: forked {medians['forked']:.1f} s, fresh {medians['fresh']:.1f} s, "
          f"forked/fresh {medians['forked'] / medians['fresh']:.2f}")


if __name__ == "__main__":
    main()
