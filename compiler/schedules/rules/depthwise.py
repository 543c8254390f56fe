"""The rule for depthwise convolutions: a window of one channel times its own weights, summed.

The contraction rule (`contraction.py`) fits them too (the channel is the output's last axis and
the input is read along it), and that was how MobileNetV2's depthwise layers were built. Three
things made that micro-kernel slow for them (docs/schedules.md, "Depthwise convolutions"):

- the zero padding ran as its own pass over the whole input, into a workspace buffer allocated on
  every call: here it is read in place, the bound check (the same for every lane of a vector of
  channels) left to the kernel;
- the 14 x 2-vector register tile spilled: here a tile is one vector of channels by up to 7 output
  columns (`tiling.depthwise_tile`), with the window loops unrolled, so the inputs shared by
  neighbouring columns are loaded once;
- its accumulators were a workspace allocated once per tile under the parallel loop (fixed in the
  shared micro-kernel).

Split over the cores it runs as every micro-kernel does (from `contraction.PARALLEL_MIN_WORK`
multiply-adds). It ran serially for a while: on the loaded two-core AMD EPYC it was no faster split
in two runs; on an Intel Xeon (Emerald Rapids), each build timed twice in one process, MobileNetV2
took 5.31-5.36 ms with serial depthwise kernels and 4.60-4.61 ms split (an AVX2 build on the same
CPU 7.73-7.78 against 6.64-6.85 ms; docs/schedules.md, "Depthwise convolutions over both cores").
"""

from __future__ import annotations

from tvm import s_tir, tirx
from tvm.target import Target

from tfcheck.compiler.schedules import blocks
from tfcheck.compiler.schedules.rules.contraction import MicroKernel, main_block, schedule_micro_kernel
from tfcheck.compiler.schedules.tiling import depthwise_tile

SBlockRV = s_tir.schedule.SBlockRV

DEPTHWISE = MicroKernel(depthwise_tile, inline_producers=True, unroll_reduction=True, parallel=True)


def is_depthwise(sch: s_tir.Schedule, main: SBlockRV) -> bool:
    """Whether ``main`` multiplies two inputs that are both indexed by the output channel
    (``out[n, y, x, c] += pad[n, y + ry, x + rx, c] * w[ry, rx, c, 0]``), over an NHWC output.

    A convolution's or matmul's input is not indexed by the output channel; pooling reads one input.
    """
    block = sch.get(main)
    spatial = [iv.var for iv in block.iter_vars if iv.iter_type != tirx.IterVar.CommReduce]
    inputs = [read for read in block.reads if not read.source.same_as(block.writes[0].source)]
    return len(spatial) == 4 and len(inputs) == 2 and all(
        any(blocks.indexes_by(axis.min, spatial[-1]) for axis in read.region) for read in inputs)


def schedule_depthwise(func: tirx.PrimFunc, target: Target, kernel: MicroKernel = DEPTHWISE) -> s_tir.Schedule | None:
    """The depthwise micro-kernel for ``func``, or None when it is not a depthwise convolution
    (``kernel`` is for benchmarks that compare other choices)."""
    sch = s_tir.Schedule(func)
    main = main_block(sch)
    if main is None or not is_depthwise(sch, main):
        return None
    return schedule_micro_kernel(sch, main, func, target, kernel)
