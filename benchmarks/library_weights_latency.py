"""Per-call latency of one model exported two ways: its packed weights inside `lib.so`, or in the
artifact's weights file beside it (`compiler/build/library_weights.py`), interleaved in one process.

    .venv/bin/python benchmarks/stage_memory.py compile WORK --constants-in-library   # WORK/embedded
    .venv/bin/python benchmarks/stage_memory.py compile WORK                          # WORK/library
    .venv/bin/python benchmarks/library_weights_latency.py WORK [--rounds 20] [--calls 20]

Both load through the runtime's own loader (`tfcheck.runtime.tvm_backend.Executable`, as
`tfcheck.load` does) and run on `WORK/io.npz`'s inputs: each round times `--calls` calls of one,
then of the other, so that the machine's load moves both alike. Output: the median per-call time
of each and their ratio, as Markdown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tfcheck.runtime.bundled import wheel_libraries  # noqa: E402
from tfcheck.runtime.inputs import aligned  # noqa: E402
from tfcheck.runtime.manifest import ENTRY  # noqa: E402
from tfcheck.runtime.tvm_backend import Executable  # noqa: E402
from tfcheck.runtime.weights import WEIGHTS, read_weights  # noqa: E402


def load(folder: Path) -> Executable:
    """`folder/lib.so`, with the values of `folder/weights.npz` when there is one."""
    weights = folder / WEIGHTS
    values = read_weights(weights, len(np.load(weights).files)) if weights.exists() else ()
    return Executable(folder / "lib.so", ENTRY, "cpu", wheel_libraries("cpu"), values)


def per_call_ms(executable: Executable, inputs: list[np.ndarray], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        executable.run(inputs)
    return (time.perf_counter() - started) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    data = np.load(args.work / "io.npz")
    inputs = [aligned(data[f"input_{i}"]) for i in range(sum(key.startswith("input_") for key in data.files))]
    executables = {"weights in lib.so": load(args.work / "embedded"), "weights file": load(args.work / "library")}
    outputs = [executable.run(inputs) for executable in executables.values()]  # warm-up, and the same result
    assert all(np.array_equal(a, b) for a, b in zip(*outputs)), "the two exports differ"
    times: dict[str, list[float]] = {name: [] for name in executables}
    for _ in range(args.rounds):
        for name, executable in executables.items():
            times[name].append(per_call_ms(executable, inputs, args.calls))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print("| export | median ms per call |\n|---|---:|")
    for name, median in medians.items():
        print(f"| {name} | {median:.4g} |")
    print(f"\nweights file / weights in lib.so: {medians['weights file'] / medians['weights in lib.so']:.3f}")


if __name__ == "__main__":
    main()
