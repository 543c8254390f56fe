"""3x3 stride-1 convolutions as Winograd's F(m x m, 3 x 3) (`rewrites/winograd.py`, issue 39).

The transform matrices are checked exactly (rational arithmetic), the filter transform and the
three-step form against a direct convolution in NumPy, which convolutions the rewrite takes on
named AVX2 and AVX-512 targets (the same on every host), and the compiled kernels against NumPy
on this machine: 'same' and 'valid', outputs that whole tiles do not cover, a batch, channels that
fill no whole vector, and each epilogue the output transform takes in (a bias, a ReLU, a clip).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

from tfcheck.compiler.schedules import apply_default_schedules, legalize_and_fuse
from tfcheck.compiler.schedules.apply import RULE_ATTR, kernel_table
from tfcheck.compiler.schedules.rewrites import winograd

from ..isa import host_target, named_target
from . import reference
from .test_operators import check, module, rand, run

TRANSFORMS = [winograd.F2, winograd.F4]
# The targets whose decisions are checked without running: AVX2 (8 lanes) and AVX-512 (16).
NAMED = ["znver3", "znver5"]


def _product(rows, columns):
    return [[sum((a * b for a, b in zip(row, column)), Fraction(0)) for column in zip(*columns)] for row in rows]


@pytest.mark.parametrize("transform", TRANSFORMS, ids=lambda t: f"F{t.m}")
def test_matrices_give_the_correlation_exactly(transform: winograd.Transform) -> None:
    rng = np.random.default_rng(1)
    d = [Fraction(int(v)) for v in rng.integers(-9, 10, transform.alpha)]
    g = [Fraction(int(v)) for v in rng.integers(-9, 10, 3)]
    filtered = [sum((row_g * gi for row_g, gi in zip(row, g)), Fraction(0)) for row in transform.g]
    data = [sum((row_b * di for row_b, di in zip(row, d)), Fraction(0)) for row in transform.bt]
    products = [[u * v] for u, v in zip(filtered, data)]
    outputs = [value[0] for value in _product(transform.at, products)]
    assert outputs == [sum(d[i + k] * g[k] for k in range(3)) for i in range(transform.m)]


def winograd_numpy(x: np.ndarray, kernel: np.ndarray, transform: winograd.Transform) -> np.ndarray:
    """A 'valid' convolution in the three steps, in float64, for whole tiles of the output."""
    m, alpha = transform.m, transform.alpha
    bt, at = (np.array(matrix, dtype=np.float64) for matrix in (transform.bt, transform.at))
    u = winograd.filter_transform(kernel, transform).astype(np.float64).reshape(alpha, alpha, *kernel.shape[2:])
    n, h, w, _ = x.shape
    rows, cols = (h - 2) // m, (w - 2) // m
    out = np.zeros((n, rows * m, cols * m, kernel.shape[3]))
    for b, ty, tx in itertools.product(range(n), range(rows), range(cols)):
        d = x[b, ty * m:ty * m + alpha, tx * m:tx * m + alpha].astype(np.float64)
        v = np.einsum("ai,ijc,bj->abc", bt, d, bt)
        product = np.einsum("abc,abck->abk", v, u)
        out[b, ty * m:(ty + 1) * m, tx * m:(tx + 1) * m] = np.einsum("ia,abk,jb->ijk", at, product, at)
    return out


@pytest.mark.parametrize("transform", TRANSFORMS, ids=lambda t: f"F{t.m}")
def test_filter_transform_and_steps_match_a_direct_convolution(transform: winograd.Transform) -> None:
    """In float64 but for the transformed filters, rounded to float32: within float32's rounding."""
    rng = np.random.default_rng(2)
    x, kernel = rng.standard_normal((2, 14, 10, 5)), rng.standard_normal((3, 3, 5, 7)).astype(np.float32)
    got = winograd_numpy(x, kernel, transform)
    expected = reference.conv2d_nhwc(x, kernel.astype(np.float64), (1, 1), (0, 0, 0, 0), (1, 1))
    expected = expected[:, :got.shape[1], :got.shape[2]]
    assert np.abs(got - expected).max() <= 1e-6 * np.abs(expected).max()


def test_the_transform_follows_the_tiles() -> None:
    """F(4x4) with `MIN_TILES` of its tiles, else F(2x2) with as many of its own, else direct."""
    assert winograd.choose_transform(1, 14, 14) is winograd.F4  # 16 tiles of 4x4
    assert winograd.choose_transform(1, 7, 7) is winograd.F2  # 4 of 4x4, 16 of 2x2
    assert winograd.choose_transform(4, 7, 7) is winograd.F4  # a batch of 4 shares the weights too
    assert winograd.choose_transform(1, 4, 4) is None


