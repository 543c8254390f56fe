"""The depthwise rule: MobileNetV2-style depthwise 3x3 + bias + ReLU6 against NumPy, for AVX-512 and AVX2.

The AVX2 build (``mcpu=znver3``: 8-float vectors, 16 registers) runs on an AVX-512 CPU too, so both
tile shapes are checked by running them there. Shapes cover stride 1 and 2, TensorFlow's 'same' padding
and Keras' ``ZeroPadding2D((0, 1), (0, 1))`` before a 'valid' stride-2 layer (MobileNetV2's),
odd sizes, and channel counts that are not a multiple of the vector width.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

from tfcheck.compiler.schedules import legalize_and_fuse, schedule_module
from tfcheck.compiler.schedules.rules import depthwise
from tfcheck.compiler.schedules.apply import RULE_ATTR

from ..isa import host_target, named_target
from . import reference
from .test_operators import check, module, rand, run

TARGETS = {"host": None, "avx2": "znver3"}

CASES = [
    # (input NHWC, strides, pads (top, left, bottom, right))
    ((1, 14, 14, 48), (1, 1), (1, 1, 1, 1)),  # 'same', three AVX-512 vectors of channels
    ((1, 15, 15, 32), (2, 2), (0, 0, 1, 1)),  # MobileNetV2's stride 2 after ZeroPadding2D
    ((1, 9, 11, 13), (1, 1), (1, 1, 1, 1)),  # odd sizes, 13 channels: no whole vector
    ((1, 13, 10, 24), (2, 2), (1, 1, 1, 1)),  # odd height, 24 channels: 8-wide vectors on AVX-512
    ((2, 7, 7, 20), (1, 1), (0, 0, 0, 0)),  # batch 2, 'valid': no padding at all
    ((1, 6, 6, 8), (2, 2), (0, 0, 1, 1)),  # one AVX2 vector; output narrower than a tile
]


def depthwise_bias_relu6(x_var: relax.Var, w: np.ndarray, b: np.ndarray, strides, pads) -> relax.Expr:
    """Depthwise 3x3 (weights HWC as the importer gives them: HWOI with I = 1), bias, ReLU6."""
    channels = w.shape[-1]
    conv = relax.op.nn.conv2d(x_var, relax.const(w.reshape(3, 3, channels, 1)), strides, pads, 1,
                              groups=channels, data_layout="NHWC", kernel_layout="HWOI")
    return relax.op.clip(relax.op.add(conv, relax.const(b)), 0.0, 6.0)


@pytest.mark.parametrize("target_name", sorted(TARGETS))
@pytest.mark.parametrize(("shape", "strides", "pads"), CASES)
def test_depthwise_bias_relu6_matches_numpy(shape, strides, pads, target_name: str) -> None:
    channels = shape[-1]
    x, w, b = rand(*shape), rand(3, 3, channels), rand(channels)
    mod = module([shape], lambda bb, x_var: depthwise_bias_relu6(x_var, w, b, strides, pads))
    mcpu = TARGETS[target_name]
    target = host_target() if mcpu is None else named_target(mcpu)
    actual, rules = run(mod, x, target=target)
    expected = reference.depthwise_nhwc(x, w[..., None], strides, pads, (1, 1)) + b
    check(actual, np.clip(expected, 0.0, 6.0))
    assert rules == ["schedule_depthwise"]  # convolution, bias and ReLU6 in one kernel


def _scheduled_kernel(shape: tuple[int, ...], pads, num_cores: int = 2) -> tirx.PrimFunc:
    """The one scheduled PrimFunc of a depthwise + bias + ReLU6 module (not compiled)."""
    w, b = rand(3, 3, shape[-1]), rand(shape[-1])
    mod = module([shape], lambda bb, x_var: depthwise_bias_relu6(x_var, w, b, (1, 1), pads))
    target = host_target(**{"num-cores": num_cores})
    scheduled = schedule_module(legalize_and_fuse(mod, target), target)
    [kernel] = [f for _, f in scheduled.functions_items() if isinstance(f, tirx.PrimFunc)]
    assert kernel.attrs[RULE_ATTR] == "schedule_depthwise"
    return kernel


def test_the_padding_is_read_in_place() -> None:
    """No padded copy of the input: the kernel's only buffer is its register tile's accumulator."""
    script = _scheduled_kernel((1, 14, 14, 32), (1, 1, 1, 1)).script()
    assert "pad_temp" not in script
    assert script.count("sblock_alloc_buffer") == 1


@pytest.mark.parametrize(("shape", "parallel"), [((1, 7, 7, 960), False), ((1, 14, 14, 384), True),
                                                 ((1, 112, 112, 32), True), ((4, 112, 112, 144), True)])
def test_depthwise_kernels_split_over_the_cores_as_others_do(shape, parallel: bool) -> None:
    """MobileNetV2's 7x7x960 layer (423K multiply-adds) runs on one core, the 14x14x384 one
    (677K) and larger on both: the threshold every micro-kernel has (`PARALLEL_MIN_WORK`)."""
    kernel = _scheduled_kernel(shape, (1, 1, 1, 1), num_cores=2)
    assert ("T.parallel(" in kernel.script()) is parallel


def test_a_parallel_kernel_keeps_its_accumulators_on_the_stack() -> None:
    """TVM allocates a "local" buffer, or a "global" one of 1 KiB or more, with
    TVMBackendAllocWorkspace, and under a parallel loop that is one call per tile in the parallel
    closure: with its 448-byte tile "local", the depthwise kernel split over the cores ran 2.4x
    slower than serially even on one thread (docs/schedules.md, "Depthwise convolutions")."""
    w, b = rand(3, 3, 144), rand(144)
    mod = module([(1, 56, 56, 144)], lambda bb, x_var: depthwise_bias_relu6(x_var, w, b, (1, 1), (1, 1, 1, 1)))
    target = host_target(**{"num-cores": 2})
    [func] = [f for _, f in legalize_and_fuse(mod, target).functions_items() if isinstance(f, tirx.PrimFunc)]
    kernel = depthwise.schedule_depthwise(func, target).mod["main"]
    assert "T.parallel(" in kernel.script()
    library = tvm.compile(tvm.IRModule({"main": kernel.with_attr("global_symbol", "main")}), target=target)
    assert "__tvm_parallel_lambda" in library.mod.inspect_source("ll")
    assert "TVMBackendAllocWorkspace" not in library.mod.inspect_source("ll")


def test_a_channel_multiplier_is_left_to_the_other_rules() -> None:
    """Multiplier 2 reads input channel c // 2: not a vector of the output's channels."""
    x, w = rand(1, 8, 8, 6), rand(3, 3, 12, 1)

    def emit(bb, x_var):
        return relax.op.nn.conv2d(x_var, relax.const(w), 1, 1, 1, groups=6, data_layout="NHWC", kernel_layout="HWOI")

    actual, rules = run(module([x.shape], emit), x)
    check(actual, reference.depthwise_nhwc(x, w.reshape(3, 3, 6, 2), (1, 1), (1, 1, 1, 1), (1, 1)))
    assert "schedule_depthwise" not in rules


