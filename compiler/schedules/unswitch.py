"""Tile-level unswitching: full register tiles of a symbolic extent run without bound checks.

A register tile of ``R`` rows over a symbolic extent (a batch of any size) leaves a bound check
per row, ``T.where(tile * R + row < batch)``, on every block of the tile. Inside the unrolled
tile the checks keep LLVM from holding the accumulators in registers: an MLP's 128 -> 256 layer
took 17 us at batch 8 with 8-row tiles, against 6.9 us for the static build (docs/benchmarks.md).
TVM's ``loop_partition`` refuses symbolic extents, so this step does it on the scheduled TIR,
one level up: the body of the tiles' loop becomes

    if <the last row of the tile is in bounds>:   # every tile but the last
        <the tile, without checks>
    else:                                         # the partial tile
        for row in unroll(R):
            if <row in bounds>: <each statement of the tile (init, reduction, epilogue) for that row>

The partial tile runs as one-row tiles did (a row's accumulators in registers, no check inside the
reduction), so batch 1 is no slower than with one-row tiles. The reordering into rows assumes what
the contraction rule's kernels guarantee (each row computed from its own inputs); it is checked that
the row loop binds only spatial iterators.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

# Most combinations of tile indices a bound check is evaluated at (the check reads the rows
# index alone in the contraction rule's tiles: 8); a check that reads more is left in place.
MAX_INSTANCES = 4096

Checks = list[tuple[tirx.Expr, dict[tirx.Var, "range | None"]]]


def unswitch_partial_tiles(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with each outer loop whose tiles carry bound checks on a symbolic extent unswitched.

    A loop is changed only when, under one condition on its own iteration, every bound check
    inside it is proven true by TVM's analyzer: then the first branch has no check left. Anything
    else (a check on a static extent, one that no single condition settles) is left as it was.
    """
    root = func.body
    if not isinstance(root, s_tir.SBlockRealize):
        return func
    shape_vars = _shape_vars(func)
    body = root.block.body
    statements = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    changed = [_unswitch_loop(stmt, shape_vars) if isinstance(stmt, tirx.For) else stmt for stmt in statements]
    if all(new.same_as(old) for new, old in zip(changed, statements)):
        return func
    new_body = tirx.SeqStmt(changed) if len(changed) > 1 else changed[0]
    block = root.block
    new_block = s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, new_body, block.init,
                             block.alloc_buffers, block.match_buffers, block.annotations)
    return func.with_body(s_tir.SBlockRealize(root.iter_values, root.predicate, new_block))


def _shape_vars(func: tirx.PrimFunc) -> set[tirx.Var]:
    """The symbolic extents of the function's buffers (``batch``)."""
    found = set()
    for param in func.params:
        for dim in getattr(param, "shape", None) or ():
            found.update(tirx.analysis.undefined_vars(dim))
    return found


def _unswitch_loop(loop: tirx.For, shape_vars: set[tirx.Var]) -> tirx.For:
    """``loop`` with its body under ``if <tile in bounds>``, or ``loop`` itself when its blocks
    carry no check, a check on no symbolic extent, or one no single condition settles."""
    checks: Checks = []
    _collect_checks(loop.body, {}, checks)
    if not checks or not all(any(var in shape_vars for var in tirx.analysis.undefined_vars(check))
                             for check, _ in checks):
        return loop
    analyzer = sym.Analyzer()
    analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
    conditions: list[tirx.Expr] = []
    for check, inner in checks:
        instances = _instances(analyzer, check, inner)
        if instances is None:
            return loop
        conditions.append(_weakest_sufficient(analyzer, instances))
    condition = functools.reduce(tirx.And, _distinct(conditions))
    # The branches are copies of one body: each must define its own loop and block variables.
    then_body = _fresh_definitions(_map_blocks(loop.body, _without_check))
    else_body = _row_by_row(analyzer, loop.body) or loop.body
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind,
                    tirx.IfThenElse(condition, then_body, else_body), loop.thread_binding, loop.annotations,
                    loop.step)


def _row_by_row(analyzer: sym.Analyzer, body: tirx.Stmt) -> tirx.Stmt | None:
    """The partial tile one row at a time, unrolled: ``for row in 0..R-1: if <row in bounds>: <statement at row>``
    for each statement of the tile (initialisation, reduction, epilogue).

    A row's accumulators then have constant indices and stay in registers, with no check inside
    the reduction, as in a one-row tile. None unless every statement's checks read one loop of the
    tile, each of the same extent from 0 (the rows of the register tile).
    """
    statements = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    rows = [_row_loop(statement) for statement in statements]
    if any(found is None for found in rows) or len({len(values) for _, values, _ in rows}) != 1:
        return None
    row = tirx.Var("row", str(rows[0][0].ty))
    pieces = []
    for statement, (var, _, checks) in zip(statements, rows):
        at_row = analyzer.clone()
        at_row.bind(var, row)
        conditions = _distinct([at_row.simplify(check) for check in checks])

        def pin(loop: tirx.For, var: tirx.Var = var) -> tirx.For:
            return loop if not loop.loop_var.same_as(var) else tirx.For(
                var, row, tirx.IntImm(str(var.ty), 1), tirx.ForKind.SERIAL, loop.body)

        pieces.append(tirx.IfThenElse(functools.reduce(tirx.And, conditions),
                                      _map_blocks(statement, _without_check, pin), None))
    extent = len(rows[0][1])
    return tirx.For(row, tirx.IntImm(str(row.ty), 0), tirx.IntImm(str(row.ty), extent), tirx.ForKind.UNROLLED,
                    tirx.SeqStmt(pieces) if len(pieces) > 1 else pieces[0])


