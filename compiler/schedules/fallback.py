"""The fallback for every block no micro-kernel fits: parallel outer loops, vectorised inner loop.

Elementwise and layout blocks get their outer loops fused and split over the cores and their
innermost loop vectorised. Reductions that neither the micro-kernel nor the row rule (`rows.py`:
softmax, layer norm, means over the last axis) takes get their spatial loops run in parallel and
their reduction loops left serial: LLVM does not reassociate float sums. Parallel loops cost a
thread-pool wake-up of a few microseconds, so small blocks stay serial.
"""

from __future__ import annotations

from tvm import s_tir, tirx
from tvm.target import Target

from . import blocks, target as cpu
from .tiling import vector_width

# Loop iterations below which splitting a block over the cores costs more than it saves.
PARALLEL_MIN_ITERATIONS = 1 << 15


def parallelize(sch: s_tir.Schedule, loops: list[s_tir.schedule.LoopRV], work: int, target: Target) -> None:
    """Fuse ``loops`` and split them over the cores, when there are cores and enough ``work``."""
    if loops and cpu.num_cores(target) > 1 and work >= PARALLEL_MIN_ITERATIONS:
        sch.parallel(sch.fuse(*loops) if len(loops) > 1 else loops[0])


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


def schedule_fallback(func: tirx.PrimFunc, target: Target) -> s_tir.Schedule | None:
    """Schedule every block of ``func`` on its own (None for a function without blocks)."""
    sch = s_tir.Schedule(func)
    block_list = blocks.child_blocks(sch)
    if not block_list:
        return None
    for block in block_list:
        schedule_block(sch, block, target)
    return sch
