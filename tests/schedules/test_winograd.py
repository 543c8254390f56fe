"""Stride-1 convolutions as Winograd's F(m, r) along each axis (`rewrites/winograd.py`, issue 39).

The transform matrices are checked exactly (rational arithmetic), the filter transform and the
three-step form against a direct convolution in NumPy, which convolutions the rewrite takes on
named AVX2 and AVX-512 targets (the same on every host), and the compiled kernels against NumPy
on this machine: 3x3, 5x5, 1x7, 7x1 and 1x3 windows, 'same' and 'valid', outputs that whole tiles
do not cover, a batch, channels that fill no whole vector, and each epilogue the output transform
takes in (a bias, a ReLU, a clip).
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

TRANSFORMS = [winograd.F2, winograd.F4, winograd.F2_5, winograd.F2_7, winograd.IDENTITY]
# The targets whose decisions are checked without running: AVX2 (8 lanes) and AVX-512 (16).
NAMED = ["znver3", "znver5"]


def _product(rows, columns):
    return [[sum((a * b for a, b in zip(row, column)), Fraction(0)) for column in zip(*columns)] for row in rows]


@pytest.mark.parametrize("transform", TRANSFORMS, ids=lambda t: f"F({t.m},{t.r})")
def test_matrices_give_the_correlation_exactly(transform: winograd.Transform) -> None:
    rng = np.random.default_rng(1)
    d = [Fraction(int(v)) for v in rng.integers(-9, 10, transform.alpha)]
    g = [Fraction(int(v)) for v in rng.integers(-9, 10, transform.r)]
    filtered = [sum((row_g * gi for row_g, gi in zip(row, g)), Fraction(0)) for row in transform.g]
    data = [sum((row_b * di for row_b, di in zip(row, d)), Fraction(0)) for row in transform.bt]
    products = [[u * v] for u, v in zip(filtered, data)]
    outputs = [value[0] for value in _product(transform.at, products)]
    assert outputs == [sum(d[i + k] * g[k] for k in range(transform.r)) for i in range(transform.m)]


def test_f4_is_lavin_and_grays() -> None:
    """The generated F(4, 3) is the published one (Lavin and Gray, 2016)."""
    assert [[int(v) for v in row] for row in winograd.F4.bt] == [
        [4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
        [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
    assert [[str(v) for v in row] for row in winograd.F4.g][:2] == [["1/4", "0", "0"], ["-1/6", "-1/6", "-1/6"]]


def test_points_that_give_no_transform_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct points"):
        winograd.cook_toom(2, 3, (0, 1, 1))


def winograd_numpy(x: np.ndarray, kernel: np.ndarray, plan: winograd.Plan) -> np.ndarray:
    """A 'valid' convolution in the three steps, in float64, for whole tiles of the output."""
    down, across = plan.down, plan.across
    bt_h, bt_w, at_h, at_w = (np.array(m, dtype=np.float64) for m in (down.bt, across.bt, down.at, across.at))
    u = winograd.filter_transform(kernel, plan).astype(np.float64).reshape(down.alpha, across.alpha,
                                                                              *kernel.shape[2:])
    n, h, w, _ = x.shape
    rows, cols = (h - down.r + 1) // down.m, (w - across.r + 1) // across.m
    out = np.zeros((n, rows * down.m, cols * across.m, kernel.shape[3]))
    for b, ty, tx in itertools.product(range(n), range(rows), range(cols)):
        d = x[b, ty * down.m:ty * down.m + down.alpha, tx * across.m:tx * across.m + across.alpha].astype(np.float64)
        v = np.einsum("ai,ijc,bj->abc", bt_h, d, bt_w)
        product = np.einsum("abc,abck->abk", v, u)
        tile = np.einsum("ia,abk,jb->ijk", at_h, product, at_w)
        out[b, ty * down.m:(ty + 1) * down.m, tx * across.m:(tx + 1) * across.m] = tile
    return out


@pytest.mark.parametrize("plan", [winograd.Plan(winograd.F2, winograd.F2), winograd.Plan(winograd.F4, winograd.F4),
                                  winograd.Plan(winograd.F2_5, winograd.F2_5),
                                  winograd.Plan(winograd.IDENTITY, winograd.F2_7),
                                  winograd.Plan(winograd.F4, winograd.IDENTITY)],
                         ids=["F2x2", "F4x4", "F(2x2,5x5)", "1x7", "3x1"])
def test_filter_transform_and_steps_match_a_direct_convolution(plan: winograd.Plan) -> None:
    """In float64 but for the transformed filters, rounded to float32: within float32's rounding."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 14, 16, 5))
    kernel = rng.standard_normal((plan.down.r, plan.across.r, 5, 7)).astype(np.float32)
    got = winograd_numpy(x, kernel, plan)
    expected = reference.conv2d_nhwc(x, kernel.astype(np.float64), (1, 1), (0, 0, 0, 0), (1, 1))
    expected = expected[:, :got.shape[1], :got.shape[2]]
    assert np.abs(got - expected).max() <= 1e-6 * np.abs(expected).max()


