"""Register tiles and cache blocks follow the target's registers and L2, whatever the host (issue 39).

Xception's hot kernel, the 1x1 convolution of 19x19x728 to 728 channels with its bias and ReLU (88%
of the model's time on a Zen 3), scheduled for an AVX2 target (`znver3`: 16 vector registers, 512 KB
of L2 a core) and for AVX-512 ones (32 registers, 1 or 2 MB): each gets the tile and the blocks of
its own CPU, read from the scheduled TIR's loops."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import tvm
from tvm import relax, s_tir, tirx

from tfcheck.compiler.schedules import apply_default_schedules, cpu

from ..isa import named_target, skip_unless_runnable
from . import reference
from .test_operators import check, module, rand


@dataclass(frozen=True)
class Tile:
    """The register tile and cache block of a scheduled 1x1 convolution, from its update block's loops."""

    rows: int  # unrolled rows (`xx`)
    vectors: int  # unrolled vectors of columns (`ff`), one when the vector loop is the only one
    lanes: int  # the vectorised loop
    block: int  # column tiles per cache block: the serial `ff` loop under the parallel one
    strip_bytes: int  # the packed weights one column tile reads

    def registers(self) -> int:
        """Accumulators, weight vectors held across the rows, broadcast inputs (`tiling.register_tile`)."""
        accumulators = self.rows * self.vectors
        return accumulators + (self.vectors if self.rows > 1 else 0) + (self.rows if self.vectors == 1 else 1)


def _hot_convolution(target: tvm.target.Target) -> tuple[tirx.PrimFunc, tvm.IRModule, list]:
    x, w, b = rand(1, 19, 19, 728), rand(1, 1, 728, 728) * 0.05, rand(728)

    def emit(bb: relax.BlockBuilder, x_var: relax.Var) -> relax.Expr:
        y = bb.emit(relax.op.nn.conv2d(x_var, relax.const(w), data_layout="NHWC", kernel_layout="HWIO"))
        return relax.op.nn.relu(bb.emit(relax.op.add(y, relax.const(b))))

    scheduled = apply_default_schedules(module([x.shape], emit), target)
    [kernel] = [f for g, f in scheduled.functions_items() if isinstance(f, tirx.PrimFunc) and "conv2d" in g.name_hint]
    expected = (x.reshape(-1, 728) @ w.reshape(728, 728) + b).clip(min=0).reshape(1, 19, 19, 728)
    return kernel, scheduled, [x, expected]


def _tile(kernel: tirx.PrimFunc) -> Tile:
    sch = s_tir.Schedule(kernel)
    loops = [sch.get(loop) for loop in sch.get_loops(sch.get_sblock("conv2d_nhwc_update"))]
    extents = {loop.loop_var.name: int(loop.extent) for loop in loops}
    unrolled = [loop.loop_var.name for loop in loops if loop.kind == tirx.ForKind.UNROLLED]
    [lanes] = [int(loop.extent) for loop in loops if loop.kind == tirx.ForKind.VECTORIZED]
    blocks = [int(loop.extent) for loop in loops if loop.kind == tirx.ForKind.SERIAL and loop.loop_var.name.startswith("ff")]
    packed = next(p for p in kernel.params if hasattr(p, "shape") and len(p.shape) == 5)
    return Tile(rows=math.prod(extents[n] for n in unrolled if n.startswith("xx")),
                vectors=math.prod(extents[n] for n in unrolled if n.startswith("ff")), lanes=lanes,
                block=blocks[0] if blocks else 1,
                strip_bytes=math.prod(int(d) for d in packed.shape[1:]) * 4)


@pytest.mark.parametrize(("mcpu", "expected"), [
    # AVX2, 16 registers: 5 rows of 2 vectors of 8 over 736 channels (10 accumulators, 2 weights, a
    # broadcast); 2 column tiles a block, 93 KB of weights in half of Zen 3's 512 KB L2
    ("znver3", Tile(rows=5, vectors=2, lanes=8, block=2, strip_bytes=728 * 16 * 4)),
    # AVX-512, 32 registers: the 361 pixels in a row (channel_padding.flat_columns), as 364 in 7
    # rows of 2 vectors of 16; 23 column tiles, 23 x 93 KB do not fit half of a 1 MB or a 2 MB L2,
    # and no other number divides 23: no block
    ("skylake-avx512", Tile(rows=7, vectors=2, lanes=16, block=1, strip_bytes=728 * 32 * 4)),
    ("sapphirerapids", Tile(rows=7, vectors=2, lanes=16, block=1, strip_bytes=728 * 32 * 4)),
])
def test_the_tile_and_the_blocks_fit_the_targets_registers_and_l2(mcpu: str, expected: Tile) -> None:
    target = named_target(mcpu)
    kernel, _, _ = _hot_convolution(target)
    tile = _tile(kernel)
    assert tile == expected, kernel.script()
    described = cpu.describe(target)
    assert tile.registers() <= described.vector_registers
    assert tile.block * tile.strip_bytes <= described.l2_bytes // 2


