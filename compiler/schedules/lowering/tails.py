"""Vectors along a length known only at run time: whole vectors without checks, the tail checked.

A loop over a symbolic extent (a row of a softmax over a sequence of any length) cannot be cut
into vectors that divide it. Split by the vector width anyway, it gets a bound check per lane,
``T.where(vector * 16 + lane < n)``, and TVM's vectorizer turns a loop with a check per lane back
into scalar code. TVM's ``loop_partition`` refuses symbolic extents, so a rule marks the loop
over vectors (`split_into_vectors`, `mark`), and compiling (`peel_tails`, a pass of
`apply.compile_cpu`) turns it into two loops:

    for vector in range(vectors - 1):              # every vector but the last is whole
        <the vector, without checks>               # vectorised
    for vector in range(vectors - 1, vectors):     # the last
        if <its last lane is in bounds>: <the vector, without checks>
        else: <the vector, checked lane by lane>   # scalar

(the conditions and the unchecked copies are `unswitch.whole_or_partial`'s, the contraction
rule's tile-level unswitch, with the lanes as the tile's rows). Each condition is proven by TVM's
analyzer to imply the checks it replaces, and the first loop's by `_all_but_last_whole`; a loop
where either fails keeps its checks, and stays correct. A softmax over 4 x 128 rows of 128: 32.5
against 10.4 us for the static build before, 13.5 after (docs/schedules.md, "Rows of any length").

Partial sums over such a row need two repairs in the schedule (`rows.py`): `compute_at` drops
their check (`restore_check` puts it back), and their reads, declared past the row's end, made
the row they read be computed past it too (`read_whole_axes`).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from tfcheck.compiler.schedules import blocks
from tfcheck.compiler.schedules.lowering.unswitch import fresh_definitions, loops_in, map_loops, whole_or_partial

# The annotation of a loop over whole vectors whose last vector may be partial (`split_into_vectors`).
TAIL_ATTR = "tfcheck.checked_tail"

LoopRV = s_tir.schedule.LoopRV


def split_into_vectors(sch: s_tir.Schedule, loop: LoopRV, lanes: int) -> tuple[LoopRV, LoopRV]:
    """Split ``loop`` (of symbolic extent) into vectors of ``lanes`` and mark the loop over them;
    (the loop over vectors, the loop over lanes). The caller places and vectorises the lanes' loop
    and marks the loop over vectors again (`mark`) if a later step replaces it."""
    vectors, lane = sch.split(loop, factors=[None, lanes])
    mark(sch, vectors)
    return vectors, lane


def mark(sch: s_tir.Schedule, vectors: LoopRV) -> None:
    """Mark a loop over vectors of a symbolic extent for `peel_tails`."""
    sch.annotate(vectors, TAIL_ATTR, True)


class CheckNotKept(Exception):
    """A block's bound check reads a loop that binds none of its iterators: `compute_at` would drop
    it, and nothing could put it back. The rule does not fit (`apply.choose_schedule`)."""


def check_over_iterators(sch: s_tir.Schedule, block: s_tir.schedule.SBlockRV) -> tirx.PrimExpr | None:
    """The bound check of ``block`` over its own iterators (its loops' variables replaced by the
    iterators they bind), to be put back with `restore_check`; None when it has none. Raises
    `CheckNotKept` for one that cannot be written over the iterators."""
    realize = blocks.realize(sch, block)
    if isinstance(realize.predicate, tirx.IntImm) and realize.predicate.value:
        return None
    to_iterators = {value: iter_var.var for iter_var, value in zip(realize.block.iter_vars, realize.iter_values)
                    if isinstance(value, tirx.Var)}
    check = tvm_ffi.structural_map(realize.predicate, (tirx.Var, lambda var: to_iterators.get(var, var)))
    loop_vars = {loop.loop_var for loop in map(sch.get, sch.get_loops(block))}
    if set(tirx.analysis.undefined_vars(check)) & loop_vars:
        raise CheckNotKept(f"the check of {realize.block.name_hint} reads a loop bound to none of its iterators")
    return check


def restore_check(sch: s_tir.Schedule, block: s_tir.schedule.SBlockRV, check: tirx.PrimExpr | None) -> None:
    """Add ``check`` (from `check_over_iterators`) to the bound check of ``block``.

    `compute_at` regenerates a block's loops over the region its consumers read and replaces its
    bound check with the bounds of that region: the partial sums of a row of symbolic length,
    split into vectors and computed under the row, lost ``vector * 16 + lane < n`` and read past
    the end of the row (TVM 0.27's ``ScopeReconstructor::MakeNewLoop``). No schedule primitive
    adds a check, so the block's loop is replaced in the schedule's state (not in its trace:
    such kernels are not tuning tasks, `compiler/tuning/metaschedule.py`).
    """
    if check is None:
        return
    loop_rv = sch.get_loops(block)[-1]
    loop = sch.get(loop_rv)
    realize = blocks.realize(sch, block)
    bound = {iter_var.var: value for iter_var, value in zip(realize.block.iter_vars, realize.iter_values)}
    restored = tvm_ffi.structural_map(check, (tirx.Var, lambda var: bound.get(var, var)))
    predicate = sym.Analyzer().simplify(tirx.And(realize.predicate, restored))
    body = s_tir.SBlockRealize(realize.iter_values, predicate, realize.block)
    sch.state.replace(sch.get_sref(loop_rv), tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body,
                                                      loop.thread_binding, loop.annotations, loop.step),
                      {realize.block: realize.block})


def read_whole_axes(sch: s_tir.Schedule, block: s_tir.schedule.SBlockRV, check: tirx.PrimExpr | None) -> None:
    """Declare the reads of ``block`` along the axes its ``check`` bounds as the whole axis.

    A partial sum over a row of symbolic length reads ``row[vector * 16 + lane]``, declared for
    every vector and lane, past the end of the row; `compute_at` then computes the row it reads
    (a softmax's exponentials) over that whole extent, and TVM's bounds on it
    (``min(0, (n + 15) // 16 * 16 - 1)``) keep that block's own checks from being peeled. What the
    check lets the block read lies in the axis; declared so, the row is computed over its length.
    """
    if check is None:
        return
    checked = set(tirx.analysis.undefined_vars(check))
    old = sch.get(block)

    def whole_axes(region: tirx.BufferRegion) -> tirx.BufferRegion:
        axes = [tvm.ir.Range.from_min_extent(tirx.IntImm(str(extent.ty), 0), extent)
                if set(tirx.analysis.undefined_vars(axis.min)) & checked else axis
                for axis, extent in zip(region.region, region.source.shape)]
        return tirx.BufferRegion(region.source, axes)

    new = s_tir.SBlock(old.iter_vars, [whole_axes(region) for region in old.reads], old.writes, old.name_hint,
                       old.body, old.init, old.alloc_buffers, old.match_buffers, old.annotations)
    sch.state.replace(sch.get_sref(block), new, {old: new})


def peel_tails(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the body of each marked loop split into whole vectors and the checked tail."""
    if not any(TAIL_ATTR in loop.annotations for loop in loops_in(func.body)):
        return func
    sizes = blocks.shape_vars(func)
    return func.with_body(map_loops(func.body, lambda loop: _peeled(loop, sizes) if TAIL_ATTR in loop.annotations
                                    else loop))


def _peeled(loop: tirx.For, sizes: set[tirx.Var]) -> tirx.Stmt:
    """The marked loop, unmarked, as ``for v in range(E - 1): <whole vector v, unchecked>`` and
    ``for v in range(E - 1, E): if <whole>: <unchecked> else: <as it was>``; as it was where its
    checks are not those of a split into vectors (`unswitch.whole_or_partial`).

    Every vector but the last is whole, so the first loop has no condition: with the condition
    inside one loop (tried first), LLVM kept a scalar copy of the partial sums' lanes alive in
    every iteration and the symbolic softmax gained nothing.
    """
    annotations = {key: value for key, value in loop.annotations.items() if key != TAIL_ATTR}
    unmarked = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding,
                        annotations, loop.step)
    versioned = whole_or_partial(unmarked, sizes, _checked_as_it_was)
    if versioned.same_as(unmarked) or not _all_but_last_whole(versioned, sizes):
        return versioned
    zero = tirx.IntImm(str(loop.extent.ty), 0)
    last = sym.Analyzer().simplify(tirx.Max(loop.extent - 1, zero))
    whole_vectors = fresh_definitions(tirx.For(loop.loop_var, zero, last, loop.kind, versioned.body.then_case,
                                               loop.thread_binding, annotations, loop.step))
    tail = tirx.For(loop.loop_var, last, sym.Analyzer().simplify(loop.extent - last), loop.kind, versioned.body,
                    loop.thread_binding, annotations, loop.step)
    return tirx.SeqStmt([whole_vectors, tail])


def _all_but_last_whole(versioned: tirx.For, sizes: set[tirx.Var]) -> bool:
    """Whether the whole-vector condition of ``versioned`` (a loop from 0) holds for every iteration
    but the last, sizes not negative: it holds at the last but one, and it only turns false as the
    iteration grows (`_holds_less_as_it_grows`). (TVM's analyzer does not prove ``v * 16 + 15 < n``
    from ``v < (n + 15) // 16 - 1`` directly.)"""
    if not (isinstance(versioned.min, tirx.IntImm) and versioned.min.value == 0):
        return False
    condition, var = versioned.body.condition, versioned.loop_var
    analyzer = sym.Analyzer()
    for size in sizes:
        analyzer.update(size, sym.ConstIntBound(0, sym.ConstIntBound.POS_INF))
    if not _holds_less_as_it_grows(analyzer, condition, var):
        return False
    with analyzer.constraint_scope(versioned.extent >= 2):
        return analyzer.can_prove(_at(condition, var, versioned.extent - 2))


def _holds_less_as_it_grows(analyzer: sym.Analyzer, condition: tirx.PrimExpr, var: tirx.Var) -> bool:
    """Whether ``condition`` (conjunctions of ``a < b`` or ``a <= b``) is false at ``var + 1``
    wherever it is false at ``var``: each ``b`` independent of ``var``, each ``a`` not decreasing in it."""
    if isinstance(condition, tirx.And):
        return all(_holds_less_as_it_grows(analyzer, part, var) for part in (condition.a, condition.b))
    if not isinstance(condition, (tirx.LT, tirx.LE)) or var in tirx.analysis.undefined_vars(condition.b):
        return False
    return analyzer.can_prove(_at(condition.a, var, var + 1) - condition.a >= 0)


def _at(expr: tirx.PrimExpr, var: tirx.Var, value: tirx.PrimExpr) -> tirx.PrimExpr:
    """``expr`` with ``var`` replaced by ``value``."""
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda known: value if known.same_as(var) else known))


def _checked_as_it_was(_analyzer: sym.Analyzer, statements: list, _lanes: int) -> tirx.Stmt:
    """The tail: the statements of the vector with their checks (the vectorizer makes it scalar)."""
    stmts = [statement.stmt for statement in statements]
    return tirx.SeqStmt(stmts) if len(stmts) > 1 else stmts[0]
