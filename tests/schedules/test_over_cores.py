"""Loops split over the cores at run time (`compiler/schedules/lowering/over_cores.py`): a kernel over sizes
known only at run time whose work is too small at the build's smallest sizes gets a parallel and
a serial version of its loop and chooses by the work at the sizes it is called with; static
kernels are decided at build time as before; results match NumPy on both sides."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax, sym, tirx
from tvm.script import tirx as T

from tfcheck.compiler.schedules import apply_default_schedules, blocks, compile_cpu
from tfcheck.compiler.schedules.lowering import over_cores
from tfcheck.compiler.schedules.lowering.over_cores import WHEN_ATTR, version_parallel_loops, work
from tfcheck.compiler.schedules.lowering.unswitch import loops_in

from ..isa import named_target, skip_unless_runnable
from .test_operators import TWO_CORES, _parallel_kernels, _parallel_loops, _scheduled_kernels, check, module, rand


W = rand(1, 1, 64, 384)


def pointwise(size: int | tirx.Var, smallest: int | None) -> tvm.IRModule:
    """MobileNetV2's 14x14-stage expansion, a 1x1 convolution of 64 -> 384 channels and ReLU6, over
    ``size`` x ``size`` images (symbolic: any size, from ``smallest`` pixels a side)."""
    mod = module([(1, size, size, 64)], lambda bb, x: relax.op.clip(bb.emit(relax.op.nn.conv2d(
        x, relax.const(W), data_layout="NHWC", kernel_layout="HWIO")), 0.0, 6.0))
    if smallest is not None:
        mod["main"] = mod["main"].with_attr("tir_var_lower_bound", {"s": smallest})
    return mod


def test_a_convolution_over_images_of_any_size_splits_over_the_cores_from_the_size_its_work_pays_for() -> None:
    """MobileNetV2 for images from 48 pixels a side: its 14x14 stage is 3x3 at 48, where a 1x1
    convolution of 64 -> 384 channels (221k multiply-adds) is not worth the cores; decided there,
    it ran on one core at 224 too (92 against 37-45 us in the 224x224 build). It now chooses at
    run time: serial at 3x3, split at 14x14, and computes the same either way."""
    size = tirx.Var("s", "int64")
    mod = pointwise(size, 3)
    scheduled = apply_default_schedules(mod, TWO_CORES)
    assert set(_parallel_kernels(scheduled, {"s": 3}).values()) == {False}
    assert set(_parallel_kernels(scheduled, {"s": 14}).values()) == {True}
    vm = relax.VirtualMachine(compile_cpu(scheduled, TWO_CORES), tvm.cpu())
    for pixels in (3, 14):
        x = rand(1, pixels, pixels, 64)
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), np.clip(x @ W[0, 0], 0.0, 6.0))


@pytest.mark.parametrize(("size", "parallel"), [(3, False), (14, True)])
def test_a_static_kernel_is_decided_at_build_time(size: int, parallel: bool) -> None:
    """The same convolution at a fixed size has one loop, parallel or not as its work says."""
    scheduled = apply_default_schedules(pointwise(size, None), TWO_CORES)
    kernels = _scheduled_kernels(scheduled)
    assert [condition for func in kernels.values() for _, condition in _parallel_loops(func.body)] == (
        [None] if parallel else [])
    assert not any(WHEN_ATTR in func.script() for func in kernels.values())


def test_over_the_code_size_budget_the_loop_stays_serial(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both versions of a loop double its code; where that goes over the budget, the function keeps
    the build-time decision at its smallest sizes: serial."""
    monkeypatch.setattr(over_cores, "CODE_SIZE_BUDGET", 0)
    scheduled = apply_default_schedules(pointwise(tirx.Var("s", "int64"), 3), TWO_CORES)
    kernels = _scheduled_kernels(scheduled)
    assert [_parallel_loops(func.body) for func in kernels.values()] == [[]]
    assert not any(WHEN_ATTR in func.script() for func in kernels.values())


@T.prim_func(s_tir=True)
def _triangle(a: T.handle, b: T.handle) -> None:
    """Rows of growing length, the loop over them marked to run over the cores from 64 elements."""
    n = T.int64()
    A = T.match_buffer(a, (n, n), "float32")
    B = T.match_buffer(b, (n, n), "float32")
    for i in T.parallel(n, annotations={WHEN_ATTR: 64}):
        for j in range(i + 1):
            with T.sblock("B"):
                vi = T.axis.spatial(n, i)
                vj = T.axis.spatial(i + 1, j)
                B[vi, vj] = A[vi, vj] * T.float32(2)


