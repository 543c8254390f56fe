"""The rule for row reductions: softmax, layer norm, means over the last axis.

These functions are chains of blocks over the same rows: a max or a sum over the last axis,
elementwise work on each element of the row, a division by the row's sum or count. The fallback
rule schedules each block as its own loop nest and leaves the reductions serial and scalar (LLVM
does not reassociate float sums). This rule computes all the blocks of one row together and
vectorises along the row:

- each reduction over the row is first split into ``lanes`` partial results (`rfactor`), one
  vector of running sums or maxima, combined at the end of the row: the float additions happen in
  another order, as in TFLite's and XNNPACK's vectorised reductions;
- the output's loops but its last (the rows) are fused into one loop, and every other block is
  computed under it (`compute_at`), so a row is still in cache for the next step; elementwise
  steps that feed one other step are inlined into it, those read by two keep a row of their own;
- the loop along the row of every block is vectorised, and the rows are split over the cores when
  the function has enough work;
- a row of a length known only at run time is cut into whole vectors and a last, checked one
  (`tails.py`), which needs two repairs of what `compute_at` does to the partial results.
"""

from __future__ import annotations

import functools

from tvm import s_tir, sym, tirx
from tvm.target import Target

from tfcheck.compiler.schedules import blocks, cpu
from tfcheck.compiler.schedules.lowering import tails
from tfcheck.compiler.schedules.rules.fallback import parallelize, vectorize_loop
from tfcheck.compiler.schedules.tiling import vector_width

SBlockRV = s_tir.schedule.SBlockRV
LoopRV = s_tir.schedule.LoopRV


def _is_row_reduction(sch: s_tir.Schedule, block: SBlockRV) -> bool:
    """``out[rows] = reduce over k of in[rows, k]``: one reduction axis, the innermost loop; an input
    read along it contiguously (a softmax over another axis reads columns), and no input indexed
    by it on another axis (a matmul's weights, whose reduction is the contraction rule's). A layer
    norm's variance also reads the row's mean, which `k` does not index."""
    kinds = blocks.iter_kinds(sch, block)
    if len(sch.get_loops(block)) != len(kinds) or not kinds.endswith("R") or kinds.count("R") != 1:
        return False
    along = sch.get(block).iter_vars[-1].var
    reads = sch.get(block).reads
    return (any(blocks.is_var(blocks.innermost_index(read), along) for read in reads)
            and not any(blocks.indexes_by(axis.min, along) for read in reads for axis in read.region[:-1]))


def _row_loops(sch: s_tir.Schedule, output: SBlockRV, reduction: SBlockRV) -> list[LoopRV] | None:
    """The leading loops of the output block that count the rows the reduction makes (its loops
    but the last); None when no prefix does, and computing a reduction under them would repeat it.
    The counts are compared as expressions: at the smallest sizes a [1, 4, n, n] softmax's first two
    loops count 4 rows as its three do when n is 1."""
    rows = _count(sch, sch.get_loops(reduction)[:-1])
    loops = sch.get_loops(output)
    analyzer = sym.Analyzer()
    for number in range(1, len(loops) + 1):
        if analyzer.can_prove_equal(_count(sch, loops[:number]), rows):
            return loops[:number]
    return None


def _count(sch: s_tir.Schedule, loops: list[LoopRV]) -> tirx.PrimExpr:
    """The iterations of a loop nest, as an expression of the function's sizes."""
    return functools.reduce(lambda total, extent: total * extent,
                            (tirx.Cast("int64", sch.get(loop).extent) for loop in loops), tirx.IntImm("int64", 1))


def _inline_elementwise(sch: s_tir.Schedule) -> None:
    """Inline each elementwise step that feeds one other step into it, so a row is not written to
    memory between them. A step read by two (a softmax's exps: by the sum and the normalisation)
    stays a block computed under the row loop, its row kept in a buffer of one row: inlined, it
    would be computed twice (a [1, 4, 64, 64] softmax: 24.1 against 20.4 us a call)."""
    for block in blocks.child_blocks(sch)[:-1]:
        if not blocks.is_reduction(sch, block) and len(sch.get_consumers(block)) == 1:
            try:
                sch.compute_inline(block)
            except s_tir.ScheduleError:  # not inlinable: kept
                continue


