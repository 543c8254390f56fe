"""Read-only questions about the blocks of a PrimFunc that the schedule rules ask before changing it."""

from __future__ import annotations

import math

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx
from tvm.sym.pattern import detect_linear_equation

SBlockRV = s_tir.schedule.SBlockRV

# The annotation of a block that repacks a constant weight: SplitLayoutRewritePreproc moves such a
# block into a function of its own, which FoldConstant runs at build time.
PACKING_ANNOTATION = "meta_schedule.layout_rewrite_preproc"

# The PrimFunc attribute giving symbolic sizes their smallest values, {name: size}: the build's
# `dims=` minimums, which `apply.schedule_module` copies from the Relax function's
# `tir_var_lower_bound`.
SMALLEST_SIZES_ATTR = "tfcheck.smallest_sizes"


def child_blocks(sch: s_tir.Schedule) -> list[SBlockRV]:
    """The top-level blocks of the function, in program order."""
    return list(sch.get_child_blocks(sch.get_sblock("root")))


def is_reduction(sch: s_tir.Schedule, block: SBlockRV) -> bool:
    """Whether the block has a reduction iterator (matmul, conv, pooling, sums)."""
    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in sch.get(block).iter_vars)


def iter_kinds(sch: s_tir.Schedule, block: SBlockRV) -> str:
    """'S'/'R' per block iterator, e.g. 'SSSSRRR' for conv2d."""
    return "".join("R" if iv.iter_type == tirx.IterVar.CommReduce else "S" for iv in sch.get(block).iter_vars)


def innermost_index(region: tvm.ir.TensorRegion) -> tirx.Expr | None:
    """The index expression of a single-element access along the buffer's last (contiguous) axis."""
    if not region.region:
        return None
    last = region.region[-1]
    return last.min if isinstance(last.extent, tirx.IntImm) and last.extent.value == 1 else None


def is_var(expr: tirx.Expr | None, var: tirx.Var) -> bool:
    """Whether ``expr`` is exactly ``var`` (a contiguous access when it is the innermost index)."""
    return isinstance(expr, tirx.Var) and expr.same_as(var)


def is_unit_stride(expr: tirx.Expr | None, var: tirx.Var) -> bool:
    """Whether ``expr`` is ``var + c`` with ``c`` free of ``var``: consecutive ``var`` read consecutive elements.

    Depthwise convolutions index their input as ``[..., channel + rc]`` with a unit ``rc``.
    """
    if expr is None:
        return False
    coefficients = detect_linear_equation(expr, [var])
    return len(coefficients) == 2 and isinstance(coefficients[0], tirx.IntImm) and coefficients[0].value == 1


def indexes_by(expr: tirx.Expr, var: tirx.Var) -> bool:
    """Whether the index ``expr`` varies with ``var`` (or may: an index that is not linear in it)."""
    coefficients = detect_linear_equation(expr, [var])
    return len(coefficients) != 2 or not (isinstance(coefficients[0], tirx.IntImm) and coefficients[0].value == 0)


def is_identity_copy(block: tirx.SBlock) -> bool:
    """Whether the block only copies one buffer into another element for element (a pad by zero).

    Reading the source in place costs nothing, where the copy is a pass over the whole tensor.
    """
    store = block.body
    if not isinstance(store, tirx.BufferStore) or not isinstance(store.value, tvm.ir.TensorLoad):
        return False
    axes = [iv.var for iv in block.iter_vars]

    def in_order(indices: list[tirx.Expr]) -> bool:
        return len(indices) == len(axes) and all(is_var(index, axis) for index, axis in zip(indices, axes))

    return in_order(store.indices) and in_order(store.value.indices)


def is_move(block: tirx.SBlock) -> bool:
    """Whether the block stores an element of another buffer unchanged (a reshape, transpose,
    slice or broadcast: its indices may be anything)."""
    return isinstance(block.body, tirx.BufferStore) and isinstance(block.body.value, tvm.ir.TensorLoad)


def is_point(region: tvm.ir.TensorRegion) -> bool:
    """Whether a block's access ``region`` is one element."""
    return all(isinstance(axis.extent, tirx.IntImm) and axis.extent.value == 1 for axis in region.region)


