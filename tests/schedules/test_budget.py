"""Every kernel compiles in bounded time: schedules over the code-size budget give way to simpler ones.

EfficientNetB0 once never finished compiling: its squeeze-and-excitation kernels asked LLVM for
millions of unrolled statements. These tests build such kernels in miniature.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax, tirx
from tvm.script import tirx as T

from tfcheck.compiler.build.compile import compile_module
from tfcheck.compiler.schedules import apply_default_schedules, budget_fallbacks
from tfcheck.compiler.schedules.apply import OVER_BUDGET_ATTR, RULE_ATTR
from tfcheck.compiler.schedules.budget import CODE_SIZE_BUDGET, code_size

from .test_operators import TARGET, check, module, rand


def _only_kernel(scheduled: tvm.IRModule) -> tirx.PrimFunc:
    kernels = [func for _, func in scheduled.functions_items() if isinstance(func, tirx.PrimFunc)]
    assert len(kernels) == 1, [gvar.name_hint for gvar, _ in scheduled.functions_items()]
    return kernels[0]


def _squeeze_and_excitation(feature_shape: tuple[int, ...], squeezed: int):
    """EfficientNet's gate: a 1x1 convolution of the pooled [1, 1, 1, S] tensor, bias, sigmoid, and
    a multiply that broadcasts the [1, 1, 1, C] gate over the [1, H, W, C] feature map."""
    channels = feature_shape[-1]
    feature, pooled = rand(*feature_shape), rand(1, 1, 1, squeezed)
    w, b = rand(1, 1, squeezed, channels), rand(channels)

    def emit(bb, feature_var, pooled_var):
        gate = bb.emit(relax.op.nn.conv2d(pooled_var, relax.const(w), data_layout="NHWC", kernel_layout="HWIO"))
        gate = bb.emit(relax.op.sigmoid(bb.emit(relax.op.add(gate, relax.const(b)))))
        return relax.op.multiply(feature_var, gate)

    gate = 1 / (1 + np.exp(-(pooled.reshape(1, squeezed) @ w.reshape(squeezed, channels) + b)))
    return module([feature.shape, pooled.shape], emit), (feature, pooled), feature * gate.reshape(1, 1, 1, channels)


def test_a_broadcast_after_a_contraction_is_not_unrolled_into_its_epilogue() -> None:
    """The gate is the kernel's epilogue; the broadcast multiply over 56x56x32 is not: unrolled
    under the 1x32 register tile it made 6272 copies of the sigmoid (about 2.7M TIR nodes)."""
    mod, inputs, expected = _squeeze_and_excitation((1, 56, 56, 32), 8)
    scheduled = apply_default_schedules(mod, TARGET)
    kernel = _only_kernel(scheduled)
    assert str(kernel.attrs[RULE_ATTR]) == "schedule_contraction"
    assert OVER_BUDGET_ATTR not in kernel.attrs
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=TARGET), tvm.cpu())
    check(vm["main"](*[tvm.runtime.tensor(x) for x in inputs]).numpy(), expected)


def _exploding_epilogue(levels: int):
    """A matmul whose epilogue is ``y = y * y + y`` ``levels`` times: inlined into one expression,
    each level triples it (3^levels nodes per element), and the register tile copies that out."""
    x, w = rand(8, 16) * 0.1, rand(16, 32) * 0.1

    def emit(bb, x_var):
        y = bb.emit(relax.op.matmul(x_var, relax.const(w)))
        for _ in range(levels):
            y = bb.emit(relax.op.add(bb.emit(relax.op.multiply(y, y)), y))
        return y

    expected = x @ w
    for _ in range(levels):
        expected = expected * expected + expected
    return module([x.shape], emit), x, expected


def test_a_kernel_over_the_budget_falls_back_and_is_named_in_the_build_report() -> None:
    mod, x, expected = _exploding_epilogue(levels=8)
    compiled = compile_module(mod, TARGET, "cpu", None)
    [fallback] = compiled.budget_fallbacks
    assert fallback.kernel.startswith("fused_matmul")
    assert fallback.schedule == "schedule_fallback"
    [refused] = fallback.refused
    assert refused.rule == "schedule_contraction" and refused.code_size > fallback.budget == CODE_SIZE_BUDGET
    check(relax.VirtualMachine(compiled.executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy(), expected)


def test_kernels_within_the_budget_are_not_reported() -> None:
    mod, _, _ = _exploding_epilogue(levels=2)
    assert budget_fallbacks(apply_default_schedules(mod, TARGET)) == []


@T.prim_func(s_tir=True)
def _scale(a: T.Buffer((64, 64), "float32"), b: T.Buffer((64, 64), "float32")) -> None:
    for i, j in T.grid(64, 64):
        with T.sblock("scale"):
            vi, vj = T.axis.remap("SS", [i, j])
            b[vi, vj] = a[vi, vj] * T.float32(2.0)


def test_the_estimate_copies_unrolled_loops_and_counts_vectors_once_per_native_vector() -> None:
    sch = tvm.s_tir.Schedule(_scale)
    rows, cols = sch.get_loops(sch.get_sblock("scale"))
    plain = code_size(sch.mod["main"], lanes=16)
    sch.vectorize(cols)
    vectorised = code_size(sch.mod["main"], lanes=16)
    sch.unroll(rows)
    unrolled = code_size(sch.mod["main"], lanes=16)
    assert plain < vectorised < 5 * plain  # 64 columns: 4 native vectors
    assert 60 * vectorised < unrolled < 70 * vectorised  # 64 rows copied out
