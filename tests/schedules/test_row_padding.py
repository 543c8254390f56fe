"""Convolutions of a prime output width get a register tile of several rows (issue 15).

The contraction rule's register tile is rows of output columns by vectors of output channels, and
its rows divide the width: InceptionV3's 17x17 maps (its 1x7, 7x1 and 1x1 convolutions, the
stride-2 3x3 one from 35x35) got tiles of one row, each weight vector loaded feeding one FMA, and
the model ran at half the speed it does now. `channel_padding.py` pads such a convolution's input
on the right so it computes 18 columns, in tiles of several rows (`tiling.register_tile` picks
them for each target's registers), and slices the output back. These tests check the tile each target gets, without running it, and the padded
kernel's numbers against NumPy on this machine.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tvm
from tvm import relax, s_tir, te, tirx, topi

from tfcheck.compiler.schedules import legalize_and_fuse, schedule_module
from tfcheck.compiler.schedules.apply import RULE_ATTR
from tfcheck.compiler.schedules.rewrites.channel_padding import pad_output_channels
from tfcheck.compiler.schedules.rules.contraction import schedule_contraction
from tfcheck.compiler.schedules.tiling import register_tile

from ..isa import host_target, named_target
from . import reference
from .test_operators import check, conv_case, module, rand, run

# (input NHWC, kernel HW, output channels, strides, pads (top, left, bottom, right)): output 17x17
PRIME_WIDTH = [
    ((1, 17, 17, 24), (1, 7), 32, (1, 1), (0, 3, 0, 3)),  # InceptionV3's 1x7, 'same'
    ((1, 17, 17, 24), (7, 1), 32, (1, 1), (3, 0, 3, 0)),  # its 7x1
    ((1, 17, 17, 40), (1, 1), 48, (1, 1), (0, 0, 0, 0)),  # its 1x1 over the 17x17 map
    ((1, 35, 35, 8), (3, 3), 32, (2, 2), (0, 0, 0, 0)),  # the stride-2 3x3 'valid' from 35x35
    ((1, 34, 34, 8), (3, 3), 16, (2, 2), (0, 0, 1, 1)),  # stride 2, TensorFlow's 'same' (padding on the right)
]
# mcpu -> (float lanes, vector registers): AVX-512 and AVX2.
TARGETS = {"znver5": (16, 32), "znver3": (8, 16)}


def contraction_kernel(mod: tvm.IRModule, target: tvm.target.Target) -> tirx.PrimFunc:
    """The one PrimFunc of a scheduled module that the contraction rule scheduled."""
    scheduled = schedule_module(legalize_and_fuse(mod, target), target)
    [kernel] = [func for _, func in scheduled.functions_items()
                if isinstance(func, tirx.PrimFunc) and func.attrs.get(RULE_ATTR) == "schedule_contraction"]
    return kernel


def tile_rows(kernel: tirx.PrimFunc) -> tuple[int, int]:
    """(rows of the register tile, output columns computed) of a convolution's micro-kernel: the
    extent of the first unrolled loop around its update block, and the padded extent of its
    accumulator (the width, or the height where the rows run over it: a 1x7 convolution's)."""
    sch = s_tir.Schedule(kernel)
    update = sch.get_sblock("conv2d_nhwc_update")
    unrolled = [sch.get(loop) for loop in sch.get_loops(update) if sch.get(loop).kind == tirx.ForKind.UNROLLED]
    [written] = sch.get(update).writes
    return int(unrolled[0].extent), max(int(written.source.shape[1]), int(written.source.shape[2]))


@pytest.mark.usefixtures("direct_convolutions")
@pytest.mark.parametrize("mcpu", sorted(TARGETS))
@pytest.mark.parametrize(("shape", "kernel", "out", "strides", "pads"), PRIME_WIDTH)
def test_a_prime_output_width_gets_several_rows_per_tile(shape, kernel, out, strides, pads, mcpu: str) -> None:
    mod, _x, _expected = conv_case(shape, kernel, out, strides, pads, (1, 1))
    target = named_target(mcpu)
    rows, columns = tile_rows(contraction_kernel(mod, target))
    assert columns == 18 and rows > 1
    assert rows == register_tile(18, out, *TARGETS[mcpu])[0]


def output_written_per_tile(kernel: tirx.PrimFunc) -> bool:
    """Whether the kernel writes its output from each register tile (under the tiles' loop), rather
    than in a pass of its own after all of them."""
    sch = s_tir.Schedule(kernel)
    blocks_in_order = list(sch.get_child_blocks(sch.get_sblock("root")))
    [update] = [b for b in blocks_in_order if sch.get(b).name_hint.endswith("_update")]
    tiles = sch.get(sch.get_loops(update)[0])
    return sch.get(sch.get_loops(blocks_in_order[-1])[0]).same_as(tiles)


@pytest.mark.usefixtures("direct_convolutions")
@pytest.mark.parametrize(("shape", "kernel", "out", "strides", "pads"), PRIME_WIDTH)
def test_the_padded_kernel_matches_numpy(shape, kernel, out, strides, pads) -> None:
    """On this machine's target: the extra column is computed, then dropped before bias and ReLU6,
    by each tile as it writes its output (a pass over the padded output cost InceptionV3 5%)."""
    mod, x, expected = conv_case(shape, kernel, out, strides, pads, (1, 1))
    target = host_target()
    kernel = contraction_kernel(mod, target)
    rows, columns = tile_rows(kernel)
    assert rows > 1 and columns == 18
    assert output_written_per_tile(kernel)
    actual, rules = run(mod, x, target=target)
    assert actual.shape == expected.shape == (1, 17, 17, out)
    check(actual, expected)
    assert rules == ["schedule_contraction"]  # convolution, slice, bias and ReLU6 in one kernel


@pytest.mark.usefixtures("direct_convolutions")
@pytest.mark.parametrize("width", [14, 35])
def test_a_width_that_divides_well_is_left_alone(width: int) -> None:
    """DenseNet's and ResNet's maps (7, 14, 28, 56: 7 or 14 rows) compute no extra column."""
    mod, _x, _expected = conv_case((1, width, width, 16), (3, 3), 32, (1, 1), (1, 1, 1, 1), (1, 1))
    target = named_target("znver5")
    assert tile_rows(contraction_kernel(mod, target)) == (register_tile(width, 32, 16, 32)[0], width)
    assert "strided_slice" not in legalize_and_fuse(mod, target)["main"].script()


def _conv3d_relu(shape: tuple[int, ...], kernel: tuple[int, ...]) -> tvm.IRModule:
    """`relu(conv3d(x, W))`, NDHWC and DHWIO with constant weights, 'valid'."""
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    weight = relax.const(np.random.default_rng(1).standard_normal(kernel).astype(np.float32))
    with builder.function("main", [x]):
        with builder.dataflow():
            out = builder.emit_output(relax.op.nn.relu(relax.op.nn.conv3d(
                x, weight, data_layout="NDHWC", kernel_layout="DHWIO")))
        builder.emit_func_output(out)
    return builder.get()


def _padded_width(mod: tvm.IRModule) -> int:
    """The output width the convolution computes once `pad_output_channels` has run."""
    target = named_target("znver5")
    padded = pad_output_channels(mod, target)["main"]
    [conv] = [binding.value for block in padded.body.blocks for binding in block.bindings
              if isinstance(binding.value, relax.Call) and getattr(binding.value.op, "name", "") == "relax.nn.conv3d"]
    return int(conv.ty.shape.values[-2])


def test_a_conv3d_of_prime_width_is_padded_and_matches_tvms_own() -> None:
    """keras.io's CT-scan classifier's second Conv3D (29 columns, 64 channels in) ran 2x faster
    padded; the same applies to every 3-D convolution with a long reduction."""
    mod = _conv3d_relu((1, 5, 6, 19, 16), (3, 3, 3, 16, 32))  # output width 17, 432 products each
    assert _padded_width(mod) == 18
    x = np.random.default_rng(0).standard_normal((1, 5, 6, 19, 16)).astype(np.float32)
    actual, _rules = run(mod, x, target=host_target())
    machine = relax.VirtualMachine(tvm.compile(mod, target=tvm.target.Target({"kind": "llvm"})), tvm.cpu())
    check(actual, machine["main"](tvm.runtime.tensor(x)).numpy())


@pytest.mark.parametrize(("spatial", "padded"), [((6, 6), True), ((40, 40), False)])
def test_a_short_reduction_pads_only_an_output_that_stays_in_cache(spatial: tuple[int, int], padded: bool) -> None:
    """27 products per output (one input channel): for a 6 MB output the extra column and the
    padded loads' bound checks cost more than the wider tile saves (the CT-scan classifier's first
    Conv3D: 1.10-1.15x slower padded, 3.3x when the slice was a pass of its own)."""
    mod = _conv3d_relu((1, *spatial, 19, 1), (3, 3, 3, 1, 64))  # output width 17
    assert _padded_width(mod) == (18 if padded else 17)


def test_a_symbolic_batch_still_gets_the_wider_tile() -> None:
    """The output's size is one example's: an unknown batch (`dims=`) does not turn padding off."""
    batch = tvm.tirx.Var("batch", "int64")
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((batch, 19, 19, 8), "float32"))
    weight = relax.const(np.ones((3, 3, 8, 32), np.float32))
    with builder.function("main", [x]):
        with builder.dataflow():
            out = builder.emit_output(relax.op.nn.conv2d(x, weight, data_layout="NHWC", kernel_layout="HWIO"))
        builder.emit_func_output(out)
    padded = pad_output_channels(builder.get(), named_target("znver5"))
    assert "R.Tensor((batch, 17, 18, 32)" in padded["main"].script()