def _split_into_lanes(sch: s_tir.Schedule, block: SBlockRV, lanes: int) -> str | None:
    """`rfactor` a row reduction into vector-wide partial results; the name of the partial block
    (None when the row is too short or odd for a vector). A row of symbolic length is cut into
    whole vectors and a checked tail (`tails.py`)."""
    inner = sch.get_loops(block)[-1]
    extent = blocks.extent(sch, inner)
    width = lanes if extent is None else vector_width(extent, lanes)
    if width <= 1:
        return None
    _, lane = sch.split(inner, factors=[None, width])
    partial = sch.rfactor(lane, factor_axis=len(sch.get(block).iter_vars) - 1)
    return sch.get(partial).name_hint


def _vectorize_partial(sch: s_tir.Schedule, block: SBlockRV) -> None:
    """Put the lane loop of a partial-result block innermost and vectorise it; a loop over the
    whole vectors of a row of symbolic length is marked for `tails.peel_tails`.

    Under the row loop, `compute_at` made one loop per block iterator in their order: the lane
    (rfactor's new iterator, first) ... the reduction over whole vectors (last).
    """
    loops = sch.get_loops(block)
    lane, whole_vectors = loops[1], loops[-1]
    sch.reorder(whole_vectors, lane)
    sch.vectorize(lane)
    if blocks.extent(sch, whole_vectors) is None:
        tails.mark(sch, whole_vectors)


def _vectorize_row(sch: s_tir.Schedule, block: SBlockRV, lanes: int) -> None:
    """Vectorise the loop along the row of a spatial block computed under the row loop; a row of
    symbolic length in whole vectors and a checked tail (`tails.py`)."""
    along_row = sch.get_loops(block)[1:]
    if not along_row:
        return
    if blocks.extent(sch, along_row[-1]) is None:
        sch.vectorize(tails.split_into_vectors(sch, along_row[-1], lanes)[1])
    else:
        vectorize_loop(sch, along_row[-1], lanes)


def schedule_rows(func: tirx.PrimFunc, target: Target) -> s_tir.Schedule | None:
    """The row schedule for a function with row reductions only; None for any other function."""
    sch = s_tir.Schedule(func)
    reductions = [b for b in blocks.child_blocks(sch) if blocks.is_reduction(sch, b)]
    if not reductions or not all(_is_row_reduction(sch, b) for b in reductions):
        return None
    output = blocks.child_blocks(sch)[-1]
    row_loops = _row_loops(sch, output, reductions[0])
    if blocks.is_reduction(sch, output) or row_loops is None:
        return None
    lanes = cpu.vector_lanes(target, blocks.dtype_bits(sch, output))
    # The work of a whole row, every step counted: a softmax (five steps over 256 x 64) is worth
    # the cores' wake-up, a mean over 64 x 128 is not (5.4 against 11.3 us serial; 3.5 against 0.4).
    work = sum(blocks.iterations(sch, sch.get_loops(block)) for block in blocks.child_blocks(sch))
    _inline_elementwise(sch)
    partials = [name for name in (_split_into_lanes(sch, b, lanes) for b in reductions) if name is not None]
    # A row of symbolic length: its partial results' checks, which `compute_at` drops, are put
    # back at the end, and their reads declared as whole rows meanwhile (`tails.py`).
    checks = {name: tails.check_over_iterators(sch, sch.get_sblock(name)) for name in partials}
    for name, check in checks.items():
        tails.read_whole_axes(sch, sch.get_sblock(name), check)
    block_names = [sch.get(b).name_hint for b in blocks.child_blocks(sch)]
    row = sch.fuse(*row_loops) if len(row_loops) > 1 else row_loops[0]
    for block in reversed(blocks.child_blocks(sch)[:-1]):
        sch.compute_at(block, row, preserve_unit_loops=True)
    for name in block_names:
        block = sch.get_sblock(name)
        if name in partials:
            _vectorize_partial(sch, block)
        elif not blocks.is_reduction(sch, block):
            _vectorize_row(sch, block, lanes)
    parallelize(sch, [row], work, target)
    for name in partials:  # last: `vectorize` and `parallel` refuse an update block without its init
        block = sch.get_sblock(name)
        sch.decompose_reduction(block, sch.get_loops(block)[1])
        # After `compute_at`, which dropped it, and after `decompose_reduction`, which refused a
        # block whose check was put back (its flags in the schedule's state are not recomputed).
        tails.restore_check(sch, block, checks[name])
    return sch