def is_padding(block: tirx.SBlock) -> bool:
    """Whether the block pads one buffer with a constant: `out[...] = if_then_else(inside,
    in[...], constant)` (a convolution's or a pooling's `pad_temp`)."""
    store = block.body
    value = store.value if isinstance(store, tirx.BufferStore) else None
    if not isinstance(value, tvm.ir.Call) or getattr(value.op, "name", None) != "prim.if_then_else":
        return False
    _, inside, outside = value.args
    return isinstance(inside, tvm.ir.TensorLoad) and isinstance(outside, (tirx.FloatImm, tirx.IntImm))


def windowed(block: tirx.SBlock) -> list[tirx.Var]:
    """The spatial iterators of ``block`` that index some input together with a reduction iterator
    of more than one step, in one axis: a convolution's output column ``x`` in ``input[.., x + rx, ..]``
    for a window wider than one column. A padding read in place checks that index on every load
    (``0 <= x + rx - 3 < 17``), so a register tile whose rows run over such an iterator has a
    check per row."""
    steps = [iv.var for iv in block.iter_vars
             if iv.iter_type == tirx.IterVar.CommReduce and not (isinstance(iv.dom.extent, tirx.IntImm)
                                                                 and iv.dom.extent.value == 1)]
    spatial = [iv.var for iv in block.iter_vars if iv.iter_type != tirx.IterVar.CommReduce]
    output = block.writes[0].source if block.writes else None
    found: list[tirx.Var] = []
    for read in block.reads:
        if output is not None and read.source.same_as(output):
            continue
        for axis in read.region:
            used = tirx.analysis.undefined_vars(axis.min)
            if any(step in used for step in steps):
                found.extend(var for var in spatial if var in used and not any(var.same_as(f) for f in found))
    return found


def dtype_bits(sch: s_tir.Schedule, block: SBlockRV) -> int:
    """Bit width of the element type the block writes (sets the vector lanes)."""
    return tvm.DataType(sch.get(block).writes[0].source.dtype).bits if sch.get(block).writes else 32


def static_shape(buffer: tirx.Buffer) -> list[int] | None:
    """The buffer's shape, or None when an extent is symbolic (a batch of any size)."""
    return [int(d) for d in buffer.shape] if all(isinstance(d, tirx.IntImm) for d in buffer.shape) else None


def shape_vars(func: tirx.PrimFunc) -> set[tirx.Var]:
    """The symbolic sizes in the shapes of the function's buffer parameters (``batch``)."""
    found: set[tirx.Var] = set()
    for param in func.params:
        for dim in getattr(param, "shape", None) or ():
            found.update(tirx.analysis.undefined_vars(dim))
    return found


def static_bytes(buffer: tirx.Buffer) -> int | None:
    """How many bytes the buffer holds, or None when an extent is symbolic."""
    return None if static_shape(buffer) is None else smallest_bytes(buffer)


def smallest_bytes(buffer: tirx.Buffer) -> int:
    """How many bytes the buffer holds at its smallest size (a symbolic extent as 1)."""
    elements = math.prod(int(d) if isinstance(d, tirx.IntImm) else 1 for d in buffer.shape)
    return elements * tvm.DataType(buffer.dtype).bits // 8


def bytes_read(block: tirx.SBlock) -> int:
    """Bytes of the buffers ``block`` reads (each once, a symbolic extent as 1), not counting the
    buffer it writes (a reduction reads its own accumulator)."""
    written = {write.source for write in block.writes}
    sources = {read.source for read in block.reads if read.source not in written}
    return sum(smallest_bytes(buffer) for buffer in sources)


def extent(sch: s_tir.Schedule, loop: s_tir.schedule.LoopRV) -> int | None:
    """The constant extent of a loop, or None when it is symbolic."""
    value = sch.get(loop).extent
    return int(value.value) if isinstance(value, tirx.IntImm) else None


