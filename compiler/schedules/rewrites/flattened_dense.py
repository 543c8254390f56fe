"""A dense layer over an input flattened for it and unflattened after, as one batched matmul (a Relax
rewrite before legalisation).

TFLite's FULLY_CONNECTED on a 3-D input of unknown length (a Transformer's feed-forward over a
sequence of any length) imports as

    reshape(matmul(reshape(x, [1 * n, k]), w), [1, n, units])

where the same layer at a fixed length imports as `matmul(x, w)`. FuseOps does not fuse an
elementwise step across a reshape, so the activation after such a layer (the encoder block's
GELU, its residual add) ran as kernels of their own, each a VM call and a pass over the output:
the encoder block for sequences of any length spent 17 us on them at 128 tokens
(docs/schedules.md, "Rows of any length"). When the inner reshape only merges ``x``'s leading axes
and the outer one restores them, `matmul` broadcasting over those axes computes the same values,
so the pair of reshapes goes.
"""

from __future__ import annotations

import math

import tvm
from tvm import relax, sym
from tvm.relax.dpl import is_op, wildcard

from tfcheck.compiler.schedules.rewrites.relax_rewrite import rewrite_functions


def _dims(expr: relax.Expr) -> list[tvm.tirx.PrimExpr] | None:
    """The dimensions of a tensor of known rank, or None."""
    return getattr(getattr(expr.ty, "shape", None), "values", None)


def _same(analyzer: sym.Analyzer, left: list[tvm.tirx.PrimExpr], right: list[tvm.tirx.PrimExpr]) -> bool:
    return len(left) == len(right) and all(analyzer.can_prove_equal(a, b) for a, b in zip(left, right))


def _batched(x: relax.Expr, flat: relax.Expr, weights: relax.Expr, out: relax.Expr) -> bool:
    """Whether ``flat`` (``x`` reshaped, 2-D) merges ``x``'s leading axes and keeps its last,
    ``weights`` is 2-D, and ``out`` restores ``x``'s leading axes with the weights' columns."""
    x_dims, flat_dims, w_dims, out_dims = _dims(x), _dims(flat), _dims(weights), _dims(out)
    if x_dims is None or flat_dims is None or w_dims is None or out_dims is None:
        return False
    if len(x_dims) < 3 or len(flat_dims) != 2 or len(w_dims) != 2:
        return False
    analyzer = sym.Analyzer()
    leading = math.prod(x_dims[:-1][1:], start=x_dims[0])
    return (_same(analyzer, flat_dims, [leading, x_dims[-1]]) and analyzer.can_prove_equal(x_dims[-1], w_dims[0])
            and _same(analyzer, out_dims, [*x_dims[:-1], w_dims[1]]))


def unflatten_dense_layers(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each ``reshape(matmul(reshape(x), w))`` that only flattens and restores ``x``'s
    leading axes written as ``matmul(x, w)``."""
    flat = is_op("relax.reshape")(wildcard(), wildcard())
    dense = is_op("relax.matmul")(flat, wildcard())
    out = is_op("relax.reshape")(dense, wildcard())

    def rewrite(original: relax.Expr, matched: dict[relax.dpl.DFPattern, relax.Expr]) -> relax.Expr:
        x, weights = matched[flat].args[0], matched[dense].args[1]
        if not _batched(x, matched[flat], weights, original):
            return original
        out_dtype = matched[dense].attrs.out_dtype
        return relax.op.matmul(x, weights, out_dtype=None if str(out_dtype) in ("", "void") else out_dtype)

    return rewrite_functions(mod, out, rewrite)