def test_the_avx2_schedule_computes_the_convolution() -> None:
    target = named_target("znver3")
    skip_unless_runnable(target)
    _, scheduled, (x, expected) = _hot_convolution(target)
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=target), tvm.cpu())
    check(vm["main"](tvm.runtime.tensor(x)).numpy(), expected)


def _convolution_tile(kernel_size: tuple[int, int], pads: tuple[int, int, int, int], out: int) -> Tile:
    """The AVX2 tile of InceptionV3's 8x8x448 -> 384 convolution (or -> `out`) with `kernel_size` and `pads`."""
    x, w = rand(1, 8, 8, 448), rand(*kernel_size, 448, out) * 0.05

    def emit(bb: relax.BlockBuilder, x_var: relax.Var) -> relax.Expr:
        return relax.op.nn.conv2d(x_var, relax.const(w), padding=pads, data_layout="NHWC", kernel_layout="HWIO")

    scheduled = apply_default_schedules(module([x.shape], emit), named_target("znver3"))
    [kernel] = [f for g, f in scheduled.functions_items() if isinstance(f, tirx.PrimFunc) and "conv2d" in g.name_hint]
    return _tile(kernel)


@pytest.mark.usefixtures("direct_convolutions")
@pytest.mark.parametrize(("kernel_size", "pads", "out", "rows", "vectors"), [
    # 'same' over 24 channels out, 216 multiply-adds per input element: read in place, a check on
    # every row's loads; 4 x 3 vectors would fill all 16
    ((3, 3), (1, 1, 1, 1), 24, 2, 3),
    ((3, 3), (1, 1, 1, 1), 384, 4, 3),  # 'same' over 384, 3456 per element: a padded copy, no check
    ((1, 1), (0, 0, 0, 0), 384, 4, 3),  # no window, no check: all 16
    ((3, 3), (0, 0, 0, 0), 384, 6, 2),  # 'valid' (6 columns out): no check
])
def test_a_tile_whose_rows_check_the_padding_leaves_a_register_for_it(kernel_size, pads, out: int, rows: int,
                                                                       vectors: int) -> None:
    """With AVX2's 16 registers, the 4 x 3-vector tile that filled them ran InceptionV3's 'same'
    3x3 convolution over 8x8x448 at 56 GFLOP/s (3.57 ms on one core) against 81 for 4 x 2 vectors
    (2.46 ms), reading its padding in place; the tiles without such checks lost 11-19% with one
    register less (`contraction._tile_registers`). That convolution now reads a padded copy
    (`contraction._pads_in_place`), and fills the 16."""
    tile = _convolution_tile(kernel_size, pads, out)
    assert (tile.rows, tile.vectors) == (rows, vectors), tile


@pytest.mark.usefixtures("direct_convolutions")
def test_a_width_with_only_one_vector_tiles_is_computed_wider() -> None:
    """InceptionV3's 147x147x32 -> 64 'same' 3x3 convolution on AVX2: 147 columns gave 7 x 1-vector
    tiles, 10.8 ms on a Zen 3 core; over 150 columns (sliced back in the tile) 6 x 2, 8.7 ms
    (`tiling.rows_for_wider_tile`). Decided for the AVX2 target, run where this CPU can."""
    x, w = rand(1, 147, 147, 32), rand(3, 3, 32, 64) * 0.1

    def emit(bb: relax.BlockBuilder, x_var: relax.Var) -> relax.Expr:
        return relax.op.nn.conv2d(x_var, relax.const(w), padding=(1, 1, 1, 1), data_layout="NHWC", kernel_layout="HWIO")

    target = named_target("znver3")
    scheduled = apply_default_schedules(module([x.shape], emit), target)
    [kernel] = [f for g, f in scheduled.functions_items() if isinstance(f, tirx.PrimFunc) and "conv2d" in g.name_hint]
    tile = _tile(kernel)
    assert (tile.rows, tile.vectors) == (6, 2), tile
    skip_unless_runnable(target)
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=target), tvm.cpu())
    check(vm["main"](tvm.runtime.tensor(x)).numpy(), reference.conv2d_nhwc(x, w, (1, 1), (1, 1, 1, 1), (1, 1)))
