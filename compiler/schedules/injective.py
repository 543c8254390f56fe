"""The fallback for elementwise and layout blocks: parallel outer loops, vectorised inner loop.

Parallel loops cost a thread-pool wake-up of a few microseconds, so small blocks stay serial.
"""

from __future__ import annotations

from tvm import s_tir, tirx
from tvm.target import Target

from . import blocks, target as cpu

# Elements below which splitting a block over the cores costs more than it saves.
PARALLEL_MIN_ELEMENTS = 1 << 15


def _elements(sch: s_tir.Schedule, loops: list[s_tir.schedule.LoopRV]) -> int:
    """Iterations of a loop nest (0 when an extent is symbolic)."""
    total = 1
    for loop in loops:
        total *= blocks.extent(sch, loop) or 0
    return total


def schedule_block(sch: s_tir.Schedule, block: blocks.SBlockRV, target: Target) -> None:
    """Fuse the outer loops of one spatial block and run them in parallel; vectorise the innermost loop."""
    loops = sch.get_loops(block)
    if not loops or blocks.is_reduction(sch, block):
        return
    elements = _elements(sch, loops)
    lanes = cpu.vector_lanes(target, blocks.dtype_bits(sch, block))
    inner = loops[-1]
    inner_extent = blocks.extent(sch, inner)
    if inner_extent and inner_extent > lanes and inner_extent % lanes == 0:
        *_, inner = sch.split(inner, factors=[None, lanes])
        loops = sch.get_loops(block)
    if inner_extent and inner_extent > 1:
        sch.vectorize(inner)
    if len(loops) > 1 and cpu.num_cores(target) > 1 and elements >= PARALLEL_MIN_ELEMENTS:
        sch.parallel(sch.fuse(*loops[:-1]))


def schedule_injective(func: tirx.PrimFunc, target: Target) -> s_tir.Schedule | None:
    """Schedule a function made only of spatial blocks, or None when it has a reduction."""
    sch = s_tir.Schedule(func)
    block_list = blocks.child_blocks(sch)
    if not block_list or any(blocks.is_reduction(sch, b) for b in block_list):
        return None
    for block in block_list:
        schedule_block(sch, block, target)
    return sch
