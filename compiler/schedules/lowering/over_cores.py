"""Which loops run over the cores: decided at build time where the sizes are known, at run time where not.

A kernel is split over the cores when its work pays for the thread pool's wake-up (the rules'
thresholds: `contraction.PARALLEL_MIN_WORK`, `fallback.PARALLEL_MIN_ITERATIONS`). Over sizes known
only at run time (a batch, an image, a sequence of any size) the rules estimate the work at the
smallest sizes the build allows (`blocks.smallest_extent`), which keeps a kernel serial at every
size when it is too small at its smallest: the symbolic token model ran at batches 64 and 256 the
serial kernels of batch 1, taking 2.07x the time of its static builds there, and MobileNetV2's 1x1
convolution of 64 -> 384 channels in its 14x14 stage, 3x3 for an image of 48 pixels, ran on one core
at 224, twice its time in the 224x224 build.

So a rule marks such a loop (`split_over_cores`), and compiling the function gives it both versions
of the loop (`version_parallel_loops`, a pass of `apply.compile_cpu`, where tuned kernels replaying a
default schedule pass too): ``if <its work at run time reaches the threshold>`` the parallel loop,
else the same loop serial, as OpenMP's ``parallel if (...)`` does. The work is counted on the
scheduled TIR, one unit per element stored (a multiply-add of a reduction, an element of an
elementwise step) over each block's domain; the second copy of the loop costs code size, and a function whose copies would
go over the code-size budget keeps the build-time decision (serial).
"""

from __future__ import annotations

from collections.abc import Callable

import tvm_ffi
from tvm import s_tir, sym, tirx
from tvm.target import Target

from tfcheck.compiler.schedules import blocks, cpu
from tfcheck.compiler.schedules.budget import CODE_SIZE_BUDGET, code_size
from tfcheck.compiler.schedules.lowering.unswitch import fresh_definitions, loops_in, map_blocks, map_loops

# The annotation of a loop that runs over the cores only when the work under it reaches its value
# at run time (`split_over_cores`); `version_parallel_loops` replaces it with the two loops.
WHEN_ATTR = "tfcheck.parallel_when_work"


def split_over_cores(sch: s_tir.Schedule, loop: s_tir.schedule.LoopRV, enough: bool, threshold: int) -> None:
    """Run ``loop`` over the cores if the rule found the work ``enough`` at the smallest sizes;
    otherwise, where the loop nest has a symbolic extent, over the cores at run time when its work
    reaches ``threshold`` (the rule's own threshold); otherwise leave it serial."""
    if enough:
        sch.parallel(loop)
    elif has_symbolic_extent(sch.get(loop)):
        sch.parallel(loop)
        sch.annotate(loop, WHEN_ATTR, threshold)


def version_parallel_loops(func: tirx.PrimFunc, target: Target) -> tirx.PrimFunc:
    """``func`` with each loop marked by `split_over_cores` replaced by ``if <enough work>: <the
    loop over the cores> else: <the loop serial>``; each loop serial instead where the two copies
    would take the function over the code-size budget."""
    if not any(WHEN_ATTR in loop.annotations for loop in loops_in(func.body)):
        return func
    sizes = blocks.shape_vars(func)
    own = _own_buffers(func)
    serial_buffers: list[tirx.Buffer] = []
    body = _map_marked(func.body, lambda loop: _versioned(loop, sizes, own[loop.loop_var], serial_buffers))
    versioned = func.with_body(blocks.rebuilt(body, extra_buffers=tuple(serial_buffers)) if serial_buffers else body)
    if code_size(versioned, cpu.vector_lanes(target, 32)) <= CODE_SIZE_BUDGET:
        return versioned
    return func.with_body(_map_marked(func.body, _serial))