def test_the_transform_follows_the_tiles() -> None:
    """F(4x4) with `MIN_TILES` of its tiles, else F(2x2) with as many of its own, else direct; a
    window one step long on an axis keeps that axis as it is."""
    f4, f2 = winograd.Plan(winograd.F4, winograd.F4), winograd.Plan(winograd.F2, winograd.F2)
    assert winograd.choose_transform(1, 14, 14) == f4  # 16 tiles of 4x4
    assert winograd.choose_transform(1, 7, 7) == f2  # 4 of 4x4, 16 of 2x2
    assert winograd.choose_transform(4, 7, 7) == f4  # a batch of 4 shares the weights too
    assert winograd.choose_transform(1, 4, 4) is None
    assert winograd.choose_transform(1, 17, 17, (1, 7)) == winograd.Plan(winograd.IDENTITY, winograd.F2_7)
    assert winograd.choose_transform(1, 8, 8, (3, 1)) == winograd.Plan(winograd.F4, winograd.IDENTITY)
    assert winograd.choose_transform(1, 17, 17, (1, 1)) is None
    assert winograd.choose_transform(1, 17, 17, (2, 2)) is None


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
        return {"bias": y, "relu": relax.op.nn.relu(y), "relu6": relax.op.clip(y, 0.0, 6.0),
                "below-6": relax.op.clip(y, -np.inf, 6.0)}[epilogue]

    direct = reference.conv2d_nhwc(x, w, strides, pads, dilation)
    expected = {"none": direct, "bias": direct + b, "relu": np.maximum(direct + b, 0),
                "relu6": np.clip(direct + b, 0, 6), "below-6": np.minimum(direct + b, 6)}[epilogue]
    shapes = [shape] if constant else [shape, w.shape]
    return module(shapes, emit), x, expected


def winograd_kernels(mod: tvm.IRModule, target: tvm.target.Target) -> list[str]:
    """The names of the Winograd kernels the legalised module calls."""
    fused = legalize_and_fuse(mod, target)
    return sorted(gvar.name_hint.rstrip("0123456789") for gvar, func in fused.functions_items()
                  if isinstance(func, tirx.PrimFunc) and func.attrs.get(RULE_ATTR) == winograd.RULE)


