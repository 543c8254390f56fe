"""Elementwise steps by a scalar constant moved before the reshape they follow (a Relax rewrite
before legalisation), so that FuseOps puts them in the epilogue of the kernel before the reshape.

TFLite's BATCH_MATMUL works on 3-D tensors, so the importer writes an attention's scores as
`reshape(matmul(q, k))` to the 4-D shape the model uses, and Keras' MultiHeadAttention scales them
after that: `multiply(reshape(matmul(q, k)), 1 / sqrt(key_dim))`. FuseOps does not fuse across a
reshape, so the scale was a kernel of its own, a VM call and a pass over the scores (the encoder
block of benchmarks/compiled/small_models.py: 3.7 us of 170). A step by a scalar gives the same
values on either side of a reshape, so `op(reshape(x), c)` becomes `reshape(op(x, c))`: the step
joins the matmul's epilogue and the reshape is a view. Only scalar constants (any rank, one
element) move: a tensor constant broadcasts by the reshaped shape, not the original one.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.dpl import is_const, is_op, wildcard

from tfcheck.compiler.schedules.rewrites.relax_rewrite import rewrite_functions

# Steps `op(reshaped, c)` that may move; the commutative ones may also be written `op(c, reshaped)`.
_STEPS = {"relax.multiply": relax.op.multiply, "relax.add": relax.op.add,
          "relax.subtract": relax.op.subtract, "relax.divide": relax.op.divide}
_COMMUTATIVE = ("relax.multiply", "relax.add")


def _pattern() -> tuple[relax.dpl.DFPattern, relax.dpl.DFPattern, relax.dpl.DFPattern]:
    """The step after a reshape, the reshape and the constant."""
    reshape, constant = is_op("relax.reshape")(wildcard(), wildcard()), is_const()
    step = None
    for name in _STEPS:
        forms = is_op(name)(reshape, constant)
        if name in _COMMUTATIVE:
            forms = forms | is_op(name)(constant, reshape)
        step = forms if step is None else step | forms
    return step, reshape, constant


def _moved(step: relax.Call, reshape: relax.Call, constant: relax.Constant) -> relax.Expr | None:
    """`reshape(op(x, c))` for `op(reshape(x), c)`, or None when ``constant`` is not one element."""
    value = constant.value.numpy()
    if value.size != 1:
        return None
    scalar = relax.const(value.reshape(()), str(value.dtype))
    args = [scalar if arg.same_as(constant) else reshape.args[0] for arg in step.args]
    return relax.op.reshape(_STEPS[step.op.name](*args), reshape.args[1])


def move_scalar_steps_before_reshapes(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each elementwise step by a scalar constant done before the reshape it follows."""
    step, reshape, constant = _pattern()

    def rewrite(original: relax.Expr, matched: dict[relax.dpl.DFPattern, relax.Expr]) -> relax.Expr:
        moved = _moved(original, matched[reshape], matched[constant])
        return original if moved is None else moved

    return rewrite_functions(mod, step, rewrite)