def work(stmt: tirx.Stmt) -> tirx.PrimExpr:
    """Elements the blocks under ``stmt`` store, with the symbolic sizes as they are: for each block
    (its copies in the branches of an unswitched tile or a peeled row counted once), the
    iterations of its domain, and its outputs once more where it initialises them.

    Counted from the blocks' domains, not the loops' extents: a register tile of 7 pixels over an
    image 3 pixels wide runs 3 of them, and counting its loops said 7, enough to split MobileNetV2's
    6x6x64 -> 384 expansion over the cores (221k multiply-adds, under `PARALLEL_MIN_WORK`).
    """
    found: dict[str, tirx.PrimExpr] = {}

    def note(realize: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
        block = realize.block
        spatial = [iv for iv in block.iter_vars if iv.iter_type != tirx.IterVar.CommReduce]
        elements = _product(block.iter_vars)
        found.setdefault(block.name_hint, elements if block.init is None else elements + _product(spatial))
        return realize

    map_blocks(stmt, note)
    total = tirx.IntImm("int64", 0)
    for elements in found.values():
        total = total + elements
    return total


def _product(iter_vars: list[tirx.IterVar]) -> tirx.PrimExpr:
    """The iterations of a block over ``iter_vars``' domains."""
    result = tirx.IntImm("int64", 1)
    for iter_var in iter_vars:
        result = result * tirx.Cast("int64", iter_var.dom.extent)
    return result


def has_symbolic_extent(stmt: tirx.Stmt) -> bool:
    """Whether a loop in ``stmt`` (itself included) has a symbolic extent."""
    return any(not isinstance(loop.extent, tirx.IntImm) for loop in loops_in(stmt))


def _map_marked(stmt: tirx.Stmt, on_marked: Callable[[tirx.For], tirx.Stmt]) -> tirx.Stmt:
    """``stmt`` with ``on_marked`` applied to each loop carrying `WHEN_ATTR`."""
    return map_loops(stmt, lambda loop: on_marked(loop) if WHEN_ATTR in loop.annotations else loop)


def _versioned(loop: tirx.For, sizes: set[tirx.Var], own_buffers: list[tirx.Buffer],
               serial_buffers: list[tirx.Buffer]) -> tirx.Stmt:
    """``if <the loop has more than one iteration and its work reaches the mark>: <the loop over
    the cores> else: <the loop serial>``; the one loop when the condition is known at build time,
    and the serial loop when it reads more than the function's sizes (an inner extent that varies
    with the loop's index).

    The serial copy gets its own copy of each buffer of the root block that only this loop uses
    (``own_buffers``; the copies go to ``serial_buffers``). TVM sizes and places an allocation
    where all its uses meet: a tile's accumulators used by both copies met at the root, as one
    buffer the size of the output in memory instead of a tile in registers, and their regions
    over the two copies made TVM 0.27's code generator fail on a U-Net for images of any size on
    AVX2 ("Binding of variable rmod ... conflicts with previous binding")."""
    threshold = int(loop.annotations[WHEN_ATTR])
    condition = sym.Analyzer().simplify(tirx.And(loop.extent > 1, work(loop) >= threshold))
    if isinstance(condition, tirx.IntImm):
        return _unmarked(loop, tirx.ForKind.PARALLEL) if condition.value else _serial(loop)
    if not set(tirx.analysis.undefined_vars(condition)) <= sizes:
        return _serial(loop)
    serial = _with_own_buffers(fresh_definitions(_serial(loop)), own_buffers, serial_buffers)
    return tirx.IfThenElse(condition, _unmarked(loop, tirx.ForKind.PARALLEL), serial)


def _own_buffers(func: tirx.PrimFunc) -> dict[tirx.Var, list[tirx.Buffer]]:
    """For each marked loop (by its variable), the buffers of the root block that only it uses: a
    tile's accumulators, not an intermediate another statement reads."""
    root = func.body
    marked = [loop for loop in loops_in(root) if WHEN_ATTR in loop.annotations]
    if not isinstance(root, s_tir.SBlockRealize):
        return {loop.loop_var: [] for loop in marked}
    allocated = list(root.block.alloc_buffers)

    def outside(loop: tirx.For) -> set[tirx.Buffer]:
        return _buffers_in(map_loops(root.block.body, lambda other: (
            tirx.Evaluate(0) if other.loop_var.same_as(loop.loop_var) else other)))

    def only_in(loop: tirx.For) -> list[tirx.Buffer]:
        used = _buffers_in(loop) - outside(loop)
        return [buffer for buffer in allocated if buffer in used]

    return {loop.loop_var: only_in(loop) for loop in marked}


def _buffers_in(stmt: tirx.Stmt) -> set[tirx.Buffer]:
    """The buffers ``stmt`` reads or writes."""
    found: set[tirx.Buffer] = set()

    def note(buffer: tirx.Buffer) -> tirx.Buffer:
        found.add(buffer)
        return buffer

    tvm_ffi.structural_map(stmt, (tirx.Buffer, note))
    return found


def _with_own_buffers(stmt: tirx.Stmt, buffers: list[tirx.Buffer], copies: list[tirx.Buffer]) -> tirx.Stmt:
    """``stmt`` with a new buffer of the same shape for each of ``buffers`` (added to ``copies``)."""
    renamed = {buffer: tirx.decl_buffer(buffer.shape, buffer.dtype, f"{buffer.name}_serial", strides=buffer.strides,
                                        elem_offset=buffer.elem_offset,
                                        scope=buffer.scope(), data_alignment=buffer.data_alignment,
                                        offset_factor=buffer.offset_factor)
               for buffer in buffers}
    copies.extend(renamed.values())
    return tvm_ffi.structural_map(stmt, (tirx.Buffer, lambda buffer: renamed.get(buffer, buffer)))


def _serial(loop: tirx.For) -> tirx.For:
    """The marked loop, serial."""
    return _unmarked(loop, tirx.ForKind.SERIAL)


def _unmarked(loop: tirx.For, kind: tirx.ForKind) -> tirx.For:
    """``loop`` of ``kind``, without `WHEN_ATTR`."""
    annotations = {key: value for key, value in loop.annotations.items() if key != WHEN_ATTR}
    return tirx.For(loop.loop_var, loop.min, loop.extent, kind, loop.body, loop.thread_binding, annotations,
                    loop.step)