@pytest.mark.parametrize("target_name", sorted(TARGETS))
def test_a_prime_width_is_computed_wider_in_tiles_of_several_columns(target_name: str) -> None:
    """Xception's middle flow: depthwise 3x3 over 19x19x728, 'same'. The tile's columns divide the
    width, and 19 allowed one: each input loaded fed one output, 0.21 ms on one core against 0.11
    for the same kernel over 20 columns in tiles of 5 (`channel_padding._padded_depthwise`). The
    extra column is cut off by each tile as it writes: still one kernel, matching NumPy."""
    shape = (1, 19, 19, 728)
    x, w, b = rand(*shape), rand(3, 3, 728), rand(728)
    mod = module([shape], lambda bb, x_var: depthwise_bias_relu6(x_var, w, b, (1, 1), (1, 1, 1, 1)))
    mcpu = TARGETS[target_name]
    target = host_target() if mcpu is None else named_target(mcpu)
    scheduled = schedule_module(legalize_and_fuse(mod, target), target)
    [kernel] = [f for _, f in scheduled.functions_items() if isinstance(f, tirx.PrimFunc)]
    sch = tvm.s_tir.Schedule(kernel)
    update = next(block for block in ("conv2d_nhwc_update", "group_conv2d_nhwc_update", "depthwise_conv2d_nhwc_update")
                  if _has_block(sch, block))
    columns = [sch.get(loop) for loop in sch.get_loops(sch.get_sblock(update))
               if sch.get(loop).kind == tirx.ForKind.UNROLLED and sch.get(loop).loop_var.name.startswith("xx")]
    assert [int(loop.extent) for loop in columns] == [5]  # output columns per tile, of 20
    actual, rules = run(mod, x, target=target)
    check(actual, np.clip(reference.depthwise_nhwc(x, w[..., None], (1, 1), (1, 1, 1, 1), (1, 1)) + b, 0.0, 6.0))
    assert rules == ["schedule_depthwise"]


def _has_block(sch: tvm.s_tir.Schedule, name: str) -> bool:
    try:
        sch.get_sblock(name)
    except Exception:  # noqa: BLE001 - TVM raises its own error for a missing block
        return False
    return True
