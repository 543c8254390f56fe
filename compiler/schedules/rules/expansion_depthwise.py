"""A 1x1 expansion convolution and the depthwise convolution that reads it, as one kernel computed
band by band (MobileNet's inverted residual block).

MobileNetV2's first block expands 112x112x16 to 96 channels (a 4.8 MB tensor) and a stride-2
depthwise convolution reads it back. As two kernels, the expansion writes the whole tensor and
the depthwise convolution reads it from the L3 cache: in the model (two threads, each kernel timed
in the VM's chain) 239 and 230 us, where the depthwise convolution alone took 150-190 us. Fused,
each band of the depthwise convolution's output rows computes the expansion rows it needs
(``(band - 1) x stride + window`` rows, kept in a buffer that stays in the core's L2) right before
reading them: 175-245 us for both (docs/schedules.md, "Expansion and depthwise in one kernel").

Relax's ``FuseOps`` never puts two reductions in one kernel, so the pair is merged after it: a
function that calls both kernels, marked primitive, which ``FuseTIR`` turns into one PrimFunc
(``fuse_expansions_into_depthwise``), and ``schedule_expansion_depthwise`` schedules it. Bands
recompute the rows they share with their neighbours: only pairs where that costs little are
merged (``worth_fusing``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import tvm
from tvm import relax, s_tir, tirx
from tvm.sym.pattern import detect_linear_equation
from tvm.target import Target

from tfcheck.compiler.schedules import blocks, cpu
from tfcheck.compiler.schedules.rules.depthwise import is_depthwise
from tfcheck.compiler.schedules.tiling import DEPTHWISE_MAX_ROWS, divisors, register_tile, row_tile, vector_width

logger = logging.getLogger(__name__)

SBlockRV = s_tir.schedule.SBlockRV
LoopRV = s_tir.schedule.LoopRV

# Output rows of the depthwise convolution per band: 4 rows at stride 2 read 9 expansion rows
# (12.5% of the expansion computed twice); bands of 2 and 8 were no faster on MobileNetV2's first
# block (docs/schedules.md).
MAX_BAND_ROWS = 4
# Recomputed share of the expansion accepted whatever the tensor's size; up to MAX_RECOMPUTE when
# the expanded tensor is at least LARGE_EXPANSION bytes. Measured on MobileNetV2's blocks (each
# fused kernel against the two kernels back to back): 28x28x192 at stride 1 (1.5x) was slower
# fused, 56x56x144 at stride 1 (1.5x, 1.8 MB) faster, 14x14x576 at stride 2 (1.5x) slower.
CHEAP_RECOMPUTE = 1.25
MAX_RECOMPUTE = 1.5
LARGE_EXPANSION = 1 << 20


@dataclass(frozen=True)
class Bands:
    """How the depthwise convolution's output rows are cut into bands."""

    rows: int  # output rows per band
    recompute: float  # expansion rows computed per expansion row the output needs


