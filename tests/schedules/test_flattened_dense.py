"""compiler/schedules/rewrites/flattened_dense.py: a dense layer over an input flattened for it and
unflattened after is one batched matmul, so the activation after it joins its kernel.

The case is TFLite's FULLY_CONNECTED over a sequence of any length as the importer writes it (the
feed-forward of `benchmarks/any_size/models.py`'s encoder block): `reshape(matmul(reshape(x, [n,
k]), w), [1, n, units])`, then a GELU-like step.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax, tirx

from tfcheck.compiler.schedules import apply_default_schedules, compile_cpu
from tfcheck.compiler.schedules.rewrites.flattened_dense import unflatten_dense_layers

from .test_operators import TARGET, check, module, rand

W = rand(8, 16)


def dense_then_step(x_shape: tuple, flat_shape: list, out_shape: list) -> relax.Function:
    """``relu(reshape(matmul(reshape(x, flat_shape), W), out_shape) * 0.5 + 1)``."""
    def emit(bb: relax.BlockBuilder, x: relax.Expr) -> relax.Expr:
        flat = bb.emit(relax.op.reshape(x, flat_shape))
        dense = bb.emit(relax.op.reshape(bb.emit(relax.op.matmul(flat, relax.const(W))), out_shape))
        return relax.op.nn.relu(bb.emit(relax.op.add(bb.emit(relax.op.multiply(dense, relax.const(np.float32(0.5)))),
                                                     relax.const(np.float32(1.0)))))
    return module([x_shape], emit)


def expected(x: np.ndarray, out_shape: tuple) -> np.ndarray:
    return np.maximum((x.reshape(-1, 8) @ W).reshape(out_shape) * 0.5 + 1.0, 0.0)


def kernels(scheduled) -> list[str]:
    """The scheduled module's kernels, reshapes left out (the build turns a reshape alone into a view)."""
    return sorted(gv.name_hint for gv, func in scheduled.functions_items()
                  if isinstance(func, tirx.PrimFunc) and not gv.name_hint.startswith("reshape"))


def test_a_dense_layer_over_a_sequence_of_any_length_is_one_kernel_with_its_activation() -> None:
    length = tirx.Var("n", "int64")
    mod = dense_then_step((1, length, 8), [length, 8], [1, length, 16])
    assert "reshape" not in unflatten_dense_layers(mod)["main"].script()
    scheduled = apply_default_schedules(mod, TARGET)
    assert len(kernels(scheduled)) == 1, kernels(scheduled)
    vm = relax.VirtualMachine(compile_cpu(scheduled, TARGET), tvm.cpu())
    for n in (1, 3, 17):
        x = rand(1, n, 8)
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), expected(x, (1, n, 16)))


def test_a_static_flattened_dense_layer_is_rewritten_too() -> None:
    mod = dense_then_step((2, 3, 8), [6, 8], [2, 3, 16])
    rewritten = unflatten_dense_layers(mod)["main"].script()
    assert "reshape" not in rewritten and "R.matmul(x0," in rewritten


def test_rows_regrouped_by_the_outer_reshape_are_a_matmul_over_its_axes() -> None:
    """Rows flattened from 2 x 3 and restored as 3 x 2: a reshape keeps the rows in order, so the
    matmul runs over the 3 x 2 rows and its activation joins it."""
    mod = dense_then_step((2, 3, 8), [6, 8], [3, 2, 16])
    rewritten = unflatten_dense_layers(mod)["main"].script()
    assert "R.shape([6, 8])" not in rewritten and "R.reshape(x0, R.shape([3, 2, 8]))" in rewritten
    scheduled = apply_default_schedules(mod, TARGET)
    x = rand(2, 3, 8)
    vm = relax.VirtualMachine(compile_cpu(scheduled, TARGET), tvm.cpu())
    check(vm["main"](tvm.runtime.tensor(x)).numpy(), expected(x, (3, 2, 16)))