def _row_loop(statement: tirx.Stmt) -> tuple[tirx.Var, range, list[tirx.Expr]] | None:
    """The one tile loop that the checks of ``statement`` read, its values and the checks; None if not one."""
    checks: Checks = []
    _collect_checks(statement, {}, checks)
    used = {id(var): (var, inner[var]) for check, inner in checks
            for var in tirx.analysis.undefined_vars(check) if var in inner}
    if not checks or len(used) != 1:
        return None
    var, values = next(iter(used.values()))
    if values is None or values.start != 0 or not _binds_only_spatial(statement, var):
        return None
    return var, values, [check for check, _ in checks]


def _binds_only_spatial(statement: tirx.Stmt, var: tirx.Var) -> bool:
    """Whether ``var`` indexes only spatial block iterators in ``statement``: its rows are then
    independent of each other, and may run one after another in any order."""
    reduction_bindings: list[tirx.Expr] = []

    def note(realize: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
        reduction_bindings.extend(value for iter_var, value in zip(realize.block.iter_vars, realize.iter_values)
                                  if iter_var.iter_type != tirx.IterVar.DataPar)
        return realize

    _map_blocks(statement, note)
    return not any(var in tirx.analysis.undefined_vars(value) for value in reduction_bindings)


def _distinct(conditions: list[tirx.Expr]) -> list[tirx.Expr]:
    """``conditions`` without structural repeats, in order."""
    kept: list[tirx.Expr] = []
    for condition in conditions:
        if not any(tvm_ffi.structural_equal(condition, known) for known in kept):
            kept.append(condition)
    return kept


def _collect_checks(stmt: tirx.Stmt, inner: dict[tirx.Var, range | None], checks: Checks) -> None:
    """Append (bound check, the ranges of the constant-extent loops around it) for every block in ``stmt``.

    A loop of symbolic extent maps to None: a check that depends on it cannot be enumerated.
    """
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


def _instances(analyzer: sym.Analyzer, check: tirx.Expr,
               inner: dict[tirx.Var, range | None]) -> list[tirx.Expr] | None:
    """``check`` at every combination of the tile indices it reads, or None when they are too many."""
    variables = [var for var in tirx.analysis.undefined_vars(check) if var in inner]
    ranges = [inner[var] for var in variables]
    if any(values is None for values in ranges) or _product(ranges) > MAX_INSTANCES:
        return None
    instances = []
    for combination in itertools.product(*ranges):
        at_combination = analyzer.clone()
        for var, value in zip(variables, combination):
            at_combination.bind(var, tirx.IntImm(str(var.ty), value))
        instances.append(at_combination.simplify(check))
    return instances


def _product(ranges: list[range | None]) -> int:
    """How many combinations ``ranges`` make."""
    return functools.reduce(lambda total, values: total * len(values), ranges, 1)


def _weakest_sufficient(analyzer: sym.Analyzer, instances: list[tirx.Expr]) -> tirx.Expr:
    """One instance that implies all the others (the last row's check for ``tile * R + row < batch``),
    or their conjunction when none does."""
    for candidate in reversed(instances):
        with analyzer.constraint_scope(candidate):
            if all(analyzer.can_prove(instance) for instance in instances):
                return candidate
    return functools.reduce(tirx.And, instances)


def _fresh_definitions(stmt: tirx.Stmt) -> tirx.Stmt:
    """``stmt`` with new variables for the loops and block iterators it defines; what it uses from
    outside stays. (TVM's RenewDefs refuses a function that already defines a variable twice.)"""
    renamed: dict[tirx.Var, tirx.Var] = {}

    def note(var: tirx.Var) -> None:
        renamed[var] = tirx.Var(var.name, str(var.ty))

    def note_block(realize: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
        for iter_var in realize.block.iter_vars:
            note(iter_var.var)
        return realize

    def note_loop(loop: tirx.For) -> tirx.For:
        note(loop.loop_var)
        return loop

    _map_blocks(stmt, note_block, note_loop)
    return tvm_ffi.structural_map(stmt, (tirx.Var, lambda var: renamed.get(var, var)))


def _without_check(realize: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
    """The block without its bound check."""
    return s_tir.SBlockRealize(realize.iter_values, True, realize.block)


def _map_blocks(stmt: tirx.Stmt, on_block: Callable[[s_tir.SBlockRealize], s_tir.SBlockRealize],
                on_loop: Callable[[tirx.For], tirx.For] = lambda loop: loop) -> tirx.Stmt:
    """``stmt`` with ``on_block`` applied to every block realize and ``on_loop`` to every loop (after its body)."""
    if isinstance(stmt, tirx.For):
        body = _map_blocks(stmt.body, on_block, on_loop)
        return on_loop(tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body,
                                stmt.thread_binding, stmt.annotations, stmt.step))
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([_map_blocks(child, on_block, on_loop) for child in stmt.seq])
    if isinstance(stmt, tirx.IfThenElse):
        return tirx.IfThenElse(stmt.condition, _map_blocks(stmt.then_case, on_block, on_loop),
                               None if stmt.else_case is None else _map_blocks(stmt.else_case, on_block, on_loop))
    if isinstance(stmt, s_tir.SBlockRealize):
        return on_block(stmt)
    return stmt