def _conv_then(shape: tuple[int, ...], out: int, after: Callable[[relax.BlockBuilder, relax.Expr], relax.Expr]):
    """A 3x3 'valid' conv2d with constant weights, then ``after``; the input and NumPy's convolution."""
    x, w = rand(*shape), rand(3, 3, shape[-1], out)

    def emit(bb, x_var):
        conv = bb.emit(relax.op.nn.conv2d(x_var, relax.const(w), data_layout="NHWC", kernel_layout="HWIO"))
        return after(bb, conv)

    return module([shape], emit), x, reference.conv2d_nhwc(x, w, (1, 1), (0, 0, 0, 0), (1, 1))


@pytest.mark.parametrize(("shift", "per_tile"), [(0, True), (1, False)])
def test_only_a_slice_from_the_first_column_joins_the_tile(shift: int, per_tile: bool) -> None:
    """A slice from column 1 would need each tile's output columns moved by one: it stays a pass of
    its own (FuseOps keeps such a slice apart anyway; this kernel is written directly)."""
    data, weight = te.placeholder((1, 10, 10, 16), name="x"), te.placeholder((3, 3, 16, 32), name="w")
    conv = topi.nn.conv2d_nhwc(data, weight, 1, 0, 1)
    out = te.compute((1, 8, 7, 32), lambda n, h, w, c: te.max(conv[n, h, w + shift, c], tvm.tirx.const(0.0)))
    target = host_target()
    sch = schedule_contraction(te.create_prim_func([data, weight, out]), target)
    assert output_written_per_tile(sch.mod["main"]) is per_tile
    x, w = rand(1, 10, 10, 16), rand(3, 3, 16, 32)
    result = tvm.runtime.tensor(np.zeros((1, 8, 7, 32), np.float32))
    tvm.compile(sch.mod, target=target)(tvm.runtime.tensor(x), tvm.runtime.tensor(w), result)
    conv_expected = reference.conv2d_nhwc(x, w, (1, 1), (0, 0, 0, 0), (1, 1))
    check(result.numpy(), np.maximum(conv_expected[:, :, shift : shift + 7], 0))


