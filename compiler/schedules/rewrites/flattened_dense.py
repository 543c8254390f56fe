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

The same holds wherever the outer reshape's leading axes ``P`` hold the flattened rows (their
product is the rows' count ``m``) and its other axes ``Q`` the units: each output row is its
input row times ``w``, and a reshape keeps the rows in order, so

    reshape(matmul(reshape(y, [m, k]), w), P + Q)  ==  reshape(matmul(reshape(y, P + [k]), w), P + Q)

whatever ``y``'s shape (the reshapes that are the identity then go). A BERT over a batch of any
size (kpe/bert-for-tf2, docs/build.md "Users' models") had both other forms in every layer: the
attention's output projection over its heads merged back, ``[b, 128, 12, 64]`` flattened to
``[b * 128, 768]`` and restored to ``[b, 128, 768]``, whose residual add ran as a kernel of its
own; and the query, key and value projections restored to ``[b, 128, 12, 64]``, whose head
splits then read their input at ``row % (b * 128)``, an integer division by a size known only at
run time for every element (0.30 against 0.11 ms a call for the fixed-batch build's, one thread).
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


def _product(dims: list[tvm.tirx.PrimExpr]) -> tvm.tirx.PrimExpr:
    return math.prod(dims[1:], start=dims[0]) if dims else tvm.tirx.const(1, "int64")


def _rows_axes(flat: list[tvm.tirx.PrimExpr], weights: list[tvm.tirx.PrimExpr],
               out: list[tvm.tirx.PrimExpr]) -> int | None:
    """How many leading axes of ``out`` hold the rows of the 2-D ``flat`` (at least two, the rest
    holding the weights' columns), or None when no split of ``out`` does."""
    if len(flat) != 2 or len(weights) != 2:
        return None
    analyzer = sym.Analyzer()
    if not analyzer.can_prove_equal(flat[1], weights[0]):
        return None
    for count in range(2, len(out)):
        if analyzer.can_prove_equal(_product(out[:count]), flat[0]):
            return count if analyzer.can_prove_equal(_product(out[count:]), weights[1]) else None
    return None


def _batched(y: relax.Expr, flat: relax.Expr, weights: relax.Expr,
             out: relax.Expr) -> tuple[relax.Expr, int] | None:
    """The left operand of the matmul over the rows axes of ``out`` (``y``, reshaped to them unless
    it has their shape already) and how many axes they are; None where ``out`` does not restore
    the rows (`_rows_axes`)."""
    y_dims, flat_dims, w_dims, out_dims = _dims(y), _dims(flat), _dims(weights), _dims(out)
    if y_dims is None or flat_dims is None or w_dims is None or out_dims is None:
        return None
    count = _rows_axes(flat_dims, w_dims, out_dims)
    if count is None:
        return None
    rows = [*out_dims[:count], flat_dims[1]]
    return (y if _same(sym.Analyzer(), y_dims, rows) else relax.op.reshape(y, rows)), count


def unflatten_dense_layers(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each ``reshape(matmul(reshape(y), w))`` whose outer reshape restores the
    flattened rows written as a matmul over those rows (``reshape(y)`` and the outer reshape only
    where they are not the identity)."""
    flat = is_op("relax.reshape")(wildcard(), wildcard())
    dense = is_op("relax.matmul")(flat, wildcard())
    out = is_op("relax.reshape")(dense, wildcard())

    def rewrite(original: relax.Expr, matched: dict[relax.dpl.DFPattern, relax.Expr]) -> relax.Expr:
        y, weights = matched[flat].args[0], matched[dense].args[1]
        batched = _batched(y, matched[flat], weights, original)
        if batched is None:
            return original
        lhs, count = batched
        out_dtype = matched[dense].attrs.out_dtype
        product = relax.op.matmul(lhs, weights, out_dtype=None if str(out_dtype) in ("", "void") else out_dtype)
        out_dims = _dims(original)
        return product if count == len(out_dims) - 1 else relax.op.reshape(product, list(out_dims))

    return rewrite_functions(mod, out, rewrite)
