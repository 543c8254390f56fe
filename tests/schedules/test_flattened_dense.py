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


def test_a_reshape_that_does_not_restore_the_leading_axes_stays() -> None:
    """Rows regrouped (2 x 3 flattened, 3 x 2 after): not the same values as a batched matmul."""
    mod = dense_then_step((2, 3, 8), [6, 8], [3, 2, 16])
    assert unflatten_dense_layers(mod)["main"].script() == mod["main"].script()
    scheduled = apply_default_schedules(mod, TARGET)
    x = rand(2, 3, 8)
    vm = relax.VirtualMachine(compile_cpu(scheduled, TARGET), tvm.cpu())
    check(vm["main"](tvm.runtime.tensor(x)).numpy(), expected(x, (3, 2, 16)))