def test_the_work_counts_each_blocks_domain_once() -> None:
    """The 1x1 convolution's multiply-adds, its initialisation and its epilogue, each over the
    image's pixels as they are: the register tile of 7 pixels and the copies of the tile in the
    unswitched branches do not count (counted by the loops, a 3x3 image made 7 pixels a tile row,
    enough to split its 221k multiply-adds over the cores)."""
    size = tirx.Var("s", "int64")
    scheduled = apply_default_schedules(pointwise(size, 3), TWO_CORES)
    [marked] = [loop for _, func in scheduled.functions_items() if isinstance(func, tirx.PrimFunc)
                for loop in loops_in(func.body) if WHEN_ATTR in loop.annotations]
    for pixels in (3, 14):
        at = tvm_ffi.structural_map(work(marked), (tirx.Var, lambda _size: tirx.IntImm("int64", pixels)))
        assert int(sym.Analyzer().simplify(at)) == pixels * pixels * 384 * (64 + 2)


def test_a_condition_reading_an_inner_index_keeps_the_loop_serial() -> None:
    """The work of a loop whose inner extents vary with its index is no condition the function can
    evaluate before the loop: the loop stays serial, as decided at the smallest sizes."""
    loop = version_parallel_loops(_triangle, TWO_CORES).body.block.body
    assert loop.kind == tirx.ForKind.SERIAL
    assert WHEN_ATTR not in loop.annotations



def test_each_version_of_the_loop_keeps_its_accumulators_to_itself() -> None:
    """The two versions of a loop used a tile's accumulators as one buffer allocated at the root:
    TVM sized it where its uses meet, as the whole output in memory instead of a tile in registers,
    and over the cropped sizes of a U-Net of valid convolutions for images of any size (jakeret/unet's
    1x1 convolution of 32 -> 16 channels over ``h // 4 - 7`` rows) TVM 0.27's code generator failed
    for an AVX2 target ("Binding of variable rmod ... conflicts with previous binding"). Each
    version now has its own; the kernel compiles and computes the convolution on both sides."""
    h, w = tirx.Var("h", "int64"), tirx.Var("w", "int64")
    weights = rand(1, 1, 32, 16)
    # The second input, the image, gives the VM ``h`` and ``w``.
    mod = module([(1, h // 4 - 7, w // 4 - 7, 32), (1, h, w, 1)], lambda bb, x, _image: relax.op.nn.conv2d(
        x, relax.const(weights), data_layout="NHWC", kernel_layout="HWIO"))
    mod["main"] = mod["main"].with_attr("tir_var_lower_bound", {"h": 44, "w": 44})
    avx2 = named_target("znver3")
    scheduled = apply_default_schedules(mod, avx2)
    kernels = [version_parallel_loops(func, avx2) for func in scheduled.functions.values()
               if isinstance(func, tirx.PrimFunc)]
    versions = [(stmt, _allocated(func)) for func in kernels for stmt in _root_statements(func)
                if isinstance(stmt, tirx.IfThenElse)]
    assert versions, "no loop has two versions: the test no longer covers them"
    for branch, allocated in versions:
        parallel, serial = (_buffers_used(case) & allocated for case in (branch.then_case, branch.else_case))
        assert parallel and serial and not parallel & serial
    vm = relax.VirtualMachine(compile_cpu(scheduled, avx2), tvm.cpu())
    skip_unless_runnable(avx2)
    for side in (44, 201):  # serial, over the cores
        x = rand(1, side // 4 - 7, side // 4 - 7, 32)
        got = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(rand(1, side, side, 1))).numpy()
        check(got, x @ weights[0, 0])


def _root_statements(func: tirx.PrimFunc) -> list[tirx.Stmt]:
    """The statements of the kernel's root block."""
    body = func.body.block.body
    return list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]


def _buffers_used(stmt: tirx.Stmt) -> set[tirx.Buffer]:
    """The buffers ``stmt`` reads or writes."""
    found: set[tirx.Buffer] = set()
    tvm_ffi.structural_map(stmt, (tirx.Buffer, lambda buffer: found.add(buffer) or buffer))
    return found


def _allocated(func: tirx.PrimFunc) -> set[tirx.Buffer]:
    """The buffers the kernel's root block allocates."""
    return set(func.body.block.alloc_buffers)
