"""Tile-level unswitching: full register tiles of a symbolic extent run without bound checks.

A register tile of ``R`` rows over a symbolic extent (a batch of any size) leaves a bound check
per row, ``T.where(tile * R + row < batch)``, on every block of the tile. Inside the unrolled
tile the checks keep LLVM from holding the accumulators in registers: an MLP's 128 -> 256 layer
took 17 us at batch 8 with 8-row tiles, against 6.9 us for the static build (docs/benchmarks.md).
TVM's ``loop_partition`` refuses symbolic extents, so this step does it on the scheduled TIR,
one level up: the body of the tiles' loop becomes

    if <the last row of the tile is in bounds>:        # every tile but the last
        <the R-row tile, without checks>
    else:                                              # the partial tile
        for each group of G rows (G the largest power of two below R):
            if <its last row is in bounds>: <the G-row tile, without checks>
            else: <the group in groups of G/2 rows, and so on down to single rows>

where "the n-row tile" is every statement of the tile (initialisation, reduction, epilogue) over
those rows; rows that do not make a whole group go straight to the smaller groups (a 7-row tile
ending at row 5 runs 4 rows, then 1; ending at row 6, 4 then 2). A single row runs as a one-row
tile did (its accumulators in registers, no check inside the reduction), so batch 1 is no slower
than with one-row tiles. Running the statements row group by row group assumes what the
contraction rule's kernels guarantee (each row computed from its own inputs); it is checked that
the row loops bind only spatial block iterators. Every condition is proven by TVM's analyzer to
imply the checks it replaces; a kernel where that fails is left as it was.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from tfcheck.compiler.schedules import blocks


@dataclass(frozen=True)
class _Statement:
    """One statement of the tile (a loop nest around a block) and its loop over the tile's rows."""

    stmt: tirx.Stmt
    rows: tirx.Var  # the loop variable over the tile's rows (``range(R)``)
    checks: list[tirx.Expr]  # the bound checks of its blocks, each reading ``rows``


