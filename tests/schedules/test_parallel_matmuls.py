"""compiler/schedules/rewrites/parallel_matmuls.py: matmuls of one input by constant weights as one.

The case is an attention's projections as the importer writes Keras' MultiHeadAttention (the
encoder block of benchmarks/compiled/small_models.py): the same tokens times three transposed
constant weights. Combined, they are one matmul kernel, and each result is a slice that the step
reading it takes in (no `split` kernel).
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

from tfcheck.compiler.schedules import apply_default_schedules, compile_cpu
from tfcheck.compiler.schedules.rewrites.parallel_matmuls import _split_results_as_slices, combine_parallel_matmuls

from .test_operators import TARGET, check, module, rand, run

X = rand(1, 16, 32)
WEIGHTS = [rand(24, 32) for _ in range(3)]  # [out, in], as TFLite stores a fully connected layer's


def kernels(mod) -> list[str]:
    scheduled = apply_default_schedules(mod, TARGET)
    return sorted(gv.name_hint for gv, func in scheduled.functions_items() if isinstance(func, tirx.PrimFunc))


def projections(bb: relax.BlockBuilder, x: relax.Expr, *weights: relax.Expr) -> relax.Expr:
    """q, k, v = x @ w.T for each weight; tanh(q) + k * v, so that each result has a reader."""
    q, k, v = (bb.emit(relax.op.matmul(x, bb.emit(relax.op.permute_dims(w, [1, 0])))) for w in weights)
    return relax.op.add(bb.emit(relax.op.tanh(q)), bb.emit(relax.op.multiply(k, v)))


def expected(x: np.ndarray, weights: list[np.ndarray]) -> np.ndarray:
    q, k, v = (x @ w.T for w in weights)
    return np.tanh(q) + k * v


def test_projections_by_constant_weights_are_one_matmul() -> None:
    mod = module([X.shape], lambda bb, x: projections(bb, x, *(relax.const(w) for w in WEIGHTS)))
    names = kernels(mod)
    assert sum("matmul" in name for name in names) == 1 and not any("split" in name for name in names), names
    actual, _ = run(mod, X)
    check(actual, expected(X, WEIGHTS))


def test_weights_computed_at_run_time_are_not_combined() -> None:
    """Concatenating tensors of the call would copy them on every call: each matmul stays."""
    mod = module([X.shape] + [w.shape for w in WEIGHTS], projections)
    assert sum("matmul" in name for name in kernels(mod)) == 3
    actual, _ = run(mod, X, *WEIGHTS)
    check(actual, expected(X, WEIGHTS))


def test_a_constant_input_leaves_the_module_as_it_is() -> None:
    """TVM's pass fails on a group whose input is a constant (an unrolled GRU's zero initial state
    times its weights, from the coverage sweep): the module is built uncombined, and right."""
    state = rand(1, 32)

    def emit(bb: relax.BlockBuilder, x: relax.Expr) -> relax.Expr:
        first = projections(bb, relax.const(state), *(relax.const(w) for w in WEIGHTS))
        return relax.op.add(bb.emit(first), projections(bb, x, *(relax.const(w) for w in WEIGHTS)))

    mod = module([X.shape], emit)
    assert combine_parallel_matmuls(mod).same_as(mod)
    actual, _ = run(mod, X)
    check(actual, expected(state, WEIGHTS) + expected(X, WEIGHTS))


@pytest.mark.parametrize("sections", [3, [8, 20]], ids=["equal sections", "indices"])
def test_each_result_of_a_split_is_a_slice(sections) -> None:
    x = rand(4, 24, 5)

    def emit(bb: relax.BlockBuilder, value: relax.Expr) -> relax.Expr:
        parts = bb.emit(relax.op.split(value, sections, axis=1))
        return relax.op.concat([bb.emit(relax.TupleGetItem(parts, index)) * relax.const(np.float32(index + 1))
                                for index in range(3)], axis=1)

    rewritten = _split_results_as_slices(module([x.shape], emit))
    script = rewritten["main"].script()
    assert "R.split" not in script and script.count("R.strided_slice") == 3
    actual, _ = run(rewritten, x)
    parts = np.split(x, sections, axis=1)
    check(actual, np.concatenate([part * (index + 1) for index, part in enumerate(parts)], axis=1))


def test_projections_over_a_sequence_of_any_length_are_one_matmul_and_slices() -> None:
    """The split's axis (the projections' columns) has a known extent; the tokens need not: each
    result is still a slice (a `split` kernel before), fused into the step that reads it."""
    length = tirx.Var("n", "int64")
    mod = module([(1, length, 32)], lambda bb, x: projections(bb, x, *(relax.const(w) for w in WEIGHTS)))
    names = kernels(mod)
    assert sum("matmul" in name for name in names) == 1 and not any("split" in name for name in names), names
    vm = relax.VirtualMachine(compile_cpu(apply_default_schedules(mod, TARGET), TARGET), tvm.cpu())
    for tokens in (1, 9):
        x = rand(1, tokens, 32)
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), expected(x, WEIGHTS))


def test_biases_computed_at_run_time_are_not_combined() -> None:
    """Two directions of a recurrent layer unrolled in TensorFlow (a Keras Bidirectional LSTM over
    an unknown batch, issue 42): step t forwards and step T-1-t backwards multiply the same input
    slice, each plus its own direction's previous state. Combined with those sums, the two groups
    would each need the other's result: TVM's pass raised "Bindings contain circular dependency"."""
    weights = {name: rand(24, 32) for name in ("forward", "backward")}
    x0, x1, state = rand(1, 32), rand(1, 32), rand(1, 24)

    def step(bb: relax.BlockBuilder, x: relax.Expr, name: str, previous: relax.Expr) -> relax.Expr:
        weight = bb.emit(relax.op.permute_dims(relax.const(weights[name]), [1, 0]))
        return bb.emit(relax.op.tanh(bb.emit(relax.op.add(bb.emit(relax.op.matmul(x, weight)), previous))))

    def emit(bb: relax.BlockBuilder, first: relax.Expr, second: relax.Expr, initial: relax.Expr) -> relax.Expr:
        forward = step(bb, second, "forward", step(bb, first, "forward", initial))
        backward = step(bb, first, "backward", step(bb, second, "backward", initial))
        return relax.op.concat([forward, backward], axis=1)

    def expected_step(x: np.ndarray, name: str, previous: np.ndarray) -> np.ndarray:
        return np.tanh(x @ weights[name].T + previous)

    mod = module([x0.shape, x1.shape, state.shape], emit)
    combine_parallel_matmuls(mod)  # raised before
    actual, _ = run(mod, x0, x1, state)
    check(actual, np.concatenate([expected_step(x1, "forward", expected_step(x0, "forward", state)),
                                  expected_step(x0, "backward", expected_step(x1, "backward", state))], axis=1))
