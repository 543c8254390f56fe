"""Matmuls of one input by several constant weights as one matmul (a Relax rewrite before
legalisation), each result a slice of its output.

An attention's query, key and value projections (Keras' MultiHeadAttention through TFLite: three
FULLY_CONNECTED layers on the same tokens) were three kernels of N = 128, each a VM call and a
parallel region, on a 2-core machine that splits a 64 x 128 x 128 product poorly. TVM's
`CombineParallelMatmul` concatenates the weights (constants: `FoldConstant` joins them at build
time) into one matmul of N = 384 and splits its output. Its `split` is a kernel of its own (a
tuple-producing pass FuseOps fuses with nothing), so each of its results becomes a
`strided_slice` of the product instead, which FuseOps fuses into the step that reads it (here the
head split, one pass with the fallback's inlining: `fallback.inline_intermediates`). The encoder
block: three matmuls and three head splits become one matmul and three head splits
(docs/schedules.md, "Attention in fewer passes"). Only matmuls whose weights are constants are
combined: concatenating tensors computed at run time would be a copy per call. Every `split`
along an axis of known extent becomes slices, TFLite's SPLIT of a recurrent cell's gates too: the coverage sweep's LSTM
took 236.8 / 230.7 us a call against 295.1 / 275.5 with its split a kernel, its GRU the same
either way (one process, each variant built twice).
"""

from __future__ import annotations

import logging

import tvm
from tvm import relax
from tvm.relax.dpl import is_op, is_tuple_get_item, wildcard

from tfcheck.compiler.schedules.rewrites.relax_rewrite import rewrite_functions

logger = logging.getLogger(__name__)


def _constant(expr: relax.Expr, bindings: dict[relax.Var, relax.Expr]) -> bool:
    """Whether ``expr`` is a constant, possibly transposed (the importer's weights: `permute_dims`
    of a constant), looking through the variables bound in the function."""
    while isinstance(expr, relax.Var) and expr in bindings:
        expr = bindings[expr]
    if isinstance(expr, relax.Call) and getattr(expr.op, "name", None) == "relax.permute_dims":
        return _constant(expr.args[0], bindings)
    return isinstance(expr, tvm.ir.expr.Constant)


def _constant_weights(_lhs: relax.Var, rhs: list[relax.Var], bias: list[relax.Var],
                      bindings: dict[relax.Var, relax.Expr]) -> bool:
    """`CombineParallelMatmul`'s filter: combine a group only when every weight and every bias
    is a constant. A bias computed at run time would be a copy per call, and can make a cycle: in
    a bidirectional LSTM unrolled in TensorFlow, step t forwards and step T-1-t backwards multiply
    the same slice of the input, each added to its direction's previous state, which depends on the
    other's group ("Bindings contain circular dependency")."""
    known = dict(bindings)  # TVM's map, converted once for the group
    return all(_constant(value, known) for value in [*rhs, *bias])


def _bounds(split: relax.Call, index: int) -> tuple[int, int, int] | None:
    """(axis, begin, end) of result ``index`` of a `split` along an axis of known extent; None for
    another. The other axes may be of any size (the tokens of a sequence of any length: its Q/K/V
    split and the transposes after it ran as four kernels, 19 against 10 us at 128 tokens)."""
    shape = getattr(split.args[0].ty, "shape", None)
    dims = getattr(shape, "values", None)
    if dims is None:
        return None
    axis = int(split.attrs.axis) % len(dims)
    if not isinstance(dims[axis], tvm.tirx.IntImm):
        return None
    extent = int(dims[axis])
    sections = split.attrs.indices_or_sections
    if isinstance(sections, tvm.tirx.IntImm):
        step = extent // int(sections)
        cuts = [step * number for number in range(1, int(sections))]
    else:
        cuts = [int(cut) for cut in sections]
    edges = [0, *cuts, extent]
    return axis, edges[index], edges[index + 1]


def _split_results_as_slices(mod: tvm.IRModule) -> tvm.IRModule:
    """Each `split(x)[i]` as a `strided_slice` of ``x`` (the `split` then goes unused)."""
    split = is_op("relax.split")(wildcard())
    pattern = is_tuple_get_item(split)

    def rewrite(original: relax.Expr, matched: dict[relax.dpl.DFPattern, relax.Expr]) -> relax.Expr:
        bounds = _bounds(matched[split], int(original.index))
        if bounds is None:
            return original
        axis, begin, end = bounds
        return relax.op.strided_slice(matched[split].args[0], axes=[axis], begin=[begin], end=[end])

    return relax.transform.DeadCodeElimination()(rewrite_functions(mod, pattern, rewrite))


def combine_parallel_matmuls(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with the matmuls of one input by constant weights combined, each result a slice;
    ``mod`` as it is where TVM's pass cannot filter the groups: it hands the filter its input as
    a variable and fails on a constant one (an unrolled GRU's first step multiplies its zero
    initial state, a constant, by the recurrent weights)."""
    try:
        combined = relax.transform.CombineParallelMatmul(check=_constant_weights)(mod)
    except TypeError as error:  # "Cannot treat type `ir.GenericConst` as type `ir.Var`"
        logger.info("matmuls left apart: %s", error)
        return mod
    return _split_results_as_slices(combined)
