"""A convolution whose window runs along the width alone (1xk) takes its register rows over the height (issue 39).

InceptionV3's 1x7 convolutions over its 17x17 maps ('same': 3 columns of zeros each side, read in
place as a bound check) were tiled over their width like every other convolution: the check then
differed from row to row and step to step of the window, a branch per row in every step of the
reduction, and with AVX2's 16 registers LLVM spilled accumulators around them. They ran at half the
rate of the 7x1 ones (17x17x192 -> 192 on one core, AVX2: 2.6-2.9 against 1.4-1.5 ms). With the
rows over the height the check is the same for every row of a tile, and `channel_padding` pads the
height (17 -> 18, for tiles of several rows) instead of the width. These tests read the tile from
the scheduled TIR for an AVX2 and an AVX-512 target, whatever the host, and check the numbers on
this machine.
"""

from __future__ import annotations

import pytest
import tvm
from tvm import relax, s_tir, tirx

from tfcheck.compiler.schedules import blocks, legalize_and_fuse, schedule_module
from tfcheck.compiler.schedules.apply import RULE_ATTR

from ..isa import host_target, named_target
from .test_operators import check, conv_case, run

# The direct convolution's rows: these windows take Winograd's form where it applies.
pytestmark = pytest.mark.usefixtures("direct_convolutions")

# (input NHWC, kernel HW, output channels, strides, pads (top, left, bottom, right))
ONE_BY_SEVEN = ((1, 17, 17, 24), (1, 7), 32, (1, 1), (0, 3, 0, 3))  # InceptionV3's mixed6 1x7, 'same'


def _update_block(mod: tvm.IRModule, target: tvm.target.Target) -> tuple[s_tir.Schedule, s_tir.schedule.SBlockRV]:
    """The scheduled convolution and its update block."""
    scheduled = schedule_module(legalize_and_fuse(mod, target), target)
    [kernel] = [func for _, func in scheduled.functions_items()
                if isinstance(func, tirx.PrimFunc) and func.attrs.get(RULE_ATTR) == "schedule_contraction"]
    sch = s_tir.Schedule(kernel)
    return sch, sch.get_sblock("conv2d_nhwc_update")


def rows_axis(mod: tvm.IRModule, target: tvm.target.Target) -> tuple[str, tuple[int, ...]]:
    """The output axis the register tile's unrolled rows run over ("yy" the height, "xx" the width)
    and the shape of the accumulator."""
    sch, update = _update_block(mod, target)
    unrolled = [sch.get(loop).loop_var.name for loop in sch.get_loops(update)
                if sch.get(loop).kind == tirx.ForKind.UNROLLED]
    [written] = sch.get(update).writes
    return unrolled[0].split("_")[0], tuple(int(d) for d in written.source.shape)


@pytest.mark.parametrize("mcpu", ["znver3", "skylake-avx512"])
def test_a_one_by_seven_convolution_takes_its_rows_over_the_height(mcpu: str) -> None:
    mod, _x, _expected = conv_case(*ONE_BY_SEVEN, (1, 1))
    axis, accumulator = rows_axis(mod, named_target(mcpu))
    assert axis == "yy"
    assert accumulator == (1, 18, 17, 32)  # the height padded for tiles of several rows, not the width


@pytest.mark.usefixtures("direct_convolutions")
@pytest.mark.parametrize(("kernel", "pads"), [((7, 1), (3, 0, 3, 0)), ((3, 3), (1, 1, 1, 1)), ((1, 1), (0, 0, 0, 0))])
def test_other_windows_keep_their_rows_over_the_width(kernel: tuple[int, int], pads: tuple[int, ...]) -> None:
    """A 7x1 window runs along the height, a 3x3 along both: the width stays the rows (padded to 18)."""
    mod, _x, _expected = conv_case((1, 17, 17, 24), kernel, 32, (1, 1), pads, (1, 1))
    axis, accumulator = rows_axis(mod, named_target("znver3"))
    assert (axis, accumulator) == ("xx", (1, 17, 18, 32))


def test_the_window_is_read_from_the_legalised_block() -> None:
    """`blocks.windowed`: the width's iterator, indexed with the window's 7 steps; not the height's,
    whose window is one step."""
    mod, _x, _expected = conv_case(*ONE_BY_SEVEN, (1, 1))
    fused = legalize_and_fuse(mod, named_target("znver3"))
    [func] = [f for _, f in fused.functions_items() if isinstance(f, tirx.PrimFunc) and "conv2d" in str(f)]
    sch = s_tir.Schedule(func)
    names = [var.name for var in blocks.windowed(sch.get(sch.get_sblock("conv2d_nhwc")))]
    assert names == ["v_xx"]


@pytest.mark.parametrize(("shape", "kernel", "out", "strides", "pads"), [
    ONE_BY_SEVEN,
    ((2, 11, 13, 16), (1, 5), 24, (1, 1), (0, 2, 0, 2)),  # batch 2, a prime height (computed as 12)
    ((1, 16, 16, 8), (1, 3), 20, (2, 2), (0, 0, 0, 1)),  # stride 2, TensorFlow's 'same' on the right only
])
def test_the_rows_over_the_height_compute_the_convolution(shape, kernel, out, strides, pads) -> None:
    mod, x, expected = conv_case(shape, kernel, out, strides, pads, (1, 1))
    actual, rules = run(mod, x, target=host_target())
    assert actual.shape == expected.shape
    check(actual, expected)
    assert rules == ["schedule_contraction"]
