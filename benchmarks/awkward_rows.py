"""Dense layers over a row count with no good divisor, against their neighbours, one core.

The contraction rule's register tiles divide the rows (`tiling.register_tile`), so a row count
whose divisors are all small or large gets a tile of one row: every weight vector loaded feeds
one FMA. Convolutions' widths are padded for this (`channel_padding`, InceptionV3's 17 columns);
a `matmul`'s rows are not. ViT-B/16's 197 tokens (196 patches and the class token) is prime, and
InceptionV3's 17x17 = 289 flattened has only 17 as a divisor:

    TVM_NUM_THREADS=1 .venv/bin/python benchmarks/awkward_rows.py [--rounds 15] [--target cpu]
        [--shape 196x768x768 --shape 197x768x768 ...]

Each `MxKxN` is `relu(x[M, K] @ W[K, N] + b)` with constant weights, scheduled and compiled as
`tfcheck build` compiles (`apply_default_schedules`, `compile_cpu`), timed in interleaved rounds
of the calling thread's CPU time (best round). Figures: docs/journal/schedules.md.
"""

from __future__ import annotations

import functools

import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R

import kernel_rounds  # sibling script
from tfcheck.compiler.schedules import apply_default_schedules
from tfcheck.compiler.schedules.apply import compile_cpu

SHAPES = ("196x768x768", "197x768x768", "198x768x768", "288x768x192", "289x768x192", "290x768x192")
CALLS = 20


def dense_relu(rows: int, inner: int, units: int, rng: np.random.Generator) -> tvm.IRModule:
    """`relu(x @ W + b)` with W and b constants, as a dense layer imports."""
    weights = relax.const(rng.standard_normal((inner, units), dtype=np.float32) * 0.05)
    bias = relax.const(rng.standard_normal((units,), dtype=np.float32))
    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((rows, inner), "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            product = builder.emit(relax.op.matmul(x, weights))
            out = builder.emit_output(relax.op.nn.relu(relax.op.add(product, bias)))
        builder.emit_func_output(out)
    return builder.get()


def main() -> None:
    args, target = kernel_rounds.arguments(__doc__, "MxKxN", 15)
    rng = np.random.default_rng(0)
    machines = {}
    for shape in args.shape or SHAPES:
        rows, inner, units = (int(n) for n in shape.split("x"))
        library = compile_cpu(apply_default_schedules(dense_relu(rows, inner, units, rng), target), target)
        x = tvm.runtime.tensor(rng.standard_normal((rows, inner), dtype=np.float32))
        run = relax.VirtualMachine(library, tvm.cpu())["main"]
        machines[shape] = (functools.partial(run, x), 2 * rows * inner * units)
    best = kernel_rounds.best_thread_times({shape: call for shape, (call, _flops) in machines.items()}, args.rounds,
                                           CALLS)
    print(f"target {target}; best of {args.rounds} rounds of {CALLS} calls, thread CPU time")
    print("| shape | ms | GFLOP/s |\n|---|---:|---:|")
    for shape, (_call, flops) in machines.items():
        print(f"| {shape} | {best[shape] * 1e3:.3f} | {flops / best[shape] / 1e9:.1f} |")


if __name__ == "__main__":
    main()