def band_rows(out_rows: int, cores: int) -> int:
    """The rows per band: the largest divisor of ``out_rows`` up to ``MAX_BAND_ROWS`` that leaves
    at least two bands per core (one band per divisor, so no band has a partial tail)."""
    fitting = [d for d in divisors(out_rows) if d <= MAX_BAND_ROWS and out_rows // d >= 2 * cores]
    return max(fitting, default=1)


def plan_bands(out_rows: int, window: int, stride: int, cores: int) -> Bands:
    """The bands of a depthwise convolution of ``window`` rows and ``stride``, and what they recompute."""
    rows = band_rows(out_rows, cores)
    read = (rows - 1) * stride + window
    return Bands(rows, read / (rows * stride))


def worth_fusing(bands: Bands, expanded_bytes: int) -> bool:
    """Whether the fused kernel is expected to beat the two kernels (see the constants)."""
    return bands.recompute <= CHEAP_RECOMPUTE or (bands.recompute <= MAX_RECOMPUTE and expanded_bytes >= LARGE_EXPANSION)


@dataclass(frozen=True)
class Geometry:
    """What the depthwise block tells about the bands."""

    out_rows: int
    window: int
    stride: int


def depthwise_geometry(sch: s_tir.Schedule, block: SBlockRV) -> Geometry | None:
    """Output rows, window rows and row stride of a depthwise block (``out[n, y, x, c] +=
    in[n, y * stride + ry, ...] * w[ry, ...]``); None when the rows are not read that way."""
    node = sch.get(block)
    iters = list(node.iter_vars)
    spatial = [iv for iv in iters if iv.iter_type != tirx.IterVar.CommReduce]
    reduction = [iv for iv in iters if iv.iter_type == tirx.IterVar.CommReduce]
    if len(spatial) != 4 or not reduction or not all(isinstance(iv.dom.extent, tirx.IntImm) for iv in iters):
        return None
    y, ry = spatial[1].var, reduction[0].var
    data = [read for read in node.reads if len(read.region) == 4 and not read.source.same_as(node.writes[0].source)]
    for read in data:
        coefficients = list(detect_linear_equation(read.region[1].min, [y, ry]))
        if len(coefficients) != 3 or not all(isinstance(c, tirx.IntImm) for c in coefficients[:2]):
            continue
        stride, step = coefficients[0].value, coefficients[1].value
        if stride >= 1 and step == 1:
            return Geometry(int(spatial[1].dom.extent), int(reduction[0].dom.extent), stride)
    return None


def _is_pointwise(sch: s_tir.Schedule, block: SBlockRV) -> bool:
    """Whether ``block`` is a 1x1 stride-1 NHWC convolution of static shape: ``out[n, y, x, f] +=
    in[n, y + ry, x + rx, c] * w[ry, rx, c, f]`` with a window of one row and one column, its data
    (the first buffer it reads) of the output's batch, height and width."""
    node = sch.get(block)
    if not blocks.iter_kinds(sch, block).startswith("SSSS") or len(node.writes) != 1 or not node.reads:
        return False
    extents = [iv.dom.extent for iv in node.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]
    if not all(isinstance(e, tirx.IntImm) for e in extents) or sum(int(e) > 1 for e in extents) != 1:
        return False
    out_shape, in_shape = blocks.static_shape(node.writes[0].source), blocks.static_shape(node.reads[0].source)
    return (out_shape is not None and in_shape is not None and len(out_shape) == len(in_shape) == 4
            and in_shape[:3] == out_shape[:3] and blocks.innermost_index(node.reads[0]) is not None)


def _main_reduction(sch: s_tir.Schedule) -> SBlockRV | None:
    """The one reduction block of a kernel, or None."""
    found = [b for b in blocks.child_blocks(sch) if blocks.is_reduction(sch, b)]
    return found[0] if len(found) == 1 else None


def _pair_bands(expansion: tirx.PrimFunc, depthwise: tirx.PrimFunc, target: Target) -> Bands | None:
    """The bands of the fused kernel of two separate kernels, when they are an expansion and a
    depthwise convolution worth fusing; None otherwise."""
    second = s_tir.Schedule(depthwise)  # most kernels are not depthwise: asked first
    dw = _main_reduction(second)
    geometry = depthwise_geometry(second, dw) if dw is not None and is_depthwise(second, dw) else None
    if geometry is None:
        return None
    first = s_tir.Schedule(expansion)
    conv = _main_reduction(first)
    if conv is None or not _is_pointwise(first, conv):
        return None
    bands = plan_bands(geometry.out_rows, geometry.window, geometry.stride, cpu.num_cores(target))
    return bands if worth_fusing(bands, blocks.static_bytes(first.get(conv).writes[0].source) or 0) else None


def _readable_pair_bands(expansion: tirx.PrimFunc, depthwise: tirx.PrimFunc, target: Target) -> Bands | None:
    """``_pair_bands``, or None for kernels its questions cannot read (TOPI's hand-written kernels,
    whose outer block is not TVM's "root": non-max suppression's ``get_valid_counts``), so that
    one odd kernel never stops a build."""
    try:
        return _pair_bands(expansion, depthwise, target)
    except Exception as error:  # noqa: BLE001 - TVM raises many kinds; any of them means "not a pair"
        logger.info("kernels not examined for fusion: %s", error)
        return None


def _uses(function: relax.Function) -> dict[relax.Var, int]:
    """How often each variable of ``function`` is read (its bindings and its result)."""
    counts: dict[relax.Var, int] = {}
    body = function.body
    values = [binding.value for block in body.blocks for binding in block.bindings] + [body.body]
    for value in values:
        for var in relax.analysis.free_vars(value):
            counts[var] = counts.get(var, 0) + 1
    return counts


def _primitive_pair(first: relax.Call, second: relax.Call) -> relax.Function:
    """A function that calls the expansion's kernel and the depthwise kernel on its result, marked
    primitive for ``FuseTIR``; its parameters are both calls' other arguments."""
    first_args, second_args = list(first.args[1].fields), list(second.args[1].fields)[1:]
    params = [relax.Var(f"p{index}", arg.ty) for index, arg in enumerate(first_args + second_args)]
    builder = relax.BlockBuilder()
    with builder.function("expansion_depthwise", params, {"Primitive": 1}, private=True):
        with builder.dataflow():
            expanded = builder.emit(relax.call_tir(first.args[0], params[: len(first_args)], first.ty))
            output = builder.emit_output(relax.call_tir(second.args[0], [expanded, *params[len(first_args):]],
                                                        second.ty))
        builder.emit_func_output(output)
    return builder.get()["expansion_depthwise"]


def fuse_expansions_into_depthwise(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """``mod`` (after FuseTIR) with each expansion read only by a depthwise convolution worth
    fusing (`worth_fusing`) merged with it into one kernel.

    A merged kernel that ``schedule_expansion_depthwise`` does not recognise (the two kernels were
    merged with steps between them that it does not expect: a crop of padded output channels)
    would fall to a slow rule, so such pairs are left apart.
    """
    merged, names = _merge(mod, target, excluded=frozenset())
    refused = frozenset(name for name in names if not _schedulable(merged[name], target))
    if refused:
        logger.info("expansions left apart from their depthwise convolutions: %s", ", ".join(sorted(refused)))
        merged, names = _merge(mod, target, excluded=refused)
    if names:
        logger.info("%d expansions fused into their depthwise convolutions", len(names))
    return merged


def _schedulable(func: tirx.PrimFunc, target: Target) -> bool:
    try:
        return schedule_expansion_depthwise(func, target) is not None
    except Exception as error:  # noqa: BLE001 - TVM raises many kinds; any of them means "leave apart"
        logger.info("fused expansion not scheduled: %s", error)
        return False


def _merge(mod: tvm.IRModule, target: Target, excluded: frozenset[str]) -> tuple[tvm.IRModule, list[str]]:
    """``mod`` with the pairs merged, except those whose merged kernel's name is in ``excluded``,
    and the merged kernels' names."""
    builder = relax.BlockBuilder(mod)
    names: list[str] = []
    call_tir = tvm.ir.Op.get("relax.call_tir")
    kernels = {gvar: func for gvar, func in mod.functions_items() if isinstance(func, tirx.PrimFunc)}

    def kernel(expr: relax.Expr | None) -> tirx.PrimFunc | None:
        if isinstance(expr, relax.Call) and expr.op.same_as(call_tir) and isinstance(expr.args[1], relax.Tuple):
            return kernels.get(expr.args[0])
        return None

    for global_var, function in mod.functions_items():
        if not isinstance(function, relax.Function) or not isinstance(function.body, relax.SeqExpr):
            continue
        values, uses = relax.analysis.get_var2val(function), _uses(function)

        def rewrite(original: relax.Expr, _matched: dict) -> relax.Expr:
            second = kernel(original)
            fields = original.args[1].fields if second is not None else []
            name = f"{original.args[0].name_hint}_expanded" if fields else ""
            if not fields or name in excluded or not isinstance(fields[0], relax.Var) or uses.get(fields[0], 0) != 1:
                return original
            producer = values.get(fields[0])
            first = kernel(producer)
            if first is None or _readable_pair_bands(first, second, target) is None:
                return original
            names.append(name)
            pair = builder.add_func(_primitive_pair(producer, original), name)
            return relax.Call(pair, [*producer.args[1].fields, *fields[1:]])

        pattern = relax.dpl.is_op("relax.call_tir")(relax.dpl.wildcard(), relax.dpl.wildcard())
        builder.update_func(global_var, relax.dpl.rewrite_call(pattern, rewrite, function))
    if not names:
        return mod, names
    passes = [relax.transform.DeadCodeElimination(), relax.transform.FuseTIR(), relax.transform.DeadCodeElimination()]
    return tvm.transform.Sequential(passes)(builder.get()), names


def _stage_blocks(sch: s_tir.Schedule) -> tuple[SBlockRV, SBlockRV, SBlockRV, list[SBlockRV]] | None:
    """(expansion, its last stage of the expansion's shape, depthwise, epilogue) of a fused kernel,
    with every other block inlined; None (nothing changed) when it is not one."""
    children = blocks.child_blocks(sch)
    reductions = [i for i, b in enumerate(children) if blocks.is_reduction(sch, b)]
    if len(reductions) != 2:
        return None
    conv, dw = children[reductions[0]], children[reductions[1]]
    if not _is_pointwise(sch, conv) or not is_depthwise(sch, dw):
        return None
    before, between = children[: reductions[0]], children[reductions[0] + 1 : reductions[1]]
    after = children[reductions[1] + 1 :]
    shape, out_shape = _shape(sch, conv), _shape(sch, dw)
    stores = [b for b in between if _shape(sch, b) == shape]
    if not stores or any(_shape(sch, b) != out_shape for b in after) or not all(
            blocks.is_identity_copy(sch.get(b)) or blocks.is_padding(sch.get(b)) for b in before):
        return None
    store = stores[-1]
    for block in [*before, *[b for b in between if not b.same_as(store)], *after[:-1]]:
        sch.compute_inline(block)
    return conv, store, dw, after[-1:]


def _shape(sch: s_tir.Schedule, block: SBlockRV) -> list[int] | None:
    return blocks.static_shape(sch.get(block).writes[0].source)


def schedule_expansion_depthwise(func: tirx.PrimFunc, target: Target) -> s_tir.Schedule | None:
    """The band-by-band schedule of a fused expansion and depthwise convolution, or None when
    ``func`` is not one (`fuse_expansions_into_depthwise` made it)."""
    sch = s_tir.Schedule(func)
    stages = _stage_blocks(sch)
    if stages is None:
        return None
    conv, store, dw, epilogue = stages
    geometry = depthwise_geometry(sch, dw)
    if geometry is None:
        return None
    lanes = cpu.vector_lanes(target, blocks.dtype_bits(sch, dw))
    rows = plan_bands(geometry.out_rows, geometry.window, geometry.stride, cpu.num_cores(target)).rows
    band, dw_window = _tile_depthwise(sch, dw, epilogue, rows, lanes)
    sch.compute_at(store, band, preserve_unit_loops=True)
    sch.compute_at(conv, band, preserve_unit_loops=True)
    conv_window = _tile_expansion(sch, conv, store, lanes, cpu.vector_registers(target))
    if cpu.num_cores(target) > 1 and geometry.out_rows // rows > 1:
        sch.parallel(band)
    # After parallel: a block split into init and update no longer counts as a reduction block.
    sch.decompose_reduction(conv, conv_window)
    sch.decompose_reduction(dw, dw_window)
    return sch


def _tile_depthwise(sch: s_tir.Schedule, dw: SBlockRV, epilogue: list[SBlockRV], rows: int,
                    lanes: int) -> tuple[LoopRV, LoopRV]:
    """Cut the depthwise block into bands of ``rows`` output rows and register tiles of up to 7
    columns by one vector of channels (as the depthwise rule's tile), its epilogue computed per
    tile; return the band loop (batch and bands fused) and the window's first loop."""
    n, y, x, c, *window = sch.get_loops(dw)
    band, y_inner = sch.split(y, factors=[None, rows])
    x_outer, x_inner = sch.split(x, factors=[None, row_tile(blocks.extent(sch, x), DEPTHWISE_MAX_ROWS)])
    c_outer, c_inner = sch.split(c, factors=[None, vector_width(blocks.extent(sch, c), lanes)])
    sch.reorder(n, band, y_inner, x_outer, c_outer, *window, x_inner, c_inner)
    fused = sch.fuse(n, band)
    for block in epilogue:
        sch.reverse_compute_at(block, c_outer, preserve_unit_loops=True)
        *_, columns, channels = sch.get_loops(block)
        sch.unroll(columns)
        sch.vectorize(channels)
    for loop in [*window, x_inner]:
        sch.unroll(loop)
    sch.vectorize(c_inner)
    return fused, window[0]


def _tile_expansion(sch: s_tir.Schedule, conv: SBlockRV, store: SBlockRV, lanes: int, registers: int) -> LoopRV:
    """Register-tile the expansion's rows of one band as the contraction rule tiles a 1x1
    convolution, its bias and activation (``store``) computed per tile; return the reduction's
    first loop."""
    *_, n, y, x, c, ry, rx, rc = sch.get_loops(conv)
    rows, cols = register_tile(blocks.extent(sch, x), blocks.extent(sch, c), lanes, registers)
    x_outer, x_inner = sch.split(x, factors=[None, rows])
    c_outer, c_inner = sch.split(c, factors=[None, cols])
    sch.reorder(n, y, x_outer, c_outer, ry, rx, rc, x_inner, c_inner)
    sch.reverse_compute_at(store, c_outer, preserve_unit_loops=True)
    for block_loops in (sch.get_loops(store)[-2:], [x_inner, c_inner]):
        columns, channels = block_loops
        vectors, vector = sch.split(channels, factors=[None, vector_width(blocks.extent(sch, channels), lanes)])
        sch.unroll(columns)
        sch.unroll(vectors)
        sch.vectorize(vector)
    return ry

