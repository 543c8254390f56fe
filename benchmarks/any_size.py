"""Artifacts for inputs of any size against artifacts for one size, on models with image and sequence sizes.

    .venv/bin/python benchmarks/any_size.py [--work /tmp/tfcheck_any_size] [--rounds 8] [--calls 10]

Builds `benchmarks/any_size/models.py` (skipped when WORK already holds the artifacts): Keras
MobileNetV2 for images of 96-224 pixels a side and at 224x224, a Transformer encoder block for
sequences of 16-256 tokens and at 128. Then, in one process and without TensorFlow, loads both
artifacts of each model with `tfcheck.load` and times them in alternating turns of `--calls`
calls on the same input at the fixed size, so that the shared machine's load hits both alike.
Reported per model: the best and the median call of each, and any-size / fixed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# model -> (the artifact for any size, the one for a fixed size, the input at that size)
PAIRS = {
    "MobileNetV2": ("mobilenet_any", "mobilenet_224", (1, 224, 224, 3)),
    "encoder block": ("encoder_any", "encoder_128", (1, 128, 128)),
}


def build(work: Path) -> Path:
    """The exported artifacts of `models.py`, built into `work` unless they are there."""
    out = work / "out"
    if not out.is_dir():
        subprocess.run([str(Path(sys.executable).with_name("tfcheck")), "build", str(HERE / "any_size" / "models.py"),
                        "--out", str(out), "--cache-dir", str(work / "cache")], check=True)
    return out


def turns(functions: dict[str, object], array: np.ndarray, rounds: int, calls: int) -> dict[str, list[float]]:
    """Each function's call times in seconds, `calls` at a time in alternating turns, after a warm-up."""
    for function in functions.values():
        for _ in range(5):
            function(array)
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            for _ in range(calls):
                start = time.perf_counter()
                function(array)
                times[name].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tfcheck_any_size"))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    import tfcheck

    library = tfcheck.load(build(args.work))
    print("| model | any size: best / median (ms) | fixed size: best / median (ms) | any / fixed (median) |")
    print("|---|---:|---:|---:|")
    for model, (any_size, fixed, shape) in PAIRS.items():
        array = np.random.default_rng(0).random(shape, dtype=np.float32)
        times = turns({"any": library[any_size], "fixed": library[fixed]}, array, args.rounds, args.calls)
        best = {name: min(values) * 1e3 for name, values in times.items()}
        median = {name: statistics.median(values) * 1e3 for name, values in times.items()}
        print(f"| {model} | {best['any']:.3f} / {median['any']:.3f} | {best['fixed']:.3f} / {median['fixed']:.3f} | "
              f"{median['any'] / median['fixed']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