@pytest.mark.parametrize("mcpu", NAMED)
@pytest.mark.parametrize("kernel", [(3, 3), (5, 5), (1, 7), (7, 1), (1, 3)])
def test_a_stride_1_convolution_becomes_winograd_on_every_target(kernel: tuple[int, int], mcpu: str) -> None:
    pads = (kernel[0] // 2, kernel[1] // 2, kernel[0] // 2, kernel[1] // 2)
    mod, _x, _expected = conv_module((1, 28, 28, 32), 64, pads, kernel=kernel)
    assert winograd_kernels(mod, named_target(mcpu)) == ["winograd_input", "winograd_output"]


@pytest.mark.parametrize("mcpu", NAMED)
@pytest.mark.parametrize("case", [
    dict(strides=(2, 2)), dict(dilation=(2, 2)), dict(kernel=(1, 1)), dict(kernel=(4, 4)),
    dict(constant=False), dict(shape=(1, 28, 28, 8)), dict(out=8), dict(shape=(1, 6, 6, 32)),
], ids=["stride-2", "dilated", "1x1", "4x4", "weights-an-input", "8-inputs", "8-outputs", "4x4-output"])
def test_what_winograd_does_not_take_stays_direct(case: dict, mcpu: str) -> None:
    case = dict(case)  # the parameter is shared between the targets
    shape, out = case.pop("shape", (1, 28, 28, 32)), case.pop("out", 64)
    mod, _x, _expected = conv_module(shape, out, (1, 1, 1, 1), **case)
    assert winograd_kernels(mod, named_target(mcpu)) == []


# (input NHWC, output channels, pads (top, left, bottom, right)): outputs of whole tiles and not,
# F(4x4) and F(2x2), a batch, 20 channels (4-wide vectors), 'valid' and TensorFlow's odd 'same'.
CASES = [
    ((1, 16, 16, 16), 32, (1, 1, 1, 1), (3, 3)),  # 16x16 out: 16 tiles of F(4x4)
    ((1, 17, 19, 24), 16, (0, 0, 0, 0), (3, 3)),  # 15x17: F(2x2), a partial tile down and across
    ((2, 9, 9, 20), 20, (1, 1, 1, 1), (3, 3)),  # a batch of 2, 9x9: F(4x4) over 18 tiles
    ((1, 23, 18, 16), 48, (0, 0, 1, 1), (3, 3)),  # padding on one side only
    ((1, 17, 17, 24), 32, (0, 3, 0, 3), (1, 7)),  # InceptionV3's 1x7, F(2, 7) across, a partial tile
    ((1, 17, 15, 16), 24, (3, 0, 3, 0), (7, 1)),  # its 7x1
    ((1, 8, 8, 32), 16, (0, 1, 0, 1), (1, 3)),  # its 8x8 maps' 1x3: F(4, 3) across
    ((1, 13, 12, 16), 16, (2, 2, 2, 2), (5, 5)),  # a 5x5 'same': F(2x2, 5x5)
    ((1, 17, 13, 24), 48, (0, 3, 0, 3), (1, 7)),  # 119 tiles computed as 120: a zero row (`padded_free_rows`)
]


@pytest.mark.parametrize("epilogue", ["relu", "relu6", "below-6", "bias", "none"])
@pytest.mark.parametrize(("shape", "out", "pads", "kernel"), CASES)
def test_winograd_kernels_match_numpy(shape, out, pads, kernel, epilogue: str) -> None:
    mod, x, expected = conv_module(shape, out, pads, epilogue=epilogue, kernel=kernel)
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


@pytest.mark.parametrize(("mcpu", "padded"), [("znver3", 154), ("znver5", 153)])
def test_the_matmul_takes_a_row_more_where_its_tile_is_faster(mcpu: str, padded: int) -> None:
    """InceptionV3's 1x7 over 17x17x160: 153 tiles, with AVX2 a 3-row tile of 2 vectors; 154 rows
    take 2 x 5 (0.79 -> 0.63 ms on one Zen 4 core), the extra row written zero by the input transform."""
    mod, _x, _expected = conv_module((1, 17, 17, 160), 160, (0, 3, 0, 3), kernel=(1, 7))
    fused = legalize_and_fuse(mod, named_target(mcpu))
    [rows] = {int(func.params[-1].shape[1]) for gvar, func in fused.functions_items()
              if isinstance(func, tirx.PrimFunc) and gvar.name_hint.startswith("winograd_input")}
    assert rows == padded

def test_a_kernel_that_cannot_be_written_leaves_the_convolution_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before its infinite bounds were skipped, a clip at -inf wrote `T.float32(-inf)`, which TVMScript
    does not parse, and the whole build of the function failed: now any such failure keeps that
    convolution direct and the build goes on."""
    def unwritable(*_args):
        raise ValueError("not parsed")

    monkeypatch.setattr(winograd, "output_kernel", unwritable)
    mod, x, expected = conv_module((1, 16, 16, 16), 32, (1, 1, 1, 1))
    assert winograd_kernels(mod, named_target("znver3")) == []
    actual, rules = run(mod, x, target=host_target())
    check(actual, expected)
    assert winograd.RULE not in rules