def smallest_extent(sch: s_tir.Schedule, loop: s_tir.schedule.LoopRV) -> int:
    """The extent of a loop with the function's symbolic sizes at their smallest (`SMALLEST_SIZES_ATTR`;
    a size with no known minimum as 1), where the work estimates take it: a kernel of a batch of any
    size is split over the cores when the static build at batch 1 would be, a convolution over
    images of 32 to 256 pixels a side as at 32x32. (With every size as 1, AdaIN's convolutions of
    64 channels over images of any size ran on one core: 31 ms at 256x256 against 16 ms.)"""
    value = sch.get(loop).extent
    if isinstance(value, tirx.IntImm):
        return int(value.value)
    smallest = (sch.mod["main"].attrs or {}).get(SMALLEST_SIZES_ATTR, {})
    at_smallest = tvm_ffi.structural_map(
        value, (tirx.Var, lambda var: tirx.IntImm(str(var.ty), int(smallest.get(var.name, 1)))))
    folded = sym.Analyzer().simplify(at_smallest)
    return int(folded.value) if isinstance(folded, tirx.IntImm) else 1


def iterations(sch: s_tir.Schedule, loops: list[s_tir.schedule.LoopRV]) -> int:
    """Iterations of a loop nest at its smallest sizes (`smallest_extent`)."""
    return math.prod(smallest_extent(sch, loop) for loop in loops)


def realize(sch: s_tir.Schedule, block: SBlockRV) -> s_tir.SBlockRealize:
    """The realize of a block directly under its innermost loop (as every rule leaves them)."""
    found = sch.get(sch.get_loops(block)[-1]).body
    if not isinstance(found, s_tir.SBlockRealize):
        raise s_tir.ScheduleError(f"block {sch.get(block).name_hint} is not directly under its innermost loop")
    return found


def rebuilt(realize: s_tir.SBlockRealize, body: tirx.Stmt | None = None,
            extra_buffers: tuple[tirx.Buffer, ...] = ()) -> s_tir.SBlockRealize:
    """``realize`` with its block's body replaced by ``body`` (if given) and ``extra_buffers`` added to
    its allocations: TVM's SBlock has no copy-with, and the lowering passes change just these."""
    block = realize.block
    return s_tir.SBlockRealize(realize.iter_values, realize.predicate, s_tir.SBlock(
        block.iter_vars, block.reads, block.writes, block.name_hint, block.body if body is None else body,
        block.init, [*block.alloc_buffers, *extra_buffers], block.match_buffers, block.annotations))


def all_blocks(sch: s_tir.Schedule) -> list[SBlockRV]:
    """Every block of the function below its outermost one, nested ones included, in program order.
    The outermost block is `root` in legalised operators, but a hand-written TOPI kernel names its own
    (`get_valid_counts` of non-max suppression): it is found from the function's body, not by name."""
    body = sch.mod["main"].body
    if not isinstance(body, s_tir.SBlockRealize):
        return []
    found: list[SBlockRV] = []

    def walk(block: SBlockRV) -> None:
        for child in sch.get_child_blocks(block):
            found.append(child)
            walk(child)

    walk(sch.get_sblock(body.block.name_hint))
    return found


def _is_multiply_accumulate(block: tirx.SBlock) -> bool:
    """Whether ``block`` is a reduction step ``acc[...] = acc[...] + a * b`` (a convolution's, a
    matmul's), not a max or a plain sum (a pooling's, a mean's)."""
    store = block.body
    if not isinstance(store, tirx.BufferStore) or not isinstance(store.value, tirx.Add):
        return False
    if not any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars):
        return False
    operands = (store.value.a, store.value.b)
    reads_itself = any(isinstance(o, tvm.ir.TensorLoad) and o.source.same_as(store.buffer) for o in operands)
    return reads_itself and any(isinstance(o, tirx.Mul) for o in operands)


def multiply_adds(func: tirx.PrimFunc) -> int | None:
    """The multiply-adds one call computes (padding included), from the domains of its
    multiply-accumulate blocks (convolutions, dense layers, matmuls): what a kernel's GFLOP/s are
    counted from. None when it has none, or one of symbolic size. A block keeps its domain
    whatever the schedule did to its loops, so the scheduled function answers as the legalised one."""
    sch = s_tir.Schedule(func)
    counts = [[iv.dom.extent for iv in sch.get(block).iter_vars] for block in all_blocks(sch)
              if _is_multiply_accumulate(sch.get(block))]
    if not counts or not all(isinstance(e, tirx.IntImm) for extents in counts for e in extents):
        return None
    return sum(math.prod(int(e.value) for e in extents) for extents in counts)
