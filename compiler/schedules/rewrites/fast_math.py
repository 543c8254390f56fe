"""Vectorisable float32 exp, sigmoid, tanh, erf and softmax for the CPU build.

Why: TVM lowers `exp`, `sigmoid`, `tanh` and `erf` to LLVM intrinsics that LLVM turns into one
libm call per element, so no schedule can vectorise them: an LSTM cell's gates (8 x 128 values)
took 24 us, a Transformer block's softmax 136 us and its GELU 212 us, more than its matmuls.
TVM's `topi.fast_*` functions compute the same functions with polynomial or rational
approximations built from arithmetic, which vectorise: the Cephes `expf` range reduction for exp,
and Eigen's rational approximations of tanh and erf, the ones TensorFlow's own CPU kernels use.
Measured against the libm versions on this project's workloads: at most 1e-6 absolute difference
in the outputs, and the LSTM 1.9x, the encoder block 1.6x faster (docs/schedules.md).

Only float32 takes the approximations (the only type they are written for); other types keep
TVM's legalization.
"""

from __future__ import annotations

from collections.abc import Callable

import tvm
from tvm import relax, te, topi

LegalizeFunc = Callable[[relax.BlockBuilder, relax.Call], relax.Expr]


def _sigmoid(x: te.Tensor) -> te.Tensor:
    """1 / (1 + exp(-x)) with the fast exp (TVM's `sigmoid` has no fast variant)."""
    exp = topi.fast_exp(topi.negative(x))
    one = tvm.tirx.const(1.0, x.dtype)
    return te.compute(x.shape, lambda *i: one / (one + exp(*i)), name="sigmoid")


def _softmax(x: te.Tensor, axis: int) -> te.Tensor:
    """`topi.nn.fast_softmax` with each row's sum inverted once: `exp * (1 / sum)` instead of
    `exp / sum`, so that LLVM hoists the one division out of the row's loop where it emitted a
    vector division per element (TFLite's and XNNPACK's softmax do the same; the results differ
    in the last bit)."""
    axis = axis % len(x.shape)
    rows = [extent for index, extent in enumerate(x.shape) if index != axis]

    def row(indices: tuple[tvm.tirx.Var, ...]) -> tuple[tvm.tirx.Var, ...]:
        return indices[:axis] + indices[axis + 1:]

    def along(indices: tuple[tvm.tirx.Var, ...], k: tvm.tirx.Var) -> tuple[tvm.tirx.Var, ...]:
        return indices[:axis] + (k,) + indices[axis:]

    k = te.reduce_axis((0, x.shape[axis]), name="k")
    largest = te.compute(rows, lambda *i: te.max(x[along(i, k)], axis=k), name="T_softmax_maxelem")
    exp = topi.fast_exp(te.compute(x.shape, lambda *i: x[i] - largest[row(i)], name="T_softmax_delta"))
    k = te.reduce_axis((0, x.shape[axis]), name="k")
    total = te.compute(rows, lambda *i: te.sum(exp[along(i, k)], axis=k), name="T_softmax_expsum")
    one = tvm.tirx.const(1.0, x.dtype)
    return te.compute(x.shape, lambda *i: exp[i] * (one / total[row(i)]), name="T_softmax_norm")


def _float32_only(op_name: str, compute: Callable[..., te.Tensor], *attrs: str) -> LegalizeFunc:
    """Legalize `op_name` with `compute` (given the op's `attrs` by name) for float32 inputs; any
    other dtype takes the op's registered legalization."""
    default = tvm.ir.Op.get(op_name).get_attr("FLegalize")
    name = "fast_" + op_name.rsplit(".", 1)[-1]

    def legalize(builder: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        if call.args[0].ty.dtype != "float32":
            return default(builder, call)
        values = [getattr(call.attrs, attr) for attr in attrs]
        return builder.call_te(compute, call.args[0], *values, primfunc_name_hint=name)

    return legalize


def fast_math_legalization() -> dict[str, LegalizeFunc]:
    """The `customize_legalize_map` of `relax.transform.LegalizeOps` that selects the fast versions."""
    return {
        "relax.exp": _float32_only("relax.exp", topi.fast_exp),
        "relax.sigmoid": _float32_only("relax.sigmoid", _sigmoid),
        "relax.tanh": _float32_only("relax.tanh", topi.fast_tanh),
        "relax.erf": _float32_only("relax.erf", topi.fast_erf),
        "relax.nn.softmax": _float32_only("relax.nn.softmax", _softmax, "axis"),
    }
