"""compiler/schedules/rules/fallback.py: a fused chain of moves and elementwise steps is one pass.

An attention head's reshape-transpose-reshape (Keras' MultiHeadAttention through TFLite, as in the
encoder block of benchmarks/compiled/small_models.py) was three passes through two buffers of its
own; the fallback inlines what only moves elements, and what one reader reads once, into that
reader. What would be computed twice (a value a window or a stencil reads several times) stays a
pass of its own.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax, s_tir, te, tirx

from tfcheck.compiler.schedules import apply_default_schedules, blocks
from tfcheck.compiler.schedules.rules.fallback import schedule_fallback

from .test_operators import TARGET, check, module, rand, run


def scheduled_blocks(mod: tvm.IRModule) -> dict[str, int]:
    """The top-level blocks left in each fallback-scheduled function, by function name."""
    scheduled = apply_default_schedules(mod, TARGET)
    counts = {}
    for gv, func in scheduled.functions_items():
        if isinstance(func, tirx.PrimFunc) and str(func.attrs.get("tfcheck.schedule_rule", "")) == "schedule_fallback":
            counts[gv.name_hint] = len(blocks.child_blocks(s_tir.Schedule(func)))
    return counts


def split_heads(bb: relax.BlockBuilder, x: relax.Expr, order: list[int]) -> relax.Expr:
    """[1, 64, 128] -> 4 heads of 32, as the importer writes MultiHeadAttention's projections."""
    heads = bb.emit(relax.op.reshape(x, [1, 64, 4, 32]))
    moved = bb.emit(relax.op.permute_dims(heads, order))
    return relax.op.reshape(moved, [4, *[(1, 64, 4, 32)[axis] for axis in order[2:]]])


@pytest.mark.parametrize(("order", "expected"), [([0, 2, 1, 3], lambda x: x.reshape(64, 4, 32).transpose(1, 0, 2)),
                                                 ([0, 2, 3, 1], lambda x: x.reshape(64, 4, 32).transpose(1, 2, 0))],
                         ids=["queries", "keys transposed"])
def test_a_head_split_is_one_pass(order, expected) -> None:
    mod = module([(1, 64, 128)], lambda bb, x: split_heads(bb, x, order))
    assert list(scheduled_blocks(mod).values()) == [1]
    x = rand(1, 64, 128)
    actual, rules = run(mod, x)
    assert rules == ["schedule_fallback"]
    np.testing.assert_array_equal(actual, expected(x))


def test_heads_merged_and_scaled_is_one_pass() -> None:
    """The heads put back in place, then an elementwise step: one block, numbers as NumPy's."""
    def emit(bb, x):
        moved = bb.emit(relax.op.permute_dims(bb.emit(relax.op.reshape(x, [1, 4, 64, 32])), [0, 2, 1, 3]))
        merged = bb.emit(relax.op.reshape(moved, [1, 64, 128]))
        return relax.op.multiply(relax.op.tanh(merged), relax.const(np.float32(0.5)))

    mod = module([(4, 64, 32)], emit)
    assert list(scheduled_blocks(mod).values()) == [1]
    x = rand(4, 64, 32)
    actual, _ = run(mod, x)
    check(actual, np.tanh(x.transpose(1, 0, 2).reshape(1, 64, 128)) * 0.5)


def fallback_blocks(producer, reader) -> int:
    """Blocks left by `schedule_fallback` in a TE function `reader(producer(A))` of A: [64, 64]."""
    a = te.placeholder((64, 64), name="A")
    b = te.compute((64, 64), lambda i, j: producer(a, i, j), name="B")
    c = te.compute((64, 64), lambda i, j: reader(b, i, j), name="C")
    sch = schedule_fallback(te.create_prim_func([a, c]), TARGET)
    return len(blocks.child_blocks(sch))


def test_an_element_read_twice_is_not_computed_twice() -> None:
    """exp(A) read at two places per output (a stencil) keeps its pass; read once, it is inlined."""
    def exp(a, i, j):
        return te.exp(a[i, j])

    assert fallback_blocks(exp, lambda b, i, j: b[i, j] + b[i, (j + 1) % 64]) == 2
    assert fallback_blocks(exp, lambda b, i, j: b[j, i] * 2.0) == 1


def test_a_move_is_inlined_into_any_reader() -> None:
    """A transpose costs a load wherever it is read: inlined into a stencil too."""
    assert fallback_blocks(lambda a, i, j: a[j, i], lambda b, i, j: b[i, j] + b[i, (j + 1) % 64]) == 1


def test_a_reduction_keeps_its_producer() -> None:
    """A sum reads every element of its row: the exp before it stays a pass."""
    a = te.placeholder((64, 64), name="A")
    b = te.compute((64, 64), lambda i, j: te.exp(a[i, j]), name="B")
    k = te.reduce_axis((0, 64), name="k")
    c = te.compute((64,), lambda i: te.sum(b[i, k], axis=k), name="C")
    sch = schedule_fallback(te.create_prim_func([a, c]), TARGET)
    assert len(blocks.child_blocks(sch)) == 2