def unswitch_partial_tiles(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with each top-level loop whose tiles carry bound checks on a symbolic extent unswitched."""
    root = func.body
    if not isinstance(root, s_tir.SBlockRealize):
        return func
    shape_vars = blocks.shape_vars(func)
    body = root.block.body
    statements = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    changed = [_unswitch_loop(stmt, shape_vars) if isinstance(stmt, tirx.For) else stmt for stmt in statements]
    if all(new.same_as(old) for new, old in zip(changed, statements)):
        return func
    return func.with_body(blocks.rebuilt(root, tirx.SeqStmt(changed) if len(changed) > 1 else changed[0]))


def _unswitch_loop(loop: tirx.For, shape_vars: set[tirx.Var]) -> tirx.For:
    """``loop`` with its body split into full and partial tiles (`whole_or_partial`), the partial
    ones in half tiles, then single rows."""
    def partial(analyzer: sym.Analyzer, statements: list[_Statement], extent: int) -> tirx.Stmt | None:
        # Groups of the powers of two below the tile: a tile of 7 ending at row 5 runs 4 rows, then 1.
        groups = [1 << power for power in reversed(range((extent - 1).bit_length()))]
        return _partial_tile(analyzer, statements, 0, extent, groups)

    return whole_or_partial(loop, shape_vars, partial)


PartialOf = Callable[[sym.Analyzer, list[_Statement], int], "tirx.Stmt | None"]


def whole_or_partial(loop: tirx.For, shape_vars: set[tirx.Var], partial_of: PartialOf) -> tirx.For:
    """``loop`` with its body ``if <the tile is whole>: <the tile without checks> else: <partial_of(...)>``,
    or ``loop`` itself when its blocks carry no check on a symbolic extent, do not have the shape of
    a tile (statements over one loop of constant extent, the checks reading it: `_tile_statements`)
    or ``partial_of`` gives None."""
    analyzer = sym.Analyzer()
    for var in shape_vars:
        analyzer.update(var, sym.ConstIntBound(0, sym.ConstIntBound.POS_INF))
    analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
    tile = _tile_statements(loop.body, analyzer)
    if tile is None or not all(any(var in shape_vars for var in tirx.analysis.undefined_vars(check))
                               for statement in tile[0] for check in statement.checks):
        return loop
    statements, extent = tile
    full = _rows_group(analyzer, statements, 0, extent)
    partial = None if full is None else partial_of(analyzer, statements, extent)
    if partial is None:
        return loop
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, tirx.IfThenElse(*full, partial),
                    loop.thread_binding, loop.annotations, loop.step)


def _partial_tile(analyzer: sym.Analyzer, statements: list[_Statement], start: int, count: int,
                  groups: list[int]) -> tirx.Stmt | None:
    """Rows ``start`` to ``start + count`` of a tile that may end early, in groups of ``groups[0]``
    rows: each group without checks when its last row is in bounds, else in the next smaller groups;
    rows left that do not make a whole group go straight to the smaller groups."""
    size, smaller = groups[0], groups[1:]
    pieces = []
    for first in range(start, start + count, size):
        if first + size > start + count:
            rest = _partial_tile(analyzer, statements, first, start + count - first, smaller)
            if rest is None:
                return None
            pieces.append(rest)
            continue
        group = _rows_group(analyzer, statements, first, size)
        rest = _partial_tile(analyzer, statements, first, size, smaller) if smaller else None
        if group is None or (smaller and rest is None):
            return None
        pieces.append(tirx.IfThenElse(group[0], group[1], rest))
    return tirx.SeqStmt(pieces) if len(pieces) > 1 else pieces[0]


def _rows_group(analyzer: sym.Analyzer, statements: list[_Statement], first: int,
                size: int) -> tuple[tirx.Expr, tirx.Stmt] | None:
    """(condition, the tile's statements over rows ``first`` to ``first + size`` without checks):
    the condition implies every check of those rows. None when no single check implies the rest."""
    conditions = []
    for statement in statements:
        for check in statement.checks:
            instances = []
            for row in range(first, first + size):
                at_row = analyzer.clone()
                at_row.bind(statement.rows, tirx.IntImm(str(statement.rows.ty), row))
                instances.append(at_row.simplify(check))
            condition = _weakest_sufficient(analyzer, instances)
            if condition is None:
                return None
            conditions.append(condition)
    pieces = [map_blocks(statement.stmt, _without_check, _pinned(statement.rows, first, size))
              for statement in statements]
    # Each group is a copy of the tile: it must define its own loop and block variables.
    body = fresh_definitions(tirx.SeqStmt(pieces) if len(pieces) > 1 else pieces[0])
    return functools.reduce(tirx.And, _distinct(conditions)), body


def _pinned(rows: tirx.Var, first: int, size: int) -> Callable[[tirx.For], tirx.For]:
    """A loop rewrite that runs the loop over ``rows`` from ``first`` for ``size`` iterations."""
    def pin(loop: tirx.For) -> tirx.For:
        if not loop.loop_var.same_as(rows):
            return loop
        dtype = str(rows.ty)
        return tirx.For(rows, tirx.IntImm(dtype, first), tirx.IntImm(dtype, size), loop.kind, loop.body,
                        loop.thread_binding, loop.annotations, loop.step)
    return pin


def _tile_statements(body: tirx.Stmt, analyzer: sym.Analyzer) -> tuple[list[_Statement], int] | None:
    """The statements of a tile whose checks, once simplified (`_simplified`), each read one
    constant-extent loop from 0 (its rows), all of the same extent (returned too) and binding only
    spatial iterators; None for any other body."""
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    statements = []
    for stmt in stmts:
        collected: list[tuple[tirx.Expr, dict[tirx.Var, range | None]]] = []
        _collect_checks(stmt, {}, collected)
        checks = [(_simplified(analyzer, check, inner), inner) for check, inner in collected]
        checks = [(check, inner) for check, inner in checks if not _always(check)]
        used: list[tuple[tirx.Var, range | None]] = []
        for check, inner in checks:
            for var in tirx.analysis.undefined_vars(check):
                if var in inner and not any(var.same_as(known) for known, _ in used):
                    used.append((var, inner[var]))
        if not checks or len(used) != 1:
            return None
        rows, values = used[0]
        if values is None or values.start != 0 or not _binds_only_spatial(stmt, rows):
            return None
        statements.append((_Statement(stmt, rows, [check for check, _ in checks]), len(values)))
    extents = {extent for _, extent in statements}
    if len(extents) != 1:
        return None
    return [statement for statement, _ in statements], extents.pop()


def _simplified(analyzer: sym.Analyzer, check: tirx.Expr, loops: dict[tirx.Var, range | None]) -> tirx.Expr:
    """``check`` simplified where it is evaluated: inside ``loops``, with sizes not negative.

    Over extents such as ``h // 4`` (an image of any size after pooling) ``reverse_compute_at``
    leaves the epilogue a check on every axis that TVM could not prove when scheduling (``0 <=
    channel``, ``tile // (h // 4 * w_tiles) < 8``). The ones over the channels' loops made the tile
    look checked on several loops, so it was not unswitched: AdaIN's 3x3 convolutions of 256
    channels ran 2.9x slower in its artifact for images of any size than in the 256x256 one.
    """
    inner = analyzer.clone()
    for var, values in loops.items():
        if values is not None:
            inner.bind(var, tvm.ir.Range.from_min_extent(values.start, len(values)))
    return inner.simplify(check)


def _always(check: tirx.Expr) -> bool:
    """Whether ``check`` is the constant True."""
    return isinstance(check, tirx.IntImm) and bool(check.value)


def _binds_only_spatial(statement: tirx.Stmt, var: tirx.Var) -> bool:
    """Whether ``var`` indexes only spatial block iterators in ``statement``: its rows are then
    independent of each other, and may run one after another in any order."""
    reduction_bindings: list[tirx.Expr] = []

    def note(realize: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
        reduction_bindings.extend(value for iter_var, value in zip(realize.block.iter_vars, realize.iter_values)
                                  if iter_var.iter_type != tirx.IterVar.DataPar)
        return realize

    map_blocks(statement, note)
    return not any(var in tirx.analysis.undefined_vars(value) for value in reduction_bindings)


def _distinct(conditions: list[tirx.Expr]) -> list[tirx.Expr]:
    """``conditions`` without structural repeats, in order."""
    kept: list[tirx.Expr] = []
    for condition in conditions:
        if not any(tvm_ffi.structural_equal(condition, known) for known in kept):
            kept.append(condition)
    return kept


def _collect_checks(stmt: tirx.Stmt, inner: dict[tirx.Var, range | None],
                    checks: list[tuple[tirx.Expr, dict[tirx.Var, range | None]]]) -> None:
    """Append (bound check, the values of the loops around it) for every block in ``stmt``; a loop
    of symbolic extent has None (a check that reads it cannot be enumerated)."""
    if isinstance(stmt, tirx.For):
        extent, start = stmt.extent, stmt.min
        values = (range(start.value, start.value + extent.value)
                  if isinstance(extent, tirx.IntImm) and isinstance(start, tirx.IntImm) else None)
        _collect_checks(stmt.body, {**inner, stmt.loop_var: values}, checks)
    elif isinstance(stmt, tirx.SeqStmt):
        for child in stmt.seq:
            _collect_checks(child, inner, checks)
    elif isinstance(stmt, tirx.IfThenElse):
        _collect_checks(stmt.then_case, inner, checks)
        if stmt.else_case is not None:
            _collect_checks(stmt.else_case, inner, checks)
    elif isinstance(stmt, s_tir.SBlockRealize):
        if not (isinstance(stmt.predicate, tirx.IntImm) and stmt.predicate.value):
            checks.append((stmt.predicate, inner))


def _weakest_sufficient(analyzer: sym.Analyzer, instances: list[tirx.Expr]) -> tirx.Expr | None:
    """One instance that implies all the others (the last row's check for ``tile * R + row < batch``),
    or None when none does."""
    for candidate in reversed(instances):
        with analyzer.constraint_scope(candidate):
            if all(analyzer.can_prove(instance) for instance in instances):
                return candidate
    return None


def fresh_definitions(stmt: tirx.Stmt) -> tirx.Stmt:
    """``stmt`` with new variables for the loops, block iterators and bindings it defines; what it
    uses from outside stays. (TVM's RenewDefs refuses a function that already defines a variable
    twice, and its simplifier one bound twice to different values: an argmax's `Bind`s of its
    running value and index, in both versions of a loop split over the cores at run time.)"""
    renamed: dict[tirx.Var, tirx.Var] = {}

    def note(var: tirx.Var) -> None:
        renamed[var] = tirx.Var(var.name, str(var.ty))

    def note_binding(binding: tirx.Bind) -> tirx.Bind:
        note(binding.var)
        return binding

    def note_block(realize: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
        for iter_var in realize.block.iter_vars:
            note(iter_var.var)
        return realize

    def note_loop(loop: tirx.For) -> tirx.For:
        note(loop.loop_var)
        return loop

    map_blocks(stmt, note_block, note_loop)
    tvm_ffi.structural_map(stmt, (tirx.Bind, note_binding))
    return tvm_ffi.structural_map(stmt, (tirx.Var, lambda var: renamed.get(var, var)))


def _without_check(realize: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
    """The block without its bound check."""
    return s_tir.SBlockRealize(realize.iter_values, True, realize.block)


def map_blocks(stmt: tirx.Stmt, on_block: Callable[[s_tir.SBlockRealize], s_tir.SBlockRealize],
                on_loop: Callable[[tirx.For], tirx.For] = lambda loop: loop) -> tirx.Stmt:
    """``stmt`` with ``on_block`` applied to every block realize and ``on_loop`` to every loop (after its body)."""
    if isinstance(stmt, tirx.For):
        body = map_blocks(stmt.body, on_block, on_loop)
        return on_loop(tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body,
                                stmt.thread_binding, stmt.annotations, stmt.step))
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([map_blocks(child, on_block, on_loop) for child in stmt.seq])
    if isinstance(stmt, tirx.IfThenElse):
        return tirx.IfThenElse(stmt.condition, map_blocks(stmt.then_case, on_block, on_loop),
                               None if stmt.else_case is None else map_blocks(stmt.else_case, on_block, on_loop))
    if isinstance(stmt, s_tir.SBlockRealize):
        return on_block(stmt)
    return stmt


def map_loops(stmt: tirx.Stmt, on_loop: Callable[[tirx.For], tirx.Stmt]) -> tirx.Stmt:
    """``stmt`` with ``on_loop`` applied to every loop (after its body), those inside blocks included:
    the root block holds them all."""
    def in_block(realize: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
        body = map_loops(realize.block.body, on_loop)
        return realize if body.same_as(realize.block.body) else blocks.rebuilt(realize, body)

    return map_blocks(stmt, in_block, on_loop)


def loops_in(stmt: tirx.Stmt) -> list[tirx.For]:
    """The loops of ``stmt``, those inside its blocks included."""
    found: list[tirx.For] = []

    def note(loop: tirx.For) -> tirx.For:
        found.append(loop)
        return loop

    map_loops(stmt, note)
    return found