def test_a_reshape_that_mixes_rows_and_units_stays() -> None:
    """6 rows of 16 units read back as 4 x 3 x 8: no leading axes hold the rows."""
    mod = dense_then_step((2, 3, 8), [6, 8], [4, 3, 8])
    assert unflatten_dense_layers(mod)["main"].script() == mod["main"].script()
    scheduled = apply_default_schedules(mod, TARGET)
    x = rand(2, 3, 8)
    vm = relax.VirtualMachine(compile_cpu(scheduled, TARGET), tvm.cpu())
    check(vm["main"](tvm.runtime.tensor(x)).numpy(), expected(x, (4, 3, 8)))


# kpe/bert-for-tf2's attention over a batch of any size, as the importer writes it (docs/build.md,
# "Users' models"), at 4 tokens of 2 heads of 4 (BERT base: 128 tokens, 12 heads of 64).
TOKENS, HEADS, DEPTH = 4, 2, 4


def attention_output(bb: relax.BlockBuilder, context: relax.Expr, residual: relax.Expr) -> relax.Expr:
    """The output projection over the heads merged back, then the residual add:
    ``reshape(matmul(reshape(context [b, t, h, d], [b * t, h * d]), W), [b, t, h * d]) + residual``."""
    batch = context.ty.shape.values[0]
    flat = bb.emit(relax.op.reshape(context, [batch * TOKENS, HEADS * DEPTH]))
    dense = bb.emit(relax.op.matmul(flat, relax.const(W)))
    return relax.op.add(bb.emit(relax.op.reshape(dense, [batch, TOKENS, 2 * HEADS * DEPTH])), residual)


def test_an_attention_output_over_any_batch_is_one_kernel_with_its_residual_add() -> None:
    batch = tirx.Var("batch", "int64")
    mod = module([(batch, TOKENS, HEADS, DEPTH), (batch, TOKENS, 16)], attention_output)
    rewritten = unflatten_dense_layers(mod)["main"].script()
    assert "batch * 4" not in rewritten, rewritten
    scheduled = apply_default_schedules(mod, TARGET)
    assert len(kernels(scheduled)) == 1, kernels(scheduled)
    vm = relax.VirtualMachine(compile_cpu(scheduled, TARGET), tvm.cpu())
    for size in (1, 3):
        context, residual = rand(size, TOKENS, HEADS, DEPTH), rand(size, TOKENS, 16)
        check(vm["main"](tvm.runtime.tensor(context), tvm.runtime.tensor(residual)).numpy(),
              (context.reshape(-1, 8) @ W).reshape(size, TOKENS, 16) + residual)


def query_heads(bb: relax.BlockBuilder, x: relax.Expr) -> relax.Expr:
    """A projection restored as heads, then the heads transposed:
    ``permute(reshape(matmul(reshape(x [b, t, 8], [b * t, 8]), W), [b, t, h, 8]), [0, 2, 1, 3])``."""
    batch = x.ty.shape.values[0]
    dense = bb.emit(relax.op.matmul(bb.emit(relax.op.reshape(x, [batch * TOKENS, 8])), relax.const(W)))
    heads = bb.emit(relax.op.reshape(dense, [batch, TOKENS, 2, 8]))
    return relax.op.permute_dims(heads, [0, 2, 1, 3])


def test_heads_of_a_projection_over_any_batch_index_no_flattened_rows() -> None:
    """The matmul keeps the batch and the tokens as axes, so the head transpose reads its input at
    ``[b, t, ...]``: no element index modulo ``batch * 4``, a division by a size known only at run
    time for every element."""
    batch = tirx.Var("batch", "int64")
    mod = module([(batch, TOKENS, 8)], query_heads)
    rewritten = unflatten_dense_layers(mod)["main"].script()
    assert "batch * 4" not in rewritten and "R.matmul(x0," in rewritten, rewritten
    scheduled = apply_default_schedules(mod, TARGET)
    assert not any("batch * T.int64(4)" in func.script() for _, func in scheduled.functions_items()
                   if isinstance(func, tirx.PrimFunc))
    vm = relax.VirtualMachine(compile_cpu(scheduled, TARGET), tvm.cpu())
    for size in (1, 3):
        x = rand(size, TOKENS, 8)
        check(vm["main"](tvm.runtime.tensor(x)).numpy(),
              (x.reshape(-1, 8) @ W).reshape(size, TOKENS, 2, 8).transpose(0, 2, 1, 3))
