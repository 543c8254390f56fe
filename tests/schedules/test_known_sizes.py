"""Symbolic sizes known not to be negative (`compiler/schedules/lowering/known_sizes.py`).

The case is AdaIN's (srihari-humbarwadi/adain-tensorflow2.x, served for images of any size): a 3x3
convolution after a 2x2 pooling and a reflection padding, so the kernel's buffers use the image's
height and width only as ``h // 2`` and ``w // 2``. Without the binding, TVM's buffer compaction
could not prove a tile's first row non-negative and indexed the register tile's accumulators with
``max(0, ...)`` at run time; the convolution ran 2.5-3x slower than the static build.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax, s_tir, tirx

from tfcheck.compiler.schedules import apply_default_schedules, compile_cpu
from tfcheck.compiler.schedules.lowering.known_sizes import bind_sizes

from . import reference
from .test_operators import TARGET, check, module, rand

W = rand(3, 3, 128, 128)  # 576 KiB of weights: the column tiles stay outside


def pooled_convolution(height: int | tirx.Var, width: int | tirx.Var) -> tvm.IRModule:
    """``relu(conv3x3(reflect_pad(max_pool2x2(x))))`` over a 128-channel image."""
    def emit(bb: relax.BlockBuilder, x: relax.Var) -> relax.Expr:
        pooled = bb.emit(relax.op.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2), layout="NHWC"))
        padded = bb.emit(relax.op.nn.pad(pooled, [0, 0, 1, 1, 1, 1, 0, 0], pad_mode="reflect"))
        return relax.op.nn.relu(bb.emit(relax.op.nn.conv2d(padded, relax.const(W), data_layout="NHWC",
                                                           kernel_layout="HWIO")))
    return module([(1, height, width, 128)], emit)


def expected(x: np.ndarray) -> np.ndarray:
    """NumPy's ``pooled_convolution``."""
    pooled = reference.pool_nhwc(x, (2, 2), (2, 2), (0, 0, 0, 0), "max")
    padded = np.pad(pooled, [(0, 0), (1, 1), (1, 1), (0, 0)], mode="reflect")
    return np.maximum(reference.conv2d_nhwc(padded, W, (1, 1), (0, 0, 0, 0), (1, 1)), 0)


def symbolic_kernel() -> tirx.PrimFunc:
    """The scheduled convolution of ``pooled_convolution`` over symbolic sizes."""
    scheduled = apply_default_schedules(pooled_convolution(tirx.Var("h", "int64"), tirx.Var("w", "int64")), TARGET)
    (kernel,) = [func for gvar, func in scheduled.functions_items()
                 if isinstance(func, tirx.PrimFunc) and "conv2d" in gvar.name_hint]
    return kernel


def compacted(func: tirx.PrimFunc) -> str:
    """``func`` as TVM's lowering leaves it once each buffer is compacted to its tile's region."""
    passes = tvm.transform.Sequential([s_tir.transform.LowerInitBlock(),
                                       s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
                                       s_tir.transform.ConvertBlocksToOpaque(),
                                       s_tir.transform.CompactBufferAllocation()])
    return passes(tvm.IRModule({"main": func})).script()


def test_the_accumulators_of_a_tile_over_halved_sizes_are_indexed_without_run_time_clamps() -> None:
    kernel = bind_sizes(symbolic_kernel())
    assert "w_size" in kernel.script() and "h_size" in kernel.script()
    # The binding itself is `T.max(w, T.int64(0))`; a clamp of a tile's start is `T.max(T.int64(0), ...)`.
    assert "T.max(T.int64(0)" not in compacted(kernel)


def test_functions_without_symbolic_sizes_are_left_as_they_are() -> None:
    scheduled = apply_default_schedules(pooled_convolution(16, 16), TARGET)
    for _, func in scheduled.functions_items():
        if isinstance(func, tirx.PrimFunc):
            assert bind_sizes(func).same_as(func)


def test_the_bound_sizes_compute_what_numpy_computes_at_sizes_around_the_tile() -> None:
    executable = compile_cpu(apply_default_schedules(
        pooled_convolution(tirx.Var("h", "int64"), tirx.Var("w", "int64")), TARGET), TARGET)
    vm = relax.VirtualMachine(executable, tvm.cpu())
    for height, width in [(6, 6), (10, 14), (26, 38), (7, 19)]:
        x = rand(1, height, width, 128)
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), expected(x))


W1 = rand(1, 1, 16, 96)


def expansion(size: int | tirx.Var) -> tvm.IRModule:
    """MobileNetV2's first 1x1 expansion (16 -> 96 channels, ReLU6) over a ``size`` x ``size`` image."""
    return module([(1, size, size, 16)], lambda bb, x: relax.op.clip(bb.emit(relax.op.nn.conv2d(
        x, relax.const(W1), data_layout="NHWC", kernel_layout="HWIO")), 0.0, 6.0))


def test_a_tiles_accumulator_is_one_whole_tile_over_an_image_of_any_width() -> None:
    """Cut to the buffer's bounds, a tile of 4 rows over a width known only at run time had an
    accumulator of ``min(w, 4)`` rows, a size LLVM cannot keep in registers (1.5-2x the time of
    the fixed-size build). With the accumulator's rows axis in whole tiles, every allocation is of
    a constant size, and the results are NumPy's at widths below, at and past a tile."""
    size = tirx.Var("s", "int64")
    scheduled = apply_default_schedules(expansion(size), TARGET)
    (kernel,) = [func for gvar, func in scheduled.functions_items()
                 if isinstance(func, tirx.PrimFunc) and "conv2d" in gvar.name_hint]
    allocations = [line for line in compacted(bind_sizes(kernel)).splitlines() if "alloc_buffer(" in line]
    assert allocations and not any("s_size" in line or "T.min(" in line for line in allocations), allocations
    vm = relax.VirtualMachine(compile_cpu(scheduled, TARGET), tvm.cpu())
    for pixels in (1, 3, 5, 17):
        x = rand(1, pixels, pixels, 16)
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), np.clip(x @ W1[0, 0], 0.0, 6.0))
