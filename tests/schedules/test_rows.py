"""The row rule (`compiler/schedules/rules/rows.py`): softmax, layer norm and means over the last axis
computed row by row, vectorised along the row at the target's vector width, rows over the cores
when there is enough work, and the same results as NumPy."""

from __future__ import annotations

import re

import pytest
import tvm
from tvm import relax, tirx

from tfcheck.compiler.schedules.apply import RULE_ATTR, legalize_and_fuse, schedule_module
from tfcheck.compiler.schedules.rules.rows import schedule_rows

from ..isa import named_target
from . import reference
from .test_operators import check, module, rand, run

# AVX-512 (16 float lanes), AVX2 (8) and SSE2 (4) targets whatever the host. The tests that run
# their code (`run`) skip the ISAs this CPU lacks.
TARGETS = {"avx512": "skylake-avx512", "avx2": "znver3", "sse2": "x86-64"}
LANES = {"avx512": 16, "avx2": 8, "sse2": 4}


def target(kind: str) -> tvm.target.Target:
    return named_target(TARGETS[kind])


def scheduled_functions(mod: tvm.IRModule, target: tvm.target.Target) -> list[tirx.PrimFunc]:
    """The PrimFuncs of `mod` after legalisation, fusion and the rules."""
    scheduled = schedule_module(legalize_and_fuse(mod, target), target)
    return [func for _, func in scheduled.functions_items() if isinstance(func, tirx.PrimFunc)]


def vector_widths(func: tirx.PrimFunc) -> set[int]:
    return {int(width) for width in re.findall(r"T\.vectorized\(T\.int64\((\d+)\)\)", func.script())}


def softmax(shape: tuple[int, ...]) -> tvm.IRModule:
    return module([shape], lambda bb, v: relax.op.nn.softmax(v, axis=-1))


def mean(shape: tuple[int, ...]) -> tvm.IRModule:
    return module([shape], lambda bb, v: relax.op.mean(v, axis=[-1], keepdims=True))


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("shape", [(1, 1000), (4, 64, 64), (3, 17)])
def test_softmax_rows_match_numpy_on_every_vector_width(kind: str, shape: tuple[int, ...]) -> None:
    x = rand(*shape) * 8
    actual, rules = run(softmax(shape), x, target=target(kind))
    check(actual, reference.softmax(x))
    assert rules == ["schedule_rows"]


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("shape", [(1, 64, 128), (5, 33)])
def test_layer_norm_and_means_match_numpy(kind: str, shape: tuple[int, ...]) -> None:
    x, gamma, beta = rand(*shape), rand(shape[-1]), rand(shape[-1])
    layer_norm = module([shape], lambda bb, v: relax.op.nn.layer_norm(v, relax.const(gamma), relax.const(beta),
                                                                       axes=[-1]))
    actual, rules = run(layer_norm, x, target=target(kind))
    check(actual, reference.layer_norm(x, gamma, beta))
    assert "schedule_rows" in rules
    actual, rules = run(mean(shape), x, target=target(kind))
    check(actual, x.mean(axis=-1, keepdims=True))
    assert rules == ["schedule_rows"]


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_rows_are_vectorised_at_the_targets_width(kind: str) -> None:
    """Every reduction over a 64-wide row becomes `lanes` partial results in one vector, and every
    step along the row is vectorised at that width."""
    [func] = scheduled_functions(softmax((4, 64, 64)), target(kind))
    assert func.attrs[RULE_ATTR] == "schedule_rows"
    assert vector_widths(func) == {LANES[kind]}
    assert func.script().count("_rf_update") == 2  # the max and the sum, each over vectors


def test_rows_run_in_parallel_only_when_the_work_pays_for_it() -> None:
    """A softmax over 256 rows of 64 (five steps per element) is split over the cores; a mean over
    64 rows of 128 is not (measured: 5.4 against 11.3 us, and 3.5 against 0.4 us; docs/schedules.md)."""
    [large] = scheduled_functions(softmax((4, 64, 64)), target("avx512"))
    [small] = scheduled_functions(mean((1, 64, 128)), target("avx512"))
    assert "T.parallel(" in large.script() and "T.parallel(" not in small.script()


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_a_softmax_computes_each_exp_once_and_divides_once_per_row(kind: str) -> None:
    """The exps, read by the sum and by the normalisation, are kept in a row of their own, not
    computed in both (the fast exp's `reinterpret` appears once); each element is multiplied by
    its row's inverted sum, a division LLVM hoists out of the row's loop. A [1, 4, 64, 64] softmax
    took 24.1 us a call with the exps computed twice and divided, 20.4 with them kept, 18.5 with
    the multiply (docs/schedules.md, "Softmax: each exp once")."""
    [func] = scheduled_functions(softmax((4, 64, 64)), target(kind))
    script = func.script()
    assert script.count('T.sblock("T_fast_exp")') == 1 and script.count("T.reinterpret(") == 1
    [normalise] = [line for line in script.splitlines() if line.strip().startswith("T_softmax_norm[")]
    assert "* (T.float32(1.0) / T_softmax_expsum[" in normalise


@pytest.mark.parametrize("kind", ["avx512", "avx2"])
def test_reductions_over_other_axes_are_not_rows(kind: str) -> None:
    """A mean over the middle axis is not a row reduction (the contraction rule takes it: pooling)."""
    x = rand(4, 9, 16)
    actual, rules = run(module([x.shape], lambda bb, v: relax.op.mean(v, axis=[1])), x, target=target(kind))
    check(actual, x.mean(axis=1))
    assert rules and "schedule_rows" not in rules


def test_a_mean_without_kept_dimensions_is_a_row_reduction_too() -> None:
    x = rand(64, 128)
    actual, rules = run(module([x.shape], lambda bb, v: relax.op.mean(v, axis=[-1])), x, target=target("avx2"))
    check(actual, x.mean(axis=-1))
    assert rules == ["schedule_rows"]


@pytest.mark.parametrize("kind", ["avx512", "avx2"])
def test_a_softmax_over_another_axis_is_not_rows(kind: str) -> None:
    """Its reductions read columns: computed row by row, every row would redo them."""
    x = rand(4, 64, 8)
    actual, rules = run(module([x.shape], lambda bb, v: relax.op.nn.softmax(v, axis=1)), x, target=target(kind))
    check(actual, reference.softmax(x, axis=1))
    assert rules and "schedule_rows" not in rules


def test_a_matmul_is_not_rows_even_when_its_micro_kernel_is_refused() -> None:
    """Its reduction also indexes the weights along their first axis: not a row of one input."""
    x, w = rand(8, 16), rand(16, 32)
    dense_relu = module([x.shape], lambda bb, v: relax.op.nn.relu(bb.emit(relax.op.matmul(v, relax.const(w)))))
    fused = legalize_and_fuse(dense_relu, target("avx512"))
    [func] = [func for _, func in fused.functions_items() if isinstance(func, tirx.PrimFunc)]
    assert schedule_rows(func, target("avx512")) is None
