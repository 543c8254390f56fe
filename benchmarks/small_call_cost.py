"""Where a call of the small benchmark workloads goes: kernels, the Relax VM, tfcheck's runtime, against TFLite.

Issue 17: the MLP, the CNN and the encoder block of `benchmarks/compiled/small_models.py` take tens
to hundreds of microseconds a call, so what a call pays outside the kernels matters. For each, in
one process, interleaved (rounds of calls alternating between rows, each round starting one row
further along; the best round's per-call time, in us):

- `tflite`: TFLite's interpreter with XNNPACK on all cores, NumPy in and out (`set_tensor`,
  `invoke`, `get_tensor`), as `tfcheck bench` runs it;
- `tfcheck.load call`: `lib.mlp(x)`, what a user pays (input checks, the call, NumPy outputs);
- `artifact.run`: the call with the input checks done once, what `tfcheck bench` times;
- `bare vm["main"]`: the same library through `tvm`'s own Relax VM (pooled allocator, as the
  runtime's) on TVM tensors made once;
- `kernels`: the sum of the VM's kernel calls, each re-run alone on the arguments it had in one
  call (captured with `VirtualMachine.set_instrument`; the VM's builtins left out), measured
  before the rounds, not interleaved.

    .venv/bin/python benchmarks/small_call_cost.py [--functions mlp,cnn_bn,encoder_block]
        [--work /tmp/tfcheck_small_call_cost] [--rounds 21] [--calls 200] [--kernels] [--thread-cpu]

With `--thread-cpu` (and `TVM_NUM_THREADS=1`, which also gives TFLite one thread) every row is
the calling thread's CPU time: on this shared 2-core machine, other engineers' jobs make wall
times of parallel kernels wait for a core (a load average of 3-4 doubled them), while the work
done on one thread barely moves.

The artifacts are built once with `tfcheck build --out WORK/out` from a copy of the three
functions' file (a rebuild is the user's: delete WORK). `--kernels` prints each kernel's time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import depthwise_kernels as bench  # noqa: E402 - sets the thread count before TVM starts

import numpy as np  # noqa: E402
import tvm  # noqa: E402 - before tfcheck.load: one libtvm_ffi.so in the process
from tvm import relax  # noqa: E402

import tfcheck  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, import_tensorflow, load_function, to_tflite  # noqa: E402
from tfcheck.runtime.inputs import aligned  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "benchmarks" / "compiled" / "small_models.py"


def prepare(work: Path, functions: list[str]) -> Path:
    """`tfcheck build --out WORK/out` of small_models.py's functions (unless built already): a copy
    of the file without the other functions, so that only these are built."""
    out = work / "out"
    if all((out / name).is_dir() for name in functions):
        return out
    text = SOURCE.read_text()
    cut = text.index("\n@tfcheck.aot\n")
    kept = [block for block in text[cut:].split("\n\n\n") if any(f"def {name}(" in block for name in functions)]
    work.mkdir(parents=True, exist_ok=True)
    (work / "small_models.py").write_text(text[:cut] + "\n" + "\n\n\n".join(kept) + "\n")
    tfcheck_cli = str(Path(sys.executable).with_name("tfcheck"))
    subprocess.run([tfcheck_cli, "build", str(work / "small_models.py"), "--out", str(out),
                    "--cache-dir", str(work / "cache"), "-j", "1"], check=True)
    return out


def kernel_times(library: Path, tensors: list[Any], clock: Callable[[], float], rounds: int = 5,
                 calls: int = 100) -> list[tuple[str, float]]:
    """Each kernel call of one `main` call, re-run alone on its arguments: (name, best us). The
    instrumented VM is a VM of its own: its hook would slow every later call down."""
    captured: list[tuple[str, Any, tuple[Any, ...]]] = []

    def instrument(func: Any, symbol: str, before: bool, _ret: Any, *args: Any) -> int:
        if before and not symbol.startswith("vm.builtin."):
            captured.append((symbol, func, args))
        return 0

    vm = relax.VirtualMachine(tvm.runtime.load_module(str(library)), tvm.cpu())
    vm.set_instrument(instrument)
    vm["main"](*tensors)
    found = []
    for symbol, func, args in captured:
        best = float("inf")
        for _ in range(rounds):
            start = clock()
            for _ in range(calls):
                func(*args)
            best = min(best, (clock() - start) / calls * 1e6)
        found.append((symbol, best))
    return found


def rows(tf: Any, out: Path, name: str) -> tuple[dict[str, Any], Path, list[Any]]:
    """The timed rows of function `name`, its library and TVM tensors (for the kernel times)."""
    function, _ = load_function(str(out.parent), "small_models", name)
    concrete = function.get_concrete_function()
    compiled = tfcheck.load(out / name)[name]
    artifact = compiled.artifacts[0]
    inputs = [aligned(np.random.default_rng(0).standard_normal(spec.shape).astype(spec.dtype))
              for spec in artifact.manifest.inputs]
    _, checked = compiled.select(inputs, {})
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(artifact.manifest.library_path)), tvm.cpu(),
                              memory_cfg="pooled")  # as the runtime's VM (`tvm_backend`)
    tensors = [tvm.runtime.tensor(x) for x in inputs]
    main = vm["main"]
    expected = concrete(*[tf.constant(x) for x in inputs]).numpy()
    for result in (compiled(*inputs), main(*tensors).numpy()):
        assert np.abs(result - expected).max() < 1e-4, f"{name}: the routes disagree with TensorFlow"
    timed = {"tflite": bench.tflite_call(tf, to_tflite(freeze(concrete)), inputs),
             "tfcheck.load call": lambda: compiled(*inputs),
             "artifact.run": lambda: artifact.run(checked),
             'bare vm["main"]': lambda: main(*tensors)}
    return timed, artifact.manifest.library_path, tensors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--functions", default="mlp,cnn_bn,encoder_block")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tfcheck_small_call_cost"))
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--kernels", action="store_true", help="print each kernel's time")
    parser.add_argument("--thread-cpu", action="store_true", help="time the calling thread's CPU time")
    args = parser.parse_args()
    clock = time.thread_time if args.thread_cpu else time.perf_counter
    functions = args.functions.split(",")
    out = prepare(args.work, functions)
    tf = import_tensorflow()
    print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
          f"TVM and TFLite threads: {bench.THREADS}; clock: {clock.__name__}")
    print("\n| function | tflite | tfcheck.load call | artifact.run | bare vm[\"main\"] | kernels (sum) |")
    print("|---|---:|---:|---:|---:|---:|")
    details = []
    for name in functions:
        timed, library, tensors = rows(tf, out, name)
        kernels = kernel_times(library, tensors, clock)
        best = bench.interleaved_us(timed, args.rounds, args.calls, clock)
        total = sum(us for _, us in kernels)
        print(f"| {name} | " + " | ".join(f"{best[row]:.1f}" for row in timed)
              + f" | {total:.1f} ({len(kernels)} calls) |", flush=True)
        details.append((name, kernels))
    print(f"\nload average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.kernels:
        for name, kernels in details:
            print(f"\n{name}: " + ", ".join(f"{symbol} {us:.1f}" for symbol, us in kernels))


if __name__ == "__main__":
    main()
