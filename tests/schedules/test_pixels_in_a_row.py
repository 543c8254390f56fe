"""A 1x1 convolution runs over its image's pixels in a row where that gives a taller register tile
(`channel_padding._flattened_pointwise`, docs/schedules.md "Padded shapes"), with its bias, its
activation and a residual add still in the kernel's epilogue (`flat_steps.py`).

Xception's middle flow (1x1 convolutions of 19x19x728 to 728 channels, 8 blocks of three, half of
the model's time) computed 19 columns as 20 in tiles of 5 rows with AVX-512; over the 361 pixels
it computes 364 in tiles of 7: 2.98 against 3.27 ms on one core. AVX2 builds, short reductions and
widths a tall tile divides keep their tiles."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

from tfcheck.compiler.schedules import apply_default_schedules, legalize_and_fuse
from tfcheck.compiler.schedules.rewrites.channel_padding import flat_columns
from tfcheck.compiler.schedules.rewrites.flat_steps import move_steps_before_unflattening

from ..isa import named_target, skip_unless_runnable
from .test_operators import check, module, rand


@pytest.mark.parametrize(("pixels", "width", "inputs", "channels", "lanes", "registers", "expected"), [
    (361, 19, 728, 736, 16, 32, 364),  # Xception's middle flow, AVX-512: tiles of 7 rows
    (289, 17, 768, 192, 16, 32, 290),  # InceptionV3's 17x17 1x1 convolutions: tiles of 5 rows of 3 vectors
    (361, 19, 728, 736, 8, 16, None),  # AVX2: the width's tiles
    (5329, 73, 64, 80, 16, 32, None),  # a reduction of 64 (InceptionV3's 73x73x64 -> 80): slower in a row
    (196, 14, 256, 256, 16, 32, None),  # 14 columns: tiles of 7 already
])
def test_the_pixels_go_in_a_row_only_where_a_taller_tile_pays(pixels, width, inputs, channels, lanes, registers,
                                                                expected) -> None:
    assert flat_columns(pixels, width, inputs, channels, lanes, registers) == expected


def _middle_flow_convolution() -> tuple[tvm.IRModule, np.ndarray, np.ndarray, np.ndarray]:
    """`relu(conv1x1(x) + b) + x` over 19x19x728 (a residual after the bias and activation)."""
    x, w, b = rand(1, 19, 19, 728), rand(1, 1, 728, 728) * 0.05, rand(728)

    def emit(bb: relax.BlockBuilder, x_var: relax.Var) -> relax.Expr:
        y = bb.emit(relax.op.nn.conv2d(x_var, relax.const(w), data_layout="NHWC", kernel_layout="HWIO"))
        activated = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(y, relax.const(b)))))
        return relax.op.add(activated, x_var)

    expected = np.maximum(x.reshape(-1, 728) @ w.reshape(728, 728) + b, 0).reshape(x.shape) + x
    return module([x.shape], emit), x, expected, w


def test_the_steps_after_it_stay_in_its_kernel() -> None:
    mod, _x, _expected, _w = _middle_flow_convolution()
    fused = legalize_and_fuse(mod, named_target("sapphirerapids"))
    kernels = [gvar.name_hint for gvar, func in fused.functions_items()
               if isinstance(func, tirx.PrimFunc) and not gvar.name_hint.startswith("reshape")]
    assert len(kernels) == 1 and kernels[0].startswith("fused_conv2d_strided_slice_add_relu_add"), kernels  # one kernel
    assert "T.int64(364), T.int64(736)" in fused[kernels[0]].script()  # 361 pixels as 364, 728 channels as 736


def test_it_computes_the_convolution() -> None:
    target = named_target("sapphirerapids")
    skip_unless_runnable(target)
    mod, x, expected, _w = _middle_flow_convolution()
    scheduled = apply_default_schedules(mod, target)
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=target), tvm.cpu())
    check(vm["main"](tvm.runtime.tensor(x)).numpy(), expected)


def test_only_steps_that_broadcast_alike_on_both_sides_move() -> None:
    """A vector over the channels, a scalar and a tensor of the image's shape move; a vector over
    the width broadcasts differently over the flat rows and stays after the reshape."""
    flat_shape, shape = (1, 1, 6, 4), (1, 2, 3, 4)

    def emit(bb: relax.BlockBuilder, flat: relax.Var, image: relax.Var) -> relax.Expr:
        unflattened = bb.emit(relax.op.reshape(flat, shape))
        biased = bb.emit(relax.op.add(unflattened, relax.const(rand(4))))
        scaled = bb.emit(relax.op.multiply(biased, relax.const(np.float32(0.5))))
        summed = bb.emit(relax.op.add(scaled, image))
        activated = bb.emit(relax.op.nn.relu(summed))
        return relax.op.add(activated, relax.const(rand(1, 1, 3, 1)))  # over the width: stays

    builder = relax.BlockBuilder()
    flat, image = relax.Var("flat", relax.TensorType(flat_shape, "float32")), relax.Var("image", relax.TensorType(shape, "float32"))
    with builder.function("main", [flat, image]):
        with builder.dataflow():
            out = builder.emit_output(emit(builder, flat, image))
        builder.emit_func_output(out)
    moved = move_steps_before_unflattening(builder.get())
    live = relax.transform.DeadCodeElimination()(moved)
    ops = [binding.value.op.name.rsplit(".", 1)[-1] for block in live["main"].body.blocks
           for binding in block.bindings if isinstance(binding.value, relax.Call)]
    # the bias, the scale, the image reshaped to the flat rows and added, ReLU; then the reshape
    # back, and the width's vector after it
    assert ops == ["add", "multiply", "reshape", "add", "relu", "reshape", "add"], ops
    values = [rand(*flat_shape), rand(*shape)]
    before = relax.VirtualMachine(tvm.compile(builder.get(), target="llvm"), tvm.cpu())["main"](
        *map(tvm.runtime.tensor, values)).numpy()
    after = relax.VirtualMachine(tvm.compile(moved, target="llvm"), tvm.cpu())["main"](
        *map(tvm.runtime.tensor, values)).numpy()
    np.testing.assert_array_equal(after, before)
