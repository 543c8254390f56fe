"""The fallback for every block no micro-kernel fits: parallel outer loops, vectorised inner loop.

Elementwise and layout blocks get their outer loops fused and split over the cores and their
innermost loop vectorised. First, the steps of a fused chain that only move elements (reshape,
transpose, slice) or compute one element for one reader are inlined into that reader, so that a
chain such as an attention head's reshape-transpose-reshape is one pass, not three passes through
buffers of its own. Reductions that neither the micro-kernel nor the row rule (`rows.py`:
softmax, layer norm, means over the last axis) takes get their spatial loops run in parallel and
their reduction loops left serial: LLVM does not reassociate float sums. Parallel loops cost a
thread-pool wake-up of a few microseconds, so small blocks stay serial.
"""

from __future__ import annotations

from tvm import s_tir, tirx
from tvm.target import Target

from tfcheck.compiler.schedules import blocks, cpu
from tfcheck.compiler.schedules.lowering import over_cores
from tfcheck.compiler.schedules.tiling import vector_width

# Loop iterations below which splitting a block over the cores costs more than it saves.
PARALLEL_MIN_ITERATIONS = 1 << 15


def parallelize(sch: s_tir.Schedule, loops: list[s_tir.schedule.LoopRV], work: int, target: Target) -> None:
    """Fuse ``loops`` (`_fused_prefix`) and split them over the cores, when there are cores and
    enough ``work`` at the smallest sizes, or at run time where the sizes are symbolic (`over_cores.py`)."""
    enough = work >= PARALLEL_MIN_ITERATIONS
    if loops and cpu.num_cores(target) > 1 and (enough or over_cores.has_symbolic_extent(sch.get(loops[0]))):
        loops = _fused_prefix(sch, loops)
        over_cores.split_over_cores(sch, sch.fuse(*loops) if len(loops) > 1 else loops[0], enough,
                                    PARALLEL_MIN_ITERATIONS)


def _fused_prefix(sch: s_tir.Schedule, loops: list[s_tir.schedule.LoopRV]) -> list[s_tir.schedule.LoopRV]:
    """The leading ``loops`` to fuse into the parallel loop: all of them, or up to the first one of
    symbolic extent after the outermost. Each iteration of a fused loop divides its index by the
    extents inside every loop it fused; the loops left inside run whole. Fused over a sequence's
    length twice, attention's `q k^T` divided by it for every element: 1045 us at 128 tokens
    against 146 serially."""
    for index, loop in enumerate(loops[1:], start=1):
        if blocks.extent(sch, loop) is None:
            return loops[: index + 1]
    return loops


def vectorize_loop(sch: s_tir.Schedule, loop: s_tir.schedule.LoopRV, lanes: int) -> None:
    """Cut ``loop`` into power-of-two vectors of up to ``lanes`` elements (`tiling.vector_width`) and
    vectorise the innermost piece; an odd extent stays scalar."""
    extent = blocks.extent(sch, loop) or 1
    width = vector_width(extent, lanes)
    if width <= 1:
        return
    if width < extent:
        loop = sch.split(loop, factors=[None, width])[-1]
    sch.vectorize(loop)


def _schedule_spatial(sch: s_tir.Schedule, block: blocks.SBlockRV, target: Target) -> None:
    """Vectorise the innermost loop of an elementwise block and parallelise the ones above it
    (with the outer part of the innermost loop, when it was cut into vectors)."""
    loops = sch.get_loops(block)
    work = blocks.iterations(sch, loops)
    vectorize_loop(sch, loops[-1], cpu.vector_lanes(target, blocks.dtype_bits(sch, block)))
    parallelize(sch, sch.get_loops(block)[:-1], work, target)


def _schedule_reduction(sch: s_tir.Schedule, block: blocks.SBlockRV, target: Target) -> None:
    """Parallelise the spatial loops of a reduction whose loops are all spatial, then all reduction."""
    loops = sch.get_loops(block)
    kinds = blocks.iter_kinds(sch, block)
    if len(loops) != len(kinds) or "RS" in kinds:
        return
    parallelize(sch, loops[: kinds.count("S")], blocks.iterations(sch, loops), target)


def schedule_block(sch: s_tir.Schedule, block: blocks.SBlockRV, target: Target) -> None:
    """Give one top-level block the fallback schedule."""
    if not sch.get_loops(block):
        return
    if blocks.is_reduction(sch, block):
        _schedule_reduction(sch, block, target)
    else:
        _schedule_spatial(sch, block, target)


def inline_intermediates(sch: s_tir.Schedule) -> None:
    """Inline each block whose result is worth recomputing where it is read (`_worth_inlining`)
    into its readers, in program order, so that a chain of them collapses into its last block."""
    for block in blocks.child_blocks(sch)[:-1]:
        if _worth_inlining(sch, block):
            try:
                sch.compute_inline(block)
            except s_tir.ScheduleError:  # writes an output, or not inlinable: kept as a pass
                continue


def _worth_inlining(sch: s_tir.Schedule, block: blocks.SBlockRV) -> bool:
    """A block that only moves elements (a load per store costs the same wherever it is), or a
    spatial block whose one reader is spatial and reads one element of it per iteration (so
    that nothing is computed twice: a pooling window or a resize reads an element several times)."""
    if blocks.is_reduction(sch, block):
        return False
    if blocks.is_move(sch.get(block)):
        return True
    readers = sch.get_consumers(block)
    if len(readers) != 1 or blocks.is_reduction(sch, readers[0]):
        return False
    written = sch.get(block).writes[0].source
    regions = [region for region in sch.get(readers[0]).reads if region.source.same_as(written)]
    return len(regions) == 1 and blocks.is_point(regions[0])


def schedule_fallback(func: tirx.PrimFunc, target: Target) -> s_tir.Schedule | None:
    """Inline what is worth inlining, then schedule every block left on its own (None for a
    function without blocks)."""
    sch = s_tir.Schedule(func)
    block_list = blocks.child_blocks(sch)
    if not block_list:
        return None
    inline_intermediates(sch)
    for block in blocks.child_blocks(sch):
        schedule_block(sch, block, target)
    return sch
