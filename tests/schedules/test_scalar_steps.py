"""compiler/schedules/rewrites/scalar_steps.py: a step by a scalar after a reshape moves before it.

The case is an attention's scores as the importer writes Keras' MultiHeadAttention (the encoder
block of benchmarks/compiled/small_models.py): a 3-D batch matmul, a reshape to 4-D, a multiply by
1 / sqrt(key_dim). Moved, the multiply joins the matmul's kernel.
"""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax, tirx

from tfcheck.compiler.schedules import apply_default_schedules
from tfcheck.compiler.schedules.rewrites.scalar_steps import move_scalar_steps_before_reshapes

from .test_operators import TARGET, check, module, rand, run

Q, K = rand(4, 16, 8), rand(4, 8, 16)


def scores(step, constant: np.ndarray):
    """`step(reshape(matmul(q, k)), constant)`, as the importer writes an attention's scaled scores."""
    def emit(bb: relax.BlockBuilder, q: relax.Expr, k: relax.Expr) -> relax.Expr:
        product = bb.emit(relax.op.reshape(bb.emit(relax.op.matmul(q, k)), [1, 4, 16, 16]))
        return step(product, relax.const(constant))
    return module([Q.shape, K.shape], emit)


def kernels(mod) -> list[str]:
    """The names of the scheduled module's kernels (TIR functions), reshapes left out: the build
    turns a reshape alone into a view."""
    scheduled = apply_default_schedules(mod, TARGET)
    return sorted(gv.name_hint for gv, func in scheduled.functions_items()
                  if isinstance(func, tirx.PrimFunc) and not gv.name_hint.startswith("reshape"))


SCALE = np.float32(0.125)
STEPS = {
    "x * c": (lambda x, c: relax.op.multiply(x, c), lambda x, c: x * c),
    "c * x": (lambda x, c: relax.op.multiply(c, x), lambda x, c: c * x),
    "x + c": (lambda x, c: relax.op.add(x, c), lambda x, c: x + c),
    "x - c": (lambda x, c: relax.op.subtract(x, c), lambda x, c: x - c),
    "x / c": (lambda x, c: relax.op.divide(x, c), lambda x, c: x / c),
}


@pytest.mark.parametrize("name", STEPS)
@pytest.mark.parametrize("constant", [np.array(SCALE), np.full((1, 1, 1, 1), SCALE)], ids=["rank 0", "rank 4"])
def test_a_scalar_step_joins_the_matmul(name: str, constant: np.ndarray) -> None:
    step, expected = STEPS[name]
    mod = scores(step, constant)
    assert len(kernels(mod)) == 1, kernels(mod)
    actual, _ = run(mod, Q, K)
    assert actual.shape == (1, 4, 16, 16)
    check(actual, expected((Q @ K).reshape(1, 4, 16, 16), constant.reshape(())))


def test_a_constant_minus_the_scores_stays_correct() -> None:
    """`c - x` is not matched (subtract is not commutative): left as written, still right."""
    mod = scores(lambda x, c: relax.op.subtract(c, x), np.array(SCALE))
    assert "reshape" in move_scalar_steps_before_reshapes(mod)["main"].script().split("subtract")[0]
    actual, _ = run(mod, Q, K)
    check(actual, SCALE - (Q @ K).reshape(1, 4, 16, 16))


def test_a_tensor_constant_stays_after_the_reshape() -> None:
    """A per-head scale broadcasts by the 4-D shape, not the 3-D one: it must not move."""
    per_head = np.arange(1, 5, dtype=np.float32).reshape(1, 4, 1, 1)
    mod = scores(lambda x, c: relax.op.multiply(x, c), per_head)
    assert move_scalar_steps_before_reshapes(mod)["main"].script() == mod["main"].script()
    actual, _ = run(mod, Q, K)
    check(actual, (Q @ K).reshape(1, 4, 16, 16) * per_head)
