"""Tile-level unswitching (`compiler/schedules/lowering/unswitch.py`): a contraction over a symbolic batch
gets register tiles of several rows (what `tiling.register_tile` picks for 8 rows) whose full tiles
carry no bound check, while the partial tile runs in half tiles and single rows; static kernels are
left alone; results match NumPy at every batch size around the tile."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax, s_tir, tirx

from tfcheck.compiler.schedules import apply_default_schedules, compile_cpu
from tfcheck.compiler.schedules.apply import legalize_and_fuse, schedule_module
from tfcheck.compiler.schedules.rules.contraction import SYMBOLIC_ROWS
from tfcheck.compiler.schedules.cpu import vector_lanes, vector_registers
from tfcheck.compiler.schedules.tiling import register_tile
from tfcheck.compiler.schedules.lowering.unswitch import loops_in, unswitch_partial_tiles

from ..isa import named_target, skip_unless_runnable
from .test_known_sizes import symbolic_kernel
from .test_operators import TARGET, check, rand

# Rows of the register tile over a symbolic batch of the tests' 128 -> 256 layer on this machine.
TILE_ROWS = register_tile(SYMBOLIC_ROWS, 256, vector_lanes(TARGET, 32), vector_registers(TARGET))[0]


def dense(rows: int | tirx.Var, w: np.ndarray, b: np.ndarray) -> tvm.IRModule:
    """``relu(x @ w + b)`` over ``rows`` rows (the MLP's first layer)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([rows, w.shape[0]], "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.add(bb.emit(relax.op.matmul(x, relax.const(w))), relax.const(b)))
            out = bb.emit_output(relax.op.nn.relu(y))
        bb.emit_func_output(out)
    return bb.get()


def kernel(mod: tvm.IRModule, target: tvm.target.Target = TARGET) -> tirx.PrimFunc:
    """The one scheduled kernel of ``mod``."""
    scheduled = schedule_module(legalize_and_fuse(mod, target), target)
    (func,) = [func for _, func in scheduled.functions_items() if isinstance(func, tirx.PrimFunc)]
    return func


def tiles_loop(func: tirx.PrimFunc) -> tirx.For:
    """The loop over the kernel's tiles: the last top-level statement (after the weight packing)."""
    body = func.body.block.body
    return body.seq[-1] if isinstance(body, tirx.SeqStmt) else body


def blocks(stmt: tirx.Stmt) -> list[s_tir.SBlockRealize]:
    """Every block realize under ``stmt``."""
    found: list[s_tir.SBlockRealize] = []

    def visit(node: tirx.Stmt) -> None:
        if isinstance(node, tirx.For):
            visit(node.body)
        elif isinstance(node, tirx.SeqStmt):
            for child in node.seq:
                visit(child)
        elif isinstance(node, tirx.IfThenElse):
            visit(node.then_case)
            if node.else_case is not None:
                visit(node.else_case)
        elif isinstance(node, s_tir.SBlockRealize):
            found.append(node)

    visit(stmt)
    return found


def checked(realize: s_tir.SBlockRealize) -> bool:
    """Whether the block carries a bound check (a predicate other than True)."""
    return not (isinstance(realize.predicate, tirx.IntImm) and realize.predicate.value == 1)


W, B = rand(128, 256), rand(256)


def test_full_tiles_of_a_symbolic_batch_carry_no_row_check() -> None:
    func = kernel(dense(tirx.Var("batch", "int64"), W, B))
    branch = tiles_loop(func).body
    assert isinstance(branch, tirx.IfThenElse)
    full, partial = blocks(branch.then_case), blocks(branch.else_case)
    assert {realize.block.name_hint for realize in full} == {"matmul_init", "matmul_update", "compute"}
    assert not any(checked(realize) for realize in full)
    # The register tile of the full branch has TILE_ROWS rows, unrolled: constant accumulator indices.
    assert TILE_ROWS > 1 and f"T.unroll(T.int64({TILE_ROWS}))" in func.script()
    # The partial tile runs in groups of the powers of two below the tile (4, 2 and 1 rows for a
    # tile of 7), each without checks when it is whole, the rows of a group that ends early in the
    # smaller groups, each row under one check outside its reduction loop.
    groups = {int(loop.extent) for loop in loops_in(branch.else_case)
              if loop.kind == tirx.ForKind.UNROLLED and isinstance(loop.extent, tirx.IntImm)}
    assert {1 << power for power in range((TILE_ROWS - 1).bit_length())} <= groups
    assert not any(checked(realize) for realize in partial)
    # Each branch defines its own variables (the schedule state verifies the function).
    s_tir.Schedule(func)


def test_full_tiles_over_halved_image_sizes_carry_no_check() -> None:
    """A convolution after a pooling (AdaIN's, `test_known_sizes.py`): the epilogue's checks also
    bound the channels and the tile's row, which TVM could not prove over ``h // 2`` and ``w // 2``;
    simplified where they are evaluated, the tile still unswitches on the width alone."""
    branch = tiles_loop(symbolic_kernel()).body
    assert isinstance(branch, tirx.IfThenElse)
    assert not any(checked(realize) for realize in blocks(branch.then_case))


DEPTHWISE_W = rand(3, 3, 144, 1)


def depthwise(size: int | tirx.Var) -> tvm.IRModule:
    """MobileNetV2's 56x56 stage's depthwise convolution (3x3, 144 channels, 'SAME', ReLU6)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([1, size, size, 144], "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(DEPTHWISE_W), padding=[1, 1, 1, 1], groups=144,
                                           data_layout="NHWC", kernel_layout="HWOI"))
            out = bb.emit_output(relax.op.clip(y, 0.0, 6.0))
        bb.emit_func_output(out)
    return bb.get()


def test_a_depthwise_convolution_over_an_image_of_any_size_runs_its_full_tiles_without_checks() -> None:
    """The depthwise rule's tiles (several output pixels of one vector of channels) kept a check per
    pixel over an image of any width: 113 against 58 us for the static build, 68 unswitched."""
    func = kernel(depthwise(tirx.Var("s", "int64")))
    assert func.attrs["tfcheck.schedule_rule"] == "schedule_depthwise"
    branch = tiles_loop(func).body
    assert isinstance(branch, tirx.IfThenElse)
    assert not any(checked(realize) for realize in blocks(branch.then_case))
    vm = relax.VirtualMachine(compile_cpu(apply_default_schedules(depthwise(tirx.Var("s", "int64")), TARGET), TARGET),
                              tvm.cpu())
    for size in (1, 5, 9):
        x = rand(1, size, size, 144)
        padded = np.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)])
        expected = sum(padded[:, dy:dy + size, dx:dx + size, :] * DEPTHWISE_W[dy, dx, :, 0]
                       for dy in range(3) for dx in range(3))
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), np.clip(expected, 0.0, 6.0))


def test_static_kernels_are_left_alone() -> None:
    func = kernel(dense(8, W, B))
    assert not isinstance(tiles_loop(func).body, tirx.IfThenElse)
    assert unswitch_partial_tiles(func).same_as(func)


@pytest.fixture(scope="module")
def compiled_symbolic_dense():  # noqa: ANN201 - a callable over NumPy arrays
    """The symbolic dense layer, scheduled and compiled once for the tests below."""
    vm = relax.VirtualMachine(compile_cpu(apply_default_schedules(dense(tirx.Var("batch", "int64"), W, B), TARGET),
                                          TARGET), tvm.cpu())
    return lambda x: vm["main"](tvm.runtime.tensor(x)).numpy()


@pytest.mark.parametrize("rows", [1, 3, 4, 7, 8, 9, 13, 17])
def test_every_batch_size_around_the_tile_gets_numpy_results(rows: int, compiled_symbolic_dense) -> None:
    x = rand(rows, 128)
    check(compiled_symbolic_dense(x), np.maximum(x @ W + B, 0))


def test_rows_of_a_full_tile_equal_the_same_rows_computed_alone(compiled_symbolic_dense) -> None:
    """Full tiles, half tiles and single rows sum in the same order: bit for bit the same."""
    x = rand(13, 128)
    together = compiled_symbolic_dense(x)
    alone = np.concatenate([compiled_symbolic_dense(x[row:row + 1]) for row in range(13)])
    np.testing.assert_array_equal(together, alone)


def test_avx2_tiles_4_rows_in_halves_of_2_with_numpy_results() -> None:
    """With 16 vector registers the tile has 4 rows (the static batch-8 tile there): its partial
    tile runs in halves of 2 rows, then single rows."""
    avx2 = named_target("znver3")
    mod = dense(tirx.Var("batch", "int64"), W, B)
    branch = tiles_loop(kernel(mod, avx2)).body
    assert isinstance(branch, tirx.IfThenElse) and len(branch.else_case.seq) == 2
    skip_unless_runnable(avx2)
    vm = relax.VirtualMachine(compile_cpu(apply_default_schedules(mod, avx2), avx2), tvm.cpu())
    for rows in (1, 2, 3, 5, 7):
        x = rand(rows, 128)
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), np.maximum(x @ W + B, 0))
