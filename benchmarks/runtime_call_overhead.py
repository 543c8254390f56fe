"""Per-call overhead of the runtime: `tfcheck.load` calls against the old `tvm_ffi` route.

    .venv/bin/python benchmarks/runtime_call_overhead.py [--work /tmp/tfcheck_call_overhead]
        [--functions add_one,mlp] [--rounds 15] [--calls 500] [--profile] [--before SRC]

Preparation (skipped when WORK/out holds the artifacts already): `tfcheck build --out WORK/out`
of fixtures/aot/mlp.py (64x64 -> 256 -> 10) and of a one-op function written to WORK/src
(`add_one`: float32[1, 4] + 1), whose kernel takes next to nothing, so that its call time is
almost all overhead.

Then, in one process and without TensorFlow, each function is timed through these routes,
interleaved (every round runs every row `--calls` times; reported: the median and the minimum of
the rounds' per-call means, in us):

- `tfcheck.load` call: `lib.add_one(x)`, what a user pays (input checks, the call, the outputs);
- input checks: `CompiledFunction.select` alone (binding, shapes, dtypes, alignment);
- `Executable.run`: the ctypes binding alone (arguments, the call, outputs as NumPy arrays);
- `tvm_ffi` route: `np.from_dlpack(main(tvm_ffi.from_dlpack(x)))` over the same library with the
  `apache-tvm-ffi` package's Cython core, as the runtime did before issue 19;
- `tvm_ffi` call only: `main(tensor)` on a tensor made once: the kernel plus Cython's dispatch,
  the floor the other rows are compared with (overhead = row - floor).

The `tvm_ffi` rows need `apache-tvm-ffi` installed in the same venv (the project's is); it is
imported first, so that the runtime uses the libtvm_ffi.so it opened (one copy per process,
docs/runtime.md "Limits"). The input is 64-byte aligned, so no row times the runtime's alignment
copy. `--profile` adds cProfile's view of the `tfcheck.load` row (ctypes calls count in their
Python caller's own time).

`--before SRC` adds the `tfcheck.load` call of another checkout's `tfcheck` package in SRC (for
the runtime before issue 19: `git archive 9f7c9d7 tfcheck | tar -x -C SRC`), in fresh processes
that alternate with processes of this checkout (`--rounds` each, every one timing `--calls`
calls after as many warm-up calls). A runtime from before issue 19 (no `runtime/ffi.py`) refuses
manifests that list libtvm_ffi.so, so it reads a copy of the artifacts (WORK/out-before) whose
manifests do not; the libraries are the same.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import json
import os
import shutil
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ONE_OP = '''
import tensorflow as tf

import tfcheck


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
def add_one(x):
    return x + 1.0
'''


def prepare(work: Path) -> Path:
    """Build the MLP fixture and the one-op function into WORK/out (unless built already)."""
    out = work / "out"
    if (out / "mlp").is_dir() and (out / "add_one").is_dir():
        return out
    (work / "src").mkdir(parents=True, exist_ok=True)
    (work / "src" / "one_op.py").write_text(ONE_OP)
    tfcheck = str(Path(sys.executable).with_name("tfcheck"))
    subprocess.run([tfcheck, "build", str(REPO / "fixtures" / "aot" / "mlp.py"), str(work / "src" / "one_op.py"),
                    "--out", str(out), "--cache-dir", str(work / "cache"), "-j", "1"], check=True)
    return out


def routes(out: Path, name: str) -> dict[str, Callable[[], Any]]:
    """The rows for function `name`: each a call of it on one fixed input."""
    import numpy as np

    import tfcheck
    from tfcheck.runtime.inputs import aligned

    function = tfcheck.load(out)[name]
    artifact = function.artifacts[0]
    spec = artifact.manifest.inputs[0]
    x = aligned(np.random.default_rng(0).standard_normal(spec.shape).astype(spec.dtype))
    executable = artifact.open()
    rows: dict[str, Callable[[], Any]] = {
        "`tfcheck.load` call": lambda: function(x),
        "input checks (`select`)": lambda: function.select((x,), {}),
        "`Executable.run` (the binding)": lambda: executable.run([x]),
    }
    if importlib.util.find_spec("tvm_ffi") is not None:
        rows.update(_tvm_ffi_rows(artifact.manifest.library_path, artifact.manifest.entry, x, function(x)))
    return rows


def _tvm_ffi_rows(library: Path, entry: str, x: Any, expected: Any) -> dict[str, Callable[[], Any]]:
    """The same library through `tvm_ffi`'s Cython core (the runtime's route before issue 19)."""
    import numpy as np
    import tvm_ffi

    vm = tvm_ffi.load_module(str(library))["vm_load_executable"]()
    vm["vm_initialization"](1, 0, 2)  # CPU, pooled allocator, as tvm_backend does
    main = vm[entry]
    tensor = tvm_ffi.from_dlpack(x)
    assert np.array_equal(np.from_dlpack(main(tensor)), expected), "the routes disagree"
    return {"`tvm_ffi` route": lambda: np.from_dlpack(main(tvm_ffi.from_dlpack(x))),
            "`tvm_ffi` call only (floor)": lambda: main(tensor)}


def measure(rows: dict[str, Callable[[], Any]], rounds: int, calls: int) -> dict[str, list[float]]:
    """Per-call means (us) of each row, one per round, the rows interleaved within each round."""
    means: dict[str, list[float]] = {row: [] for row in rows}
    for call in rows.values():  # warm up: the VM of this thread, pools, caches
        for _ in range(calls):
            call()
    for _ in range(rounds):
        for row, call in rows.items():
            start = time.perf_counter()
            for _ in range(calls):
                call()
            means[row].append((time.perf_counter() - start) / calls * 1e6)
    return means


def report(name: str, means: dict[str, list[float]]) -> None:
    floor_row = "`tvm_ffi` call only (floor)"
    floor = statistics.median(means[floor_row]) if floor_row in means else None
    print(f"\n{name}\n\n| route | median (us) | min (us) | median - floor (us) |\n|---|---:|---:|---:|")
    for row, values in means.items():
        median = statistics.median(values)
        over = "" if floor is None or row.startswith("input checks") else f"{median - floor:.1f}"
        print(f"| {row} | {median:.1f} | {min(values):.1f} | {over} |")


def without_ffi_record(out: Path, work: Path) -> Path:
    """A copy of the artifacts whose manifests do not list libtvm_ffi.so, as the runtime before
    issue 19 expects (it took libtvm_ffi.so from the apache-tvm-ffi package)."""
    copy = work / "out-before"
    if not copy.is_dir():
        shutil.copytree(out, copy)
        for manifest in copy.glob("*/manifest.json"):
            record = json.loads(manifest.read_text())
            record["runtime"]["libraries"].pop("libtvm_ffi.so", None)
            manifest.write_text(json.dumps(record, indent=2))
    return copy


def fresh_process_rows(out: Path, work: Path, before: Path, name: str, rounds: int,
                       calls: int) -> dict[str, list[float]]:
    """`tfcheck.load` calls of this checkout and of `before`, one fresh process per round each,
    alternating."""
    before_out = out if (before / "tfcheck" / "runtime" / "ffi.py").is_file() else without_ffi_record(out, work)
    folders = {f"`tfcheck.load` call, {before} (fresh processes)": (before, before_out),
               "`tfcheck.load` call, this checkout (fresh processes)": (REPO, out)}
    means: dict[str, list[float]] = {row: [] for row in folders}
    for _ in range(rounds):
        for row, (source, folder) in folders.items():
            command = [sys.executable, __file__, "--child", str(folder), name, "--calls", str(calls)]
            completed = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(source)},
                                       capture_output=True, text=True, check=True)
            means[row].append(float(completed.stdout.split()[-1]))
    return means


def child(folder: Path, name: str, calls: int) -> None:
    """One `--before` round: the per-call mean of `calls` calls after as many warm-up calls."""
    if importlib.util.find_spec("tvm_ffi") is not None:
        import tvm_ffi  # noqa: F401  as in the parent: one libtvm_ffi.so
    import numpy as np

    import tfcheck
    from tfcheck.runtime.inputs import aligned

    function = tfcheck.load(folder)[name]
    spec = function.artifacts[0].manifest.inputs[0]
    x = aligned(np.random.default_rng(0).standard_normal(spec.shape).astype(spec.dtype))
    for _ in range(calls):
        function(x)
    start = time.perf_counter()
    for _ in range(calls):
        function(x)
    print((time.perf_counter() - start) / calls * 1e6)


def profile(rows: dict[str, Callable[[], Any]], calls: int) -> None:
    call = rows["`tfcheck.load` call"]
    profiler = cProfile.Profile()
    profiler.runcall(lambda: [call() for _ in range(calls)])
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tfcheck_call_overhead"))
    parser.add_argument("--functions", default="add_one,mlp")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--before", type=Path, help="a folder holding an older checkout's tfcheck package")
    parser.add_argument("--child", nargs=2, metavar=("FOLDER", "FUNCTION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1], args.calls)
        return
    out = prepare(args.work)
    if importlib.util.find_spec("tvm_ffi") is not None:
        import tvm_ffi  # noqa: F401  first: the runtime then uses the libtvm_ffi.so it opened
    with open("/proc/loadavg") as loadavg:
        print(f"load average at the start: {' '.join(loadavg.read().split()[:3])}")
    for name in args.functions.split(","):
        rows = routes(out, name)
        means = measure(rows, args.rounds, args.calls)
        if args.before:
            means.update(fresh_process_rows(out, args.work, args.before.resolve(), name, args.rounds, args.calls))
        report(name, means)
        if args.profile:
            profile(rows, args.calls * 10)
    with open("/proc/loadavg") as loadavg:
        print(f"\nload average at the end: {' '.join(loadavg.read().split()[:3])}")


if __name__ == "__main__":
    main()