def test_a_channel_crop_stays_a_pass_of_its_own() -> None:
    """Dropping padded output channels would cut the tile's vectors; that slice keeps its own pass."""
    mod, x, conv = _conv_then((1, 6, 6, 8), 32, lambda bb, y: relax.op.nn.relu(
        bb.emit(relax.op.strided_slice(y, axes=[3], begin=[0], end=[24]))))
    target = host_target()
    assert not output_written_per_tile(contraction_kernel(mod, target))
    actual, _rules = run(mod, x, target=target)
    check(actual, np.maximum(conv[..., :24], 0))


@pytest.mark.parametrize("mcpu", sorted(TARGETS))
def test_a_leading_crop_of_any_axis_joins_the_tile(mcpu: str) -> None:
    """Rows and outer axes: the tile's predicate drops what lies outside the crop. With AVX-512 the
    9 columns are computed as 10 (`channel_padding`), a crop of its own before the model's: a crop
    of a crop joins the tile too."""
    mod, x, conv = _conv_then((1, 11, 11, 8), 32, lambda bb, y: relax.op.nn.relu(
        bb.emit(relax.op.strided_slice(y, axes=[1, 2], begin=[0, 0], end=[7, 8]))))
    target = named_target(mcpu)
    assert output_written_per_tile(contraction_kernel(mod, target))
    actual, _rules = run(mod, x, target=target)
    check(actual, np.maximum(conv[:, :7, :8], 0))


def test_a_symbolic_batch_slices_in_the_tile_too() -> None:
    """`dims=` builds: the crop's predicate is on the width, the batch stays symbolic; any batch runs."""
    batch = tvm.tirx.Var("batch", "int64")
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((batch, 19, 19, 8), "float32"))
    weight = rand(3, 3, 8, 32)
    with builder.function("main", [x]):
        with builder.dataflow():
            out = builder.emit_output(relax.op.nn.relu(relax.op.nn.conv2d(
                x, relax.const(weight), data_layout="NHWC", kernel_layout="HWIO")))
        builder.emit_func_output(out)
    mod, target = builder.get(), host_target()
    assert output_written_per_tile(contraction_kernel(mod, target))
    for size in (1, 3):
        images = rand(size, 19, 19, 8)
        actual, _rules = run(mod, images, target=target)
        check(actual, np.maximum(reference.conv2d_nhwc(images, weight, (1, 1), (0, 0, 0, 0), (1, 1)), 0))
