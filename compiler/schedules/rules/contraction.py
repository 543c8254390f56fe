"""The rule for reductions whose innermost output axis is contiguous: matmul, conv2d, depthwise, pooling.

All of them are ``out[..., rows, cols] = reduce over r of f(inputs)`` where ``cols`` (the output
channels for NHWC convolutions, N for matmul) is the last axis of the output and of at least one
input. The rule builds the classic CPU micro-kernel around that:

- a register tile of ``rows x cols`` accumulators (``cols`` a few whole vectors), kept in registers
  by computing it into a small intermediate and unrolling over ``rows``;
- all reduction loops between the outer (parallel) loops and the register tile;
- the bias/activation epilogue computed right after each tile, while it is still in cache;
- outer tiles fused into one loop, split over the cores;
- the zero padding read in place: a pad by nothing (1x1 and 'valid' convolutions) is inlined,
  which saved 2-5% of ResNet50's and MobileNetV2's time, and a real padding too, as a bound check
  on the input's loads, which spares a pass over the input on every call; other producers (casts)
  are left as their own (parallel, vectorised) loops.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx
from tvm.target import Target

from tfcheck.compiler.schedules import blocks, cpu
from tfcheck.compiler.schedules.lowering import over_cores
from tfcheck.compiler.schedules.rules import fallback
from tfcheck.compiler.schedules.tiling import TileSize, column_block, register_tile, vector_width

SBlockRV = s_tir.schedule.SBlockRV
LoopRV = s_tir.schedule.LoopRV

# Multiply-adds (iterations of the reduction block at the smallest sizes: `blocks.iterations`) below
# which a kernel runs serially: about 5 us of work on one Zen 5 core, twice the thread pool's round
# trip on a quiet machine. Below it the parallel loop lost at every size measured (a 32x64x64 matmul: 1.7-4.6 us
# against 1.5 us serially), and on a loaded machine a parallel region can wait a scheduler time
# slice for a descheduled worker: the token model at batch 1 took 20-30 ms a call (docs/benchmarks.md).
PARALLEL_MIN_WORK = 1 << 19

# Bytes read (a symbolic extent as 1) from which a kernel runs over the cores whatever its
# multiply-adds: a pooling or a mean does a load per iteration and nothing else. The benchmark
# CNN's max pooling (1 MB, 262k iterations) and mean (512 KB) ran serially, reading half of their
# input from the other core's cache; split, the CNN took 9-12% less. Means of 245-392 KB
# (MobileNetV2's, ResNet50's) lost 0.5-1.5 us split (docs/schedules.md, "Pooling and means over the cores").
PARALLEL_MIN_BYTES = 512 << 10

# Weights up to this many bytes never keep the column tiles outside the rows (`_rows_first`): both
# cores reading all of them costs little.
SMALL_WEIGHTS = 256 << 10

# The size a symbolic rows axis (a batch, an image's width, a sequence of any length) is tiled for,
# as a static axis of that size would be: its divisors let the tile take 7 rows, the tile of the
# image widths of a 224x224 model (112, 56, 28, 14, 7) and of the 128- and 256-token sequences'
# static builds, or 4 or 8. Tiled for 8 (the batch-8 tile, docs/benchmarks.md "MLP at batch 8"),
# MobileNetV2's 7x7x320 -> 1280 convolution over an image of any size took a 2 x 5-vector tile and
# 132 us at 224x224 against 79 us static; with 56, 79 us (docs/schedules.md, "Images of any size").
SYMBOLIC_ROWS = 56


def main_block(sch: s_tir.Schedule) -> SBlockRV | None:
    """The single reduction block of the function, when its shape fits the micro-kernel."""
    reductions = [b for b in blocks.child_blocks(sch) if blocks.is_reduction(sch, b)]
    if len(reductions) != 1:
        return None
    main = reductions[0]
    kinds = blocks.iter_kinds(sch, main)
    loops = sch.get_loops(main)
    if len(loops) != len(kinds) or "RS" in kinds or not kinds.startswith("S"):
        return None
    # Symbolic extents (a batch of any size) are allowed on the outer spatial loops, where a tile
    # split leaves a bound check per row, and on the reduction, which the tile runs whole; the
    # columns, cut into whole vectors, must be static.
    spatial = kinds.count("S")
    if blocks.extent(sch, loops[spatial - 1]) is None:
        return None
    return main if _cols_axis_is_contiguous(sch.get(main)) else None


def _cols_axis_is_contiguous(block: tirx.SBlock) -> bool:
    """Whether the last spatial iterator indexes the last axis of the output and of some input."""
    spatial = [iv.var for iv in block.iter_vars if iv.iter_type != tirx.IterVar.CommReduce]
    cols = spatial[-1]
    if not block.writes or not blocks.is_var(blocks.innermost_index(block.writes[0]), cols):
        return False
    return any(blocks.is_unit_stride(blocks.innermost_index(read), cols) for read in block.reads)


def _rows_loop(sch: s_tir.Schedule, main: SBlockRV, spatial: list[LoopRV]) -> int | None:
    """Index of the spatial loop to tile into register rows: the innermost one (before cols) longer
    than 1; or the loop right outside it, static and longer than 1, where the window runs along the
    innermost and not along that one (`blocks.windowed`: a 1x7 convolution's width and height).

    A padding read in place is a bound check on the window's axis: with the rows along it, one
    per row in every step of the reduction. A 1x7 convolution over its width (17x17x192 -> 192,
    6 x 2-vector tiles) then branched six times a step, LLVM spilled accumulators around the
    branches with AVX2's 16 registers, and it ran at half the rate of its 7x1 twin: 2.6-2.9
    against 1.4-1.5 ms on one core (issue 39). Over its height the check is one per tile
    (`channel_padding` pads that axis for the tile, not the width)."""
    longer = [index for index in range(len(spatial) - 1)
              if blocks.extent(sch, spatial[index]) is None or blocks.extent(sch, spatial[index]) > 1]
    if not longer:
        return None
    in_window = _in_window(sch, main, spatial)
    innermost, outside = longer[-1], longer[-1] - 1
    if in_window(innermost) and outside in longer and blocks.extent(sch, spatial[outside]) and not in_window(outside):
        return outside
    return innermost


def _in_window(sch: s_tir.Schedule, main: SBlockRV, spatial: list[LoopRV]) -> Callable[[int], bool]:
    """Whether the spatial loop at an index binds an iterator the window runs along (`blocks.windowed`)."""
    realize = blocks.realize(sch, main)
    along = [value for iter_var, value in zip(realize.block.iter_vars, realize.iter_values)
             if any(iter_var.var.same_as(var) for var in blocks.windowed(realize.block))]
    return lambda index: any(value.same_as(sch.get(spatial[index]).loop_var) for value in along)


def _tile_registers(sch: s_tir.Schedule, main: SBlockRV, spatial: list[LoopRV], rows_index: int | None,
                    target: Target) -> int:
    """The vector registers the register tile may fill: the target's, less one where its rows run
    along the window over a padding read in place (a 3x3 'same' convolution over its width), whose
    check on each row's loads needs a register of its own. With AVX2's 16, the 4 x 3-vector tile
    that filled them ran InceptionV3's 8x8x448 -> 384 3x3 convolution at 56 GFLOP/s, 3.57 ms on one
    core, and 4 x 2 vectors at 81, 2.46 ms; a 28x28x128 -> 192 one 5.26 against 3.63 ms; the tiles
    without such checks (1x1, 1x3 over their height, 3x1) were 11-19% slower with one less
    (docs/schedules.md, "Tiles that fit the registers")."""
    registers = cpu.vector_registers(target)
    if rows_index is None or not _in_window(sch, main, spatial)(rows_index) or not _reads_padding(sch.get(main)):
        return registers
    return registers - 1


def _reads_padding(block: tirx.SBlock) -> bool:
    """Whether the block reads a padding in place: its value has a load under a bound check
    (`if_then_else`, what inlining a padding leaves)."""
    return isinstance(block.body, tirx.BufferStore) and _has_bound_check(block.body.value)


def _has_bound_check(expr: tvm.ir.expr.Expr) -> bool:
    """Whether an `if_then_else` appears in ``expr`` (through calls, arithmetic and casts)."""
    if isinstance(expr, tvm.ir.Call):
        return getattr(expr.op, "name", None) == "prim.if_then_else" or any(map(_has_bound_check, expr.args))
    children = [getattr(expr, name) for name in ("a", "b", "value") if isinstance(getattr(expr, name, None), tvm.ir.expr.Expr)]
    return any(map(_has_bound_check, children))


def _written_shape(sch: s_tir.Schedule, block: SBlockRV) -> list | None:
    """The shape of the one buffer ``block`` writes, or None when it writes several."""
    writes = sch.get(block).writes
    return list(writes[0].source.shape) if len(writes) == 1 else None


def _is_crop(block: tirx.SBlock, shape: list) -> bool:
    """Whether ``block`` maps the leading part of a ``shape`` tensor elementwise (a slice that drops
    the columns a padded convolution computed extra, with what follows it): each output element
    comes from the element at the same position, the last axis, the tile's vectors, is whole, and
    no axis is longer than ``shape``'s. (A zero padding after the kernel, MobileNetV2's
    `ZeroPadding2D` after an expansion, also reads each element in place, but its extra row and
    column lie outside every tile: taken for a crop, they were never written.)"""
    store = block.body
    axes = [iv.var for iv in block.iter_vars]
    if not isinstance(store, tirx.BufferStore) or len(axes) != len(shape) or len(store.indices) != len(shape):
        return False
    analyzer = sym.Analyzer()
    if not all(analyzer.can_prove(written <= whole) for written, whole in zip(store.buffer.shape, shape)):
        return False
    if any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars):
        return False
    if not tvm_ffi.structural_equal(store.buffer.shape[-1], shape[-1]):
        return False

    def in_place(regions: list) -> bool:
        return all(blocks.is_var(r.min, axis) and isinstance(r.extent, tirx.IntImm) and r.extent.value == 1
                   for r, axis in zip(regions, axes))

    return all(blocks.is_var(index, axis) for index, axis in zip(store.indices, axes)) and any(
        tvm_ffi.structural_equal(list(read.source.shape), shape) and in_place(read.region) for read in block.reads)


def _consumers_to_epilogue(sch: s_tir.Schedule, main: SBlockRV, target: Target) -> SBlockRV | None:
    """Inline the elementwise chain after ``main`` into its last block and return that block.

    Only consumers of ``main``'s own shape join the epilogue, and crops (`_is_crop`) with the
    chain of each one's shape after it: a convolution padded to a wider output (`channel_padding.py`)
    then writes only its real columns from each tile, instead of writing the whole padded output
    to a buffer of its own for a second pass (28 MB for keras.io's CT-scan classifier's second
    layer; docs/schedules.md, "Slices in the tile"). A crop of a crop is a crop: a width padded for
    AVX-512's tiles, then sliced by the model, gives two (an 11x11 'valid' 3x3 convolution sliced
    to 7x8 wrote its whole output in a pass of its own with AVX-512, in the tile with AVX2). A
    consumer that broadcasts the result over a larger tensor (squeeze-and-excitation: a 1x1 convolution of the pooled
    ``[1, 1, 1, C]`` tensor, a sigmoid, then a multiply with the ``[1, H, W, C]`` feature map)
    would be computed under every register tile with all its loops unrolled: ``H x W x C / lanes``
    copies of the sigmoid, which took LLVM minutes and gigabytes on EfficientNetB0 (see
    docs/schedules.md). Those consumers get the elementwise schedule after the kernel instead.
    Raises ScheduleError when a consumer is not inlinable, which makes the rule give up.
    """
    after = blocks.child_blocks(sch)
    names = [sch.get(b).name_hint for b in after]
    tail = after[names.index(sch.get(main).name_hint) + 1 :]
    shape, epilogue = _written_shape(sch, main), 0
    while epilogue < len(tail):
        written = _written_shape(sch, tail[epilogue])
        if written is None or not tvm_ffi.structural_equal(written, shape):
            if written is None or not _is_crop(sch.get(tail[epilogue]), shape):
                break
            shape = written
        epilogue += 1
    for block in tail[epilogue:]:
        fallback.schedule_block(sch, block, target)
    for block in tail[: epilogue - 1]:
        sch.compute_inline(block)
    return tail[epilogue - 1] if epilogue else None


@dataclass(frozen=True)
class Tiled:
    """The loops `_tile` leaves around the register tile of ``main``."""

    fused: LoopRV  # the outer tiles, fused: the loop split over the cores
    block: LoopRV | None  # the column tiles of one cache block (`_column_block`), under `fused`
    rows: LoopRV | None  # the register tile's rows
    cols: LoopRV  # the register tile's columns
    tiles: int  # iterations of `fused` at the smallest sizes (`blocks.smallest_extent`)

    @property
    def depth(self) -> int:
        """Loops above the reduction loops: where a tile's epilogue and its accumulator's zeroing go."""
        return 1 if self.block is None else 2


def _tile(sch: s_tir.Schedule, main: SBlockRV, target: Target, tile_size: TileSize) -> Tiled:
    """Tile ``main`` and order the loops around the tile: the outer tiles, a cache block of column
    tiles where the columns run outside the rows, the reduction loops, the register tile."""
    kinds = blocks.iter_kinds(sch, main)
    loops = sch.get_loops(main)
    spatial, reduction = loops[: kinds.count("S")], loops[kinds.count("S") :]
    lanes = cpu.vector_lanes(target, blocks.dtype_bits(sch, main))
    rows_index = _rows_loop(sch, main, spatial)
    rows_extent = blocks.extent(sch, spatial[rows_index]) if rows_index is not None else 1
    # A symbolic rows axis gets the tile of SYMBOLIC_ROWS rows; its bound check per row comes out
    # of every full tile afterwards (unswitch.py).
    rows, cols = tile_size(rows_extent or SYMBOLIC_ROWS, blocks.extent(sch, spatial[-1]), lanes,
                           _tile_registers(sch, main, spatial, rows_index, target))
    cols_outer, cols_inner = sch.split(spatial[-1], factors=[None, cols])
    others = []
    rows_inner = None
    for index, loop in enumerate(spatial[:-1]):
        if index == rows_index:
            rows_outer, rows_inner = sch.split(loop, factors=[None, rows])
            others.append(rows_outer)
        else:
            others.append(loop)
    block = None
    if _rows_first(sch.get(main), target):
        outer = [*others, cols_outer]
    else:
        size = _column_block(sch.get(main), blocks.extent(sch, cols_outer), target)
        cols_outer, block = sch.split(cols_outer, factors=[None, size]) if size > 1 else (cols_outer, None)
        outer = [cols_outer, *others]
    inner = [rows_inner] if rows_inner is not None else []
    sch.reorder(*outer, *([block] if block is not None else []), *reduction, *inner, cols_inner)
    tiles = math.prod(blocks.smallest_extent(sch, loop) for loop in outer)
    return Tiled(sch.fuse(*outer), block, rows_inner, cols_inner, tiles)


def _weights_and_inputs(block: tirx.SBlock) -> tuple[list[tirx.Buffer], list[tirx.Buffer]]:
    """The buffers ``block`` reads that no output row indexes (the weights: each row reads all of
    them) and those it does (the inputs)."""
    spatial = [iv.var for iv in block.iter_vars if iv.iter_type != tirx.IterVar.CommReduce]
    output = block.writes[0].source
    reads = [read for read in block.reads if not read.source.same_as(output)]
    by_rows = [any(blocks.indexes_by(axis.min, var) for axis in read.region for var in spatial[:-1]) for read in reads]
    return ([read.source for read, rows in zip(reads, by_rows) if not rows],
            [read.source for read, rows in zip(reads, by_rows) if rows])


def _column_block(block: tirx.SBlock, col_tiles: int, target: Target) -> int:
    """Column tiles per cache block (`tiling.column_block`: their weights in half of a core's L2,
    each row tile of the input read once per block); one where a size is symbolic.

    With the columns outside, each core's column tiles read the whole input once each: Xception's
    19x19x728 input is 1 MB, twice a Zen 3 core's L2, so every tile read it from L3."""
    weights, inputs = _weights_and_inputs(block)
    weight_bytes = [blocks.static_bytes(buffer) for buffer in weights]
    input_bytes = [blocks.static_bytes(buffer) for buffer in inputs]
    if not weight_bytes or None in weight_bytes or None in input_bytes:
        return 1
    return column_block(col_tiles, max(weight_bytes) // col_tiles, max(input_bytes, default=0), cpu.l2_bytes(target))


def _rows_first(block: tirx.SBlock, target: Target) -> bool:
    """Whether the parallel loop over the tiles takes the rows (pixels) outside the column tiles,
    so each core computes whole rows of the output instead of a share of its columns (channels).

    The parallel loop runs in one contiguous chunk per core. With the column tiles outside, core 0
    wrote the first channels of every pixel and core 1 the others, and the next kernel, splitting
    its output the same way or by rows, read half of its input from the other core's cache:
    MobileNetV2's depthwise and 1x1 convolutions ran back to back about twice as long as each
    alone. Rows outside keep each core on the same part of the image from kernel to kernel. But
    then each core reads all the weights instead of its share: where the weights (an input not
    indexed by the rows) are larger than the output and than ``SMALL_WEIGHTS``, the columns stay
    outside (rows outside everywhere made ResNet50 take 42.7-54.2 ms against 32.8-41.9). With this
    rule, in one process: MobileNetV2 3.91 / 3.94 ms against 4.40 / 4.40, ResNet50 30.8 / 29.7
    against 33.1 / 34.9, the encoder block 0.197 / 0.201 against 0.206 / 0.209, the others level
    (docs/schedules.md, "Rows outside"). Weights over half of a core's L2 (`cpu.l2_bytes`) keep the
    columns outside too, whatever the output: they would pass through the L2 again every few pixels
    (a 3x3 convolution of 256 to 256 channels at 64x64, 2.3 MiB of weights, AdaIN's: 29-34 ms with
    the rows outside, 17-19 ms with the columns; docs/build.md, "Users' models"). Half, because the
    input and output pass through it too: 1 MiB on the 2 MiB Xeons this was measured on, 256 KiB on
    a Zen 3 (issue 39). An output of symbolic size (an image or a batch of any size) takes
    the rows outside where the weights are small, whatever its size would be: AdaIN's 3x3
    convolutions of 64 channels at 256x256 took twice as long with the columns outside in its
    artifact for images of any size as in the 256x256 one (docs/schedules.md, "Images of any size").
    """
    weights, _ = _weights_and_inputs(block)
    sizes = [blocks.static_bytes(buffer) for buffer in weights]
    if any(size is None for size in sizes):
        return False
    largest = max(sizes, default=0)
    written = blocks.static_bytes(block.writes[0].source)
    if written is None:
        return largest <= SMALL_WEIGHTS
    return largest <= max(written, SMALL_WEIGHTS) and largest <= cpu.l2_bytes(target) // 2


class TileOfUnknownExtent(ValueError):
    """A register tile whose loop has a symbolic extent: the contraction rule does not fit the
    function (`apply.choose_schedule` tries the next rule)."""


def _vectorize_tile(sch: s_tir.Schedule, tile: list[LoopRV], lanes: int) -> None:
    """Vectorise the last loop of a register tile by whole vectors and unroll the loops above it.

    Every access to the accumulators then has a constant index, so LLVM keeps them in registers;
    a vector wider than the hardware's (e.g. 48 floats) would instead be shuffled element by element.
    A tile loop of symbolic extent means the rule does not fit (`TileOfUnknownExtent`): over
    images of any size, the write-back of a 3x3 pooling at stride 2 computed per tile got its
    extent from `w - 3`, which TVM's analyzer cannot prove non-negative, as a `max - min` of two
    tile bounds, and its buffer a shape to match: unrolled, the build failed ("Cannot unroll
    non-constant loop": Keras's ResNet50, DenseNet121 and InceptionV3 for images of any size);
    left a loop, it wrote outside the buffer.
    """
    *rest, cols = tile
    width = vector_width(blocks.extent(sch, cols), lanes)
    if width < blocks.extent(sch, cols):
        vectors, cols = sch.split(cols, factors=[None, width])
        rest.append(vectors)
    if width > 1:
        sch.vectorize(cols)
    for loop in rest:
        if blocks.extent(sch, loop) is None:
            raise TileOfUnknownExtent(f"a tile loop of {sch.get(loop).extent} iterations")
        sch.unroll(loop)


def _schedule_epilogue(sch: s_tir.Schedule, main: SBlockRV, tiled: Tiled, target: Target) -> None:
    """Compute the epilogue (or a plain write-back) per tile, vectorised along its last axis."""
    epilogue = _consumers_to_epilogue(sch, main, target)
    if epilogue is None:
        epilogue = sch.cache_write(main, 0, "global")
    # The accumulator stays "global": TVM (LowerTVMBuiltin) puts only a "global" buffer under 1 KiB
    # on the stack, where LLVM's SROA turns it into registers. Any other buffer, "local" included,
    # is a TVMBackendAllocWorkspace call, and under a parallel loop one per tile, in the parallel
    # closure: that made the depthwise kernel 2.4x slower split over the cores even on one thread
    # (docs/schedules.md, "Depthwise convolutions").
    sch.reverse_compute_at(epilogue, tiled.block if tiled.block is not None else tiled.fused, preserve_unit_loops=True)
    _vectorize_tile(sch, sch.get_loops(epilogue)[tiled.depth:], cpu.vector_lanes(target, blocks.dtype_bits(sch, epilogue)))


def _schedule_producers(sch: s_tir.Schedule, main: SBlockRV, target: Target) -> None:
    """Inline the copies and the paddings before ``main`` (the kernel reads its input in place,
    the padding as a bound check) and give the other blocks (casts) the elementwise schedule.

    A padded copy was a pass over the whole input on every call: MobileNetV2's first convolution
    (3x3, stride 2, 224x224x3) took 157 us with it and 86 us reading in place, ResNet50's 7x7
    stem 982 against 932 us, the 3x3 convolutions of ResNet's shapes the same or 1-2% less
    (docs/schedules.md, "Padding read in place").
    """
    for block in blocks.child_blocks(sch):
        if sch.get(block).name_hint == sch.get(main).name_hint:
            return
        if blocks.is_identity_copy(sch.get(block)) or (blocks.is_padding(sch.get(block))
                                                       and _pads_in_place(sch, main, block, target)):
            sch.compute_inline(block)
        else:
            fallback.schedule_block(sch, block, target)


# Multiply-adds per element of a padded input from which a padded copy pays with 16 vector registers.
PADDED_COPY_MIN_REUSE = 256


def _pads_in_place(sch: s_tir.Schedule, main: SBlockRV, padding: SBlockRV, target: Target) -> bool:
    """Whether ``main`` reads ``padding``'s input in place (a bound check on each load) rather than
    from a padded copy written on each call: in place, but with 16 vector registers (AVX2) for a
    kernel of static sizes that does at least `PADDED_COPY_MIN_REUSE` multiply-adds per element of
    the input.

    The checks cost a register and instructions on every row of every step of the reduction, and
    on a Zen 3 core InceptionV3's 35x35x48 -> 64 5x5 'same' convolution ran at 63 GFLOP/s in place
    and 95 from a copy, its 3x3 and 1x7 ones 5-14% faster from a copy, ResNet's 7x7 stem 6.2 against
    3.4 ms; MobileNetV2's first convolution (3 channels, stride 2, 72 multiply-adds per input
    element) 0.36 against 0.50 ms, where the copy is a pass over an input each element of which is
    used little. With AVX-512's 32 registers the checks were the cheaper (docs/schedules.md,
    "Padding read in place")."""
    if cpu.vector_registers(target) >= 32:
        return True
    loops = sch.get_loops(main)
    source = blocks.static_shape(sch.get(padding).reads[0].source)
    if source is None or any(blocks.extent(sch, loop) is None for loop in loops):
        return True
    return blocks.iterations(sch, loops) < PADDED_COPY_MIN_REUSE * math.prod(source)


def _pack_weights(sch: s_tir.Schedule, main: SBlockRV, func: tirx.PrimFunc, cols: int) -> None:
    """Read constant weights from a copy packed as ``[N / cols, ..., cols]``: one sequential strip per tile.

    Row-major weights are read as ``cols``-wide pieces ``N`` elements apart, which the prefetchers
    follow badly once ``N`` is a few KB. The copy is a MetaSchedule layout-rewrite block:
    ``SplitLayoutRewritePreproc`` moves it out and ``FoldConstant`` runs it once at build time.
    Only the parameters that ``AttachAttrLayoutFreeBuffers`` marked (Relax constants) are packed.
    """
    free = {int(i) for i in (func.attrs.get("layout_free_buffers", []) if func.attrs else [])}
    params = [func.params[i].name for i in free]
    block = sch.get(main)
    for index, read in enumerate(block.reads):
        if read.source.name not in params or read.source.shape[-1] % cols:
            continue
        copy = sch.cache_read(main, index, "global")
        sch.transform_layout(main, ("read", index), lambda *axes: (axes[-1] // cols, *axes[:-1], axes[-1] % cols))
        sch.annotate(copy, blocks.PACKING_ANNOTATION, True)
        return


@dataclass(frozen=True)
class MicroKernel:
    """What differs between the micro-kernels of matmul/convolution and of depthwise convolution."""

    tile_size: TileSize  # (rows, cols) of the register tile, from (rows extent, cols extent, lanes, budget)
    inline_producers: bool  # every producer inlined, rather than the copies and paddings alone
    unroll_reduction: bool  # the reduction loops (a depthwise window) unrolled
    parallel: bool  # whether the tiles may be split over the cores


def schedule_micro_kernel(sch: s_tir.Schedule, main: SBlockRV, func: tirx.PrimFunc, target: Target,
                          kernel: MicroKernel) -> s_tir.Schedule:
    """Schedule ``func`` (in ``sch``) as a register-tiled micro-kernel around its reduction block ``main``."""
    if kernel.inline_producers:
        for block in blocks.child_blocks(sch)[: _position(sch, main)]:
            sch.compute_inline(block)
    else:
        _schedule_producers(sch, main, target)
    work = blocks.iterations(sch, sch.get_loops(main))
    enough = work >= PARALLEL_MIN_WORK or blocks.bytes_read(sch.get(main)) >= PARALLEL_MIN_BYTES
    tiled = _tile(sch, main, target, kernel.tile_size)
    rows_inner = tiled.rows
    reduction = sch.get_loops(main)[tiled.depth : -2 if rows_inner is not None else -1]
    _pack_weights(sch, main, func, blocks.extent(sch, tiled.cols))
    _schedule_epilogue(sch, main, tiled, target)
    lanes = cpu.vector_lanes(target, blocks.dtype_bits(sch, main))
    _vectorize_tile(sch, [rows_inner, tiled.cols] if rows_inner is not None else [tiled.cols], lanes)
    if kernel.unroll_reduction:
        for loop in reduction:
            sch.unroll(loop)
    # Parallel when there are several tiles and enough work at the smallest size, as the static
    # build decides at that size; over symbolic sizes, otherwise, when there is at run time
    # (`over_cores.py`): a 256 -> 10 matmul of a symbolic batch, whose only tiles are its rows, ran
    # 3-5x slower split over the cores at batch 8 (the thread pool's wake-up against 2 us of work)
    # than serially (docs/benchmarks.md).
    if kernel.parallel and cpu.num_cores(target) > 1:
        over_cores.split_over_cores(sch, tiled.fused, tiled.tiles > 1 and enough, PARALLEL_MIN_WORK)
    # After vectorize: the update block without its init no longer counts as a reduction block.
    sch.decompose_reduction(main, sch.get_loops(main)[tiled.depth])
    if rows_inner is not None:
        _accumulator_in_whole_tiles(sch, main, rows_inner)
    return sch


def _accumulator_in_whole_tiles(sch: s_tir.Schedule, main: SBlockRV, rows_inner: LoopRV) -> None:
    """Give the accumulator buffer a rows axis of whole tiles where that axis is symbolic:
    ``(..., w, ...)`` becomes ``(..., w // rows, w % rows, ...)``, ``ceil(w / rows) * rows`` rows.

    TVM's lowering sizes each tile's accumulator from the region it touches, cut to the buffer's
    bounds (``CompactBufferAllocation``): ``min(w, 4)`` rows for a tile of 4 over an image of any
    width, a size known only at run time, so LLVM could not keep the tile in registers. With the
    axis in whole tiles the region is one tile, 4 rows: MobileNetV2's first 1x1 expansion over an
    image of any size (112x112x16 -> 96) took 261-340 us on one thread against 166-176 for the
    112x112 build, and 158 us with the accumulator so (docs/schedules.md, "Images of any size").
    Only an accumulator the function allocates changes shape; an output keeps the caller's.
    """
    rows = blocks.extent(sch, rows_inner)
    write = sch.get(main).writes[0]
    allocated = sch.mod["main"].body.block.alloc_buffers
    if rows is None or not any(write.source.same_as(buffer) for buffer in allocated):
        return
    axis = _axis_of_loop(blocks.realize(sch, main), write, sch.get(rows_inner).loop_var)
    if axis is None or isinstance(write.source.shape[axis], tirx.IntImm):
        return
    sch.transform_layout(main, ("write", 0),
                         lambda *index: (*index[:axis], index[axis] // rows, index[axis] % rows, *index[axis + 1:]),
                         assume_injective_transform=True)


def _axis_of_loop(realize: s_tir.SBlockRealize, region: tirx.BufferRegion, loop_var: tirx.Var) -> int | None:
    """The axis of ``region`` indexed by the one block iterator that ``loop_var`` binds; None when
    no single iterator or axis is."""
    bound = [iter_var.var for iter_var, value in zip(realize.block.iter_vars, realize.iter_values)
             if loop_var in tirx.analysis.undefined_vars(value)]
    axes = [index for index, axis in enumerate(region.region) if len(bound) == 1 and blocks.is_var(axis.min, bound[0])]
    return axes[0] if len(axes) == 1 else None


def _position(sch: s_tir.Schedule, block: SBlockRV) -> int:
    """Index of ``block`` among the function's top-level blocks."""
    return [sch.get(b).name_hint for b in blocks.child_blocks(sch)].index(sch.get(block).name_hint)


CONTRACTION = MicroKernel(register_tile, inline_producers=False, unroll_reduction=False, parallel=True)


def schedule_contraction(func: tirx.PrimFunc, target: Target,
                         kernel: MicroKernel = CONTRACTION) -> s_tir.Schedule | None:
    """Schedule ``func`` with the register-tiled micro-kernel, or None when it does not fit the pattern
    (``kernel`` is for benchmarks that compare other choices)."""
    sch = s_tir.Schedule(func)
    main = main_block(sch)
    return None if main is None else schedule_micro_kernel(sch, main, func, target, kernel)