def conv_module(shape, out, pads, *, strides=(1, 1), dilation=(1, 1), epilogue="relu", kernel=(3, 3),
                constant=True) -> tuple[tvm.IRModule, np.ndarray, np.ndarray]:
    """A conv2d with an epilogue ("relu": bias and ReLU, "relu6": bias and clip, "bias", "none"),
    an input, and NumPy's output."""
    x, w, b = rand(*shape), rand(*kernel, shape[-1], out), rand(out)

    def emit(bb, x_var, *rest):
        weight = relax.const(w) if constant else rest[0]
        y = bb.emit(relax.op.nn.conv2d(x_var, weight, strides, pads, dilation, data_layout="NHWC",
                                       kernel_layout="HWIO"))
        if epilogue == "none":
            return y
        y = bb.emit(relax.op.add(y, relax.const(b)))
        return {"bias": y, "relu": relax.op.nn.relu(y), "relu6": relax.op.clip(y, 0.0, 6.0)}[epilogue]

    direct = reference.conv2d_nhwc(x, w, strides, pads, dilation)
    expected = {"none": direct, "bias": direct + b, "relu": np.maximum(direct + b, 0),
                "relu6": np.clip(direct + b, 0, 6)}[epilogue]
    shapes = [shape] if constant else [shape, w.shape]
    return module(shapes, emit), x, expected


def winograd_kernels(mod: tvm.IRModule, target: tvm.target.Target) -> list[str]:
    """The names of the Winograd kernels the legalised module calls."""
    fused = legalize_and_fuse(mod, target)
    return sorted(gvar.name_hint.rstrip("0123456789") for gvar, func in fused.functions_items()
                  if isinstance(func, tirx.PrimFunc) and func.attrs.get(RULE_ATTR) == winograd.RULE)


@pytest.mark.parametrize("mcpu", NAMED)
def test_a_3x3_stride_1_convolution_becomes_winograd_on_every_target(mcpu: str) -> None:
    mod, _x, _expected = conv_module((1, 28, 28, 32), 64, (1, 1, 1, 1))
    assert winograd_kernels(mod, named_target(mcpu)) == ["winograd_input", "winograd_output"]


@pytest.mark.parametrize("mcpu", NAMED)
@pytest.mark.parametrize("case", [
    dict(strides=(2, 2)), dict(dilation=(2, 2)), dict(kernel=(1, 1)), dict(kernel=(5, 5)),
    dict(constant=False), dict(shape=(1, 28, 28, 8)), dict(out=8), dict(shape=(1, 6, 6, 32)),
], ids=["stride-2", "dilated", "1x1", "5x5", "weights-an-input", "8-inputs", "8-outputs", "4x4-output"])
def test_what_winograd_does_not_take_stays_direct(case: dict, mcpu: str) -> None:
    case = dict(case)  # the parameter is shared between the targets
    shape, out = case.pop("shape", (1, 28, 28, 32)), case.pop("out", 64)
    mod, _x, _expected = conv_module(shape, out, (1, 1, 1, 1), **case)
    assert winograd_kernels(mod, named_target(mcpu)) == []


# (input NHWC, output channels, pads (top, left, bottom, right)): outputs of whole tiles and not,
# F(4x4) and F(2x2), a batch, 20 channels (4-wide vectors), 'valid' and TensorFlow's odd 'same'.
CASES = [
    ((1, 16, 16, 16), 32, (1, 1, 1, 1)),  # 16x16 out: 16 tiles of F(4x4)
    ((1, 17, 19, 24), 16, (0, 0, 0, 0)),  # 15x17: F(2x2), a partial tile down and across
    ((2, 9, 9, 20), 20, (1, 1, 1, 1)),  # a batch of 2, 9x9: F(4x4) over 18 tiles
    ((1, 23, 18, 16), 48, (0, 0, 1, 1)),  # padding on one side only
]


@pytest.mark.parametrize("epilogue", ["relu", "relu6", "bias", "none"])
@pytest.mark.parametrize(("shape", "out", "pads"), CASES)
def test_winograd_kernels_match_numpy(shape, out, pads, epilogue: str) -> None:
    mod, x, expected = conv_module(shape, out, pads, epilogue=epilogue)
    actual, rules = run(mod, x, target=host_target())
    check(actual, expected)
    assert rules.count(winograd.RULE) == 2 and "schedule_contraction" in rules


def test_the_epilogue_runs_in_the_output_transform() -> None:
    """Bias and ReLU add no kernel of their own: the pad, the input transform, the matmul, the
    output transform."""
    mod, _x, _expected = conv_module((1, 30, 30, 32), 64, (1, 1, 1, 1))
    scheduled = apply_default_schedules(mod, named_target("znver3"))
    kernels = [func for _, func in scheduled.functions_items() if isinstance(func, tirx.PrimFunc)]
    assert sorted(str(func.attrs.get(RULE_ATTR)) for func in kernels) == [
        "schedule_contraction", "schedule_fallback", winograd.RULE, winograd.RULE]
    rules = {entry["kernel"].rstrip("0123456789"): entry["rule"] for entry in kernel_table(scheduled)}
    assert rules["winograd_input"] == rules["winograd_output"] == winograd.RULE
