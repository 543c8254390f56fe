"""An expansion (1x1 convolution + bias + ReLU6) and the depthwise convolution that reads it, merged
into one kernel computed band by band (`expansion_depthwise.py`), against NumPy on the host's
target and on AVX2; which pairs are merged, and which are left as two kernels, for AVX-512 and AVX2
targets whatever the host.

Shapes are MobileNetV2's blocks scaled down (its stride-2 blocks after ``ZeroPadding2D((0, 1),
(0, 1))``, its stride-1 blocks with 'same' padding), plus 'same' padding at stride 2.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tvm
from tvm import relax, tirx
from tvm.script import ir as I, relax as R, tirx as T

from tfcheck.compiler.schedules import apply_default_schedules
from tfcheck.compiler.schedules.rules import expansion_depthwise as fusion
from tfcheck.compiler.schedules.apply import RULE_ATTR

from ..isa import host_target, named_target, skip_unless_runnable
from . import reference
from .test_operators import check, module, rand, run

# The host's own target, and AVX-512 and AVX2 whatever the host; two cores each.
TARGETS = {"host": None, "avx512": "znver4", "avx2": "znver3"}
FUSED = ["schedule_expansion_depthwise"]
APART = ["schedule_contraction", "schedule_depthwise"]


def block(size: int, channels: int, expanded: int, stride: int, pads: tuple[int, int, int, int],
          also_return_expansion: bool = False, batch: int | tirx.Var = 1, window: int = 3,
          swish: bool = False) -> tuple[tvm.IRModule, np.ndarray, Any]:
    """Expansion + bias + ReLU6, then depthwise ``window`` x ``window`` + bias + ReLU6 as the
    importer writes them (with ``swish``, EfficientNet's ``x * sigmoid(x)`` for each ReLU6); the
    module, its input and NumPy's output (the expansion's output too, when returned). A symbolic
    ``batch`` gets an input of 2."""
    rows = batch if isinstance(batch, int) else 2
    x, w1, b1 = rand(rows, size, size, channels), rand(1, 1, channels, expanded), rand(expanded)
    wd, bd = rand(window, window, expanded), rand(expanded)

    def activation(y: relax.Expr) -> relax.Expr:
        return relax.op.multiply(y, relax.op.sigmoid(y)) if swish else relax.op.clip(y, 0.0, 6.0)

    def emit(bb, x_var):
        y = bb.emit(relax.op.nn.conv2d(x_var, relax.const(w1), data_layout="NHWC", kernel_layout="HWIO"))
        y = bb.emit(relax.op.add(y, relax.const(b1)))
        y = bb.emit(activation(y))
        d = bb.emit(relax.op.nn.conv2d(y, relax.const(wd.reshape(window, window, expanded, 1)), (stride, stride),
                                       pads, 1, groups=expanded, data_layout="NHWC", kernel_layout="HWOI"))
        d = activation(bb.emit(relax.op.add(d, relax.const(bd))))
        return relax.Tuple([d, y]) if also_return_expansion else d

    def numpy_activation(y: np.ndarray) -> np.ndarray:
        return y / (1 + np.exp(-y)) if swish else np.clip(y, 0, 6)

    e = numpy_activation((x.reshape(-1, channels) @ w1.reshape(channels, expanded) + b1)
                         .reshape(rows, size, size, expanded))
    d = numpy_activation(reference.depthwise_nhwc(e, wd[..., None], (stride, stride), pads, (1, 1)) + bd)
    return module([(batch, size, size, channels)], emit), x, (d, e) if also_return_expansion else d


def target_for(name: str) -> tvm.target.Target:
    mcpu = TARGETS[name]
    return host_target(**{"num-cores": 2}) if mcpu is None else named_target(mcpu)


def rules_for(mod: tvm.IRModule, target: tvm.target.Target) -> list[str]:
    """The rules that schedule the functions of ``mod`` for ``target`` (nothing compiled)."""
    scheduled = apply_default_schedules(mod, target)
    return sorted(str(f.attrs[RULE_ATTR]) for _, f in scheduled.functions_items()
                  if isinstance(f, tirx.PrimFunc) and f.attrs and RULE_ATTR in f.attrs)


@pytest.mark.parametrize("target_name", ["avx2", "host"])
@pytest.mark.parametrize(("size", "channels", "expanded", "stride", "pads"), [
    (32, 8, 32, 2, (0, 0, 1, 1)),  # MobileNetV2's stride-2 block: bands of 4 rows read 9
    (56, 24, 144, 1, (1, 1, 1, 1)),  # its 56x56 stride-1 block: 1.5x recompute, 1.8 MB expanded
    (24, 8, 24, 2, (1, 1, 1, 1)),  # 'same' at stride 2: a band reads the row above it; 24 = 8-wide vectors
    (28, 16, 48, 2, (0, 0, 1, 1)),  # 14 output rows: bands of 2
])
def test_fused_block_matches_numpy(size, channels, expanded, stride, pads, target_name: str) -> None:
    mod, x, expected = block(size, channels, expanded, stride, pads)
    actual, rules = run(mod, x, target=target_for(target_name))
    check(actual, expected)
    assert rules == FUSED


def test_efficientnet_block_with_swish_and_a_5x5_window() -> None:
    """EfficientNet's MBConv: swish after both convolutions, a 5x5 stride-2 window ('same'): bands
    of 4 rows read 11 (1.375x), fused since the expanded tensor is 1 MiB."""
    mod, x, expected = block(64, 16, 64, 2, (1, 1, 2, 2), window=5, swish=True)
    actual, rules = run(mod, x, target=target_for("host"))
    check(actual, expected)
    assert rules == FUSED


@pytest.mark.parametrize("target_name", ["avx512", "avx2"])
@pytest.mark.parametrize(("size", "channels", "expanded", "stride", "pads", "avx2"), [
    (28, 32, 192, 1, (1, 1, 1, 1), APART),  # 1.5x recompute of a 600 KB tensor: slower fused
    (14, 16, 96, 2, (0, 0, 1, 1), APART),  # 7 output rows: bands of 1 row, 1.5x recompute
    # AVX-512: 13 channels padded to 16 and cropped, not a shape the rule knows. AVX2: 13 channels
    # are more than one 8-wide vector and too few to pad (`channel_padding.padded_channels`): fused.
    (30, 5, 13, 2, (0, 0, 1, 1), FUSED),
])
def test_pairs_not_worth_fusing_stay_two_kernels(size, channels, expanded, stride, pads, avx2, target_name) -> None:
    """Decided for the target named, whatever the host; run where this CPU can run its code."""
    mod, x, expected = block(size, channels, expanded, stride, pads)
    target = target_for(target_name)
    assert rules_for(mod, target) == (APART if target_name == "avx512" else avx2)
    skip_unless_runnable(target)
    check(run(mod, x, target=target)[0], expected)


def test_an_expansion_read_elsewhere_too_stays_a_kernel() -> None:
    mod, x, (expected, expansion) = block(32, 8, 32, 2, (0, 0, 1, 1), also_return_expansion=True)
    actual, actual_expansion = run_apart(mod, x)
    check(actual.numpy(), expected)
    check(actual_expansion.numpy(), expansion)


def test_a_batch_of_any_size_stays_two_kernels() -> None:
    mod, x, expected = block(32, 8, 32, 2, (0, 0, 1, 1), batch=tirx.Var("batch", "int64"))
    check(run_apart(mod, x).numpy(), expected)


def run_apart(mod: tvm.IRModule, x: np.ndarray) -> Any:
    """Schedule, compile and run ``mod``, checking it kept the expansion a kernel of its own."""
    target = target_for("host")
    scheduled = apply_default_schedules(mod, target)
    rules = sorted(str(f.attrs[RULE_ATTR]) for _, f in scheduled.functions_items()
                   if isinstance(f, tirx.PrimFunc) and f.attrs and RULE_ATTR in f.attrs)
    assert rules == APART
    return relax.VirtualMachine(tvm.compile(scheduled, target=target), tvm.cpu())["main"](tvm.runtime.tensor(x))


@I.ir_module
class HandWritten:
    """Two calls of a kernel whose outer block is not TVM's "root", as TOPI's hand-written kernels
    are (non-max suppression's ``get_valid_counts``: the coverage sweep's CI sample)."""

    @T.prim_func(private=True, s_tir=True)
    def copy(a: T.Buffer((T.int64(4),), "float32"), b: T.Buffer((T.int64(4),), "float32")):
        with T.sblock("hand_written"):
            T.reads()
            T.writes()
            for i in range(T.int64(4)):
                b[i] = a[i]

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = HandWritten
        with R.dataflow():
            y = R.call_tir(cls.copy, (x,), out_ty=R.Tensor((4,), "float32"))
            z = R.call_tir(cls.copy, (y,), out_ty=R.Tensor((4,), "float32"))
            R.output(z)
        return z


def test_kernels_the_analysis_cannot_read_are_left_alone() -> None:
    assert fusion.fuse_expansions_into_depthwise(HandWritten, target_for("host")).same_as(HandWritten)


@pytest.mark.parametrize(("out_rows", "stride", "rows", "recompute"), [
    (56, 2, 4, 9 / 8),  # MobileNetV2's 112x112x96 and 56x56x144 stride-2 blocks
    (56, 1, 4, 6 / 4),  # its 56x56x144 stride-1 block
    (14, 2, 2, 5 / 4),  # its 28x28x192 stride-2 block
    (14, 1, 2, 4 / 2),
    (7, 1, 1, 3.0),  # 7x7x960: one row a band
])
def test_bands_and_their_recompute(out_rows: int, stride: int, rows: int, recompute: float) -> None:
    bands = fusion.plan_bands(out_rows, 3, stride, cores=2)
    assert (bands.rows, bands.recompute) == (rows, pytest.approx(recompute))


def test_which_bands_are_worth_fusing() -> None:
    small, large = 600 * 1024, 1800 * 1024
    assert fusion.worth_fusing(fusion.Bands(4, 1.125), small)
    assert fusion.worth_fusing(fusion.Bands(2, 1.25), small)
    assert not fusion.worth_fusing(fusion.Bands(4, 1.5), small)
    assert fusion.worth_fusing(fusion.Bands(4, 1.5), large)
    assert not fusion.worth_fusing(fusion.Bands(2, 2.0), large)
