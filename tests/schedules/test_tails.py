"""Rows of a length known only at run time (`compiler/schedules/lowering/tails.py`, `rows.py`): a softmax or
a mean over rows of any length is vectorised along them, whole vectors without checks and the
last, partial one checked lane by lane, with NumPy's results at lengths below, at and around
the vector width, whether compiled with the peeling pass (`compile_cpu`) or without it."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax, s_tir, sym, tirx

from tfcheck.compiler.schedules import apply_default_schedules, compile_cpu
from tfcheck.compiler.schedules.apply import RULE_ATTR
from tfcheck.compiler.schedules.lowering.tails import TAIL_ATTR, peel_tails
from tfcheck.compiler.schedules.lowering.unswitch import loops_in, map_blocks

from ..isa import skip_unless_runnable
from . import reference
from .test_operators import check, module, rand
from .test_rows import target

LENGTHS = [1, 5, 8, 16, 17, 31, 130]


def over_rows_of_any_length(emit: str, rows: tuple[int, ...] = (3,)) -> tvm.IRModule:
    """A softmax or a mean over the last axis of float32[*rows, n], n known only at run time."""
    length = tirx.Var("n", "int64")
    ops = {"softmax": lambda bb, v: relax.op.nn.softmax(v, axis=-1),
           "mean": lambda bb, v: relax.op.mean(v, axis=[-1], keepdims=True)}
    return module([(*rows, length)], ops[emit])


def expected(emit: str, x: np.ndarray) -> np.ndarray:
    return reference.softmax(x) if emit == "softmax" else x.mean(axis=-1, keepdims=True)


def kernels(scheduled: tvm.IRModule) -> list[tirx.PrimFunc]:
    return [func for _, func in scheduled.functions_items() if isinstance(func, tirx.PrimFunc)]


@pytest.mark.parametrize("emit", ["softmax", "mean"])
@pytest.mark.parametrize("kind", ["avx512", "avx2"])
@pytest.mark.parametrize("peeled", [True, False])
def test_rows_of_any_length_match_numpy(emit: str, kind: str, peeled: bool) -> None:
    """Every row's partial sums stop at the row's end: without the check `compute_at` dropped
    (`tails.restore_check`), a row summed the first elements of the next one."""
    scheduled = apply_default_schedules(over_rows_of_any_length(emit), target(kind))
    assert [func.attrs[RULE_ATTR] for func in kernels(scheduled)] == ["schedule_rows"]
    skip_unless_runnable(target(kind))
    executable = compile_cpu(scheduled, target(kind)) if peeled else tvm.compile(scheduled, target=target(kind))
    vm = relax.VirtualMachine(executable, tvm.cpu())
    for length in LENGTHS:
        x = rand(3, length) * 8
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), expected(emit, x))


def _vector_loops(stmt: tirx.Stmt) -> tuple[int, int]:
    """(vectorised loops with no check in them, vectorised loops with one)."""
    unchecked = checked = 0
    for loop in loops_in(stmt):
        if loop.kind != tirx.ForKind.VECTORIZED:
            continue
        has_check = [False]

        def note(realize: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
            has_check[0] |= not (isinstance(realize.predicate, tirx.IntImm) and realize.predicate.value)
            return realize

        map_blocks(loop, note)
        checked += has_check[0]
        unchecked += not has_check[0]
    return unchecked, checked


def test_whole_vectors_run_without_checks_and_the_last_with_them() -> None:
    """The four steps along a softmax's row (the max's and the sum's partial results, the exps,
    the normalisation) each become a loop over every vector but the last, unchecked, and the last
    vector, unchecked if it is whole, else checked lane by lane; the marks are gone. (The two
    partial results' initialisations are vectorised loops without checks either way.)"""
    [func] = kernels(apply_default_schedules(over_rows_of_any_length("softmax"), target("avx512")))
    assert _vector_loops(func.body) == (2, 4)
    peeled = peel_tails(func)
    assert _vector_loops(peeled.body) == (2 + 4 + 4, 4)
    assert TAIL_ATTR in func.script() and TAIL_ATTR not in peeled.script()


def test_a_softmax_over_a_square_of_any_size_is_computed_row_by_row() -> None:
    """Attention's softmax over [1, 4, n, n]: its rows are the first three axes, 4 * n of them. Counted
    with n as 1 the first two already made 4 rows, and the rows loop took them alone."""
    length = tirx.Var("n", "int64")
    mod = module([(1, 4, length, length)], lambda bb, v: relax.op.nn.softmax(v, axis=-1))
    scheduled = apply_default_schedules(mod, target("avx512"))
    [func] = kernels(scheduled)
    outer = func.body.block.body
    outer = outer.seq[0] if isinstance(outer, tirx.SeqStmt) else outer
    assert isinstance(outer, tirx.For)
    at_five = tvm_ffi.structural_map(outer.extent, (tirx.Var, lambda var: tirx.IntImm(str(var.ty), 5)))
    assert int(sym.Analyzer().simplify(at_five)) == 4 * 5
    skip_unless_runnable(target("avx512"))
    vm = relax.VirtualMachine(compile_cpu(scheduled, target("avx512")), tvm.cpu())
    for size in (3, 17):
        x = rand(1, 4, size, size) * 8
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), reference.softmax(x))
