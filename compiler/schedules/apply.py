"""``apply_default_schedules``: legalise, fuse and schedule a Relax module for a CPU without tuning."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

import tvm
from tvm import relax, s_tir, tirx
from tvm.target import Target

from tfcheck.compiler.schedules.lowering.fresh_outputs import copy_shared_outputs_pass

from tfcheck.compiler.schedules import blocks, cpu
from tfcheck.compiler.schedules.rewrites import (flat_steps, flattened_dense, layer_norm, parallel_matmuls, scalar_steps,
                                                 winograd)
from tfcheck.compiler.schedules.rules import expansion_depthwise
from tfcheck.compiler.schedules.budget import CODE_SIZE_BUDGET, code_size
from tfcheck.compiler.schedules.rewrites.channel_padding import pad_output_channels
from tfcheck.compiler.schedules.rules.contraction import schedule_contraction
from tfcheck.compiler.schedules.rules.depthwise import schedule_depthwise
from tfcheck.compiler.schedules.rules.fallback import schedule_fallback
from tfcheck.compiler.schedules.rules.rows import schedule_rows
from tfcheck.compiler.schedules.rewrites.fast_math import fast_math_legalization
from tfcheck.compiler.schedules.lowering.known_sizes import bind_sizes
from tfcheck.compiler.schedules.lowering.over_cores import version_parallel_loops
from tfcheck.compiler.schedules.lowering.tails import peel_tails
from tfcheck.compiler.schedules.lowering.unswitch import unswitch_partial_tiles

logger = logging.getLogger(__name__)

Rule = Callable[[tirx.PrimFunc, Target], "s_tir.Schedule | None"]


# The PrimFunc attribute naming the rule that scheduled it (for tests, debugging and reports).
RULE_ATTR = "tfcheck.schedule_rule"
# The PrimFunc attribute listing the rules whose schedule exceeded the code-size budget (budget.py).
OVER_BUDGET_ATTR = "tfcheck.over_budget"

# First rule that recognises a function wins; unrecognised functions stay as legalised (correct, slow).
RULES: tuple[Rule, ...] = (expansion_depthwise.schedule_expansion_depthwise, schedule_depthwise, schedule_contraction,
                          schedule_rows, schedule_fallback)


@dataclass(frozen=True)
class RuleChoice:
    """The schedule the rules give one PrimFunc: the first that fits it within the budget."""

    schedule: s_tir.Schedule | None  # None: no rule fits, the function stays as legalised
    rule: str | None
    over_budget: tuple[tuple[str, int], ...] = ()  # (rule, estimated code size) of each rule refused for its size


def choose_schedule(name: str, func: tirx.PrimFunc, target: Target) -> RuleChoice:
    """Try the rules in order; keep the first schedule whose estimated code size is within budget.

    A rule that fails on a function is logged and skipped, so one odd operator never stops the
    build; a schedule over the budget is logged and the next rule tried, so one pathological
    kernel never takes LLVM (and the build) minutes and gigabytes.
    """
    refused: list[tuple[str, int]] = []
    lanes = cpu.vector_lanes(target, 32)
    for rule in RULES:
        try:
            sch = rule(func, target)
        except Exception as error:  # noqa: BLE001 - TVM raises many kinds; any of them means "rule does not fit"
            logger.info("schedule rule %s failed on %s: %s", rule.__name__, name, error)
            continue
        if sch is None:
            continue
        size = code_size(sch.mod["main"], lanes)
        if size <= CODE_SIZE_BUDGET:
            return RuleChoice(sch, rule.__name__, tuple(refused))
        logger.warning("schedule rule %s gives %s about %d TIR nodes after unrolling (budget %d): trying the next rule",
                       rule.__name__, name, size, CODE_SIZE_BUDGET)
        refused.append((rule.__name__, size))
    return RuleChoice(None, None, tuple(refused))


def default_schedule(name: str, func: tirx.PrimFunc, target: Target) -> tuple[s_tir.Schedule, str] | None:
    """The schedule the first fitting rule gives one PrimFunc, and that rule's name; None if none fits.

    The schedule's trace is what tuning replays when it compares the default with tuned schedules.
    """
    choice = choose_schedule(name, func, target)
    return None if choice.schedule is None else (choice.schedule, choice.rule)


def _schedule_function(name: str, func: tirx.PrimFunc, target: Target) -> tirx.PrimFunc | None:
    """The scheduled version of one PrimFunc (or the legalised one, marked, when every rule was over
    the budget), or None to keep it as it is."""
    choice = choose_schedule(name, func, target)
    attrs = {OVER_BUDGET_ATTR: dict(choice.over_budget)} if choice.over_budget else {}
    if choice.schedule is None:
        return func.with_attrs(attrs) if attrs else None
    scheduled = choice.schedule.mod["main"]
    if choice.rule in (schedule_contraction.__name__, schedule_depthwise.__name__):
        scheduled = _unswitched_within_budget(scheduled, target)
    return scheduled.with_attrs({**attrs, "tirx.is_scheduled": True, RULE_ATTR: choice.rule})


def _unswitched_within_budget(func: tirx.PrimFunc, target: Target) -> tirx.PrimFunc:
    """A micro-kernel (the contraction or the depthwise rule's) with its full tiles of a symbolic
    extent free of bound checks (`unswitch.py`), unless the copies of the tile that takes push it
    over the code-size budget. Depthwise kernels over an image of any size kept a check per pixel
    of the tile: 113 against 58 us for the 56x56x144 layer's static build, 68 unswitched."""
    unswitched = unswitch_partial_tiles(func)
    if unswitched.same_as(func) or code_size(unswitched, cpu.vector_lanes(target, 32)) > CODE_SIZE_BUDGET:
        return func
    return unswitched


def budget_fallbacks(mod: tvm.IRModule) -> list[dict[str, Any]]:
    """The kernels of a scheduled module whose first-choice schedule was over the code-size budget,
    for the build report, which names them: ``{"kernel", "schedule" (the one used, or
    "unscheduled"), "refused": [{"rule", "code_size"}], "budget"}``."""
    found = []
    for gvar, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc) and func.attrs and OVER_BUDGET_ATTR in func.attrs:
            refused = [{"rule": str(rule), "code_size": int(size)} for rule, size in func.attrs[OVER_BUDGET_ATTR].items()]
            found.append({"kernel": gvar.name_hint, "schedule": str(func.attrs.get(RULE_ATTR, "unscheduled")),
                          "refused": sorted(refused, key=lambda entry: entry["rule"]), "budget": CODE_SIZE_BUDGET})
    return sorted(found, key=lambda entry: entry["kernel"])


def kernel_table(mod: tvm.IRModule) -> list[dict[str, Any]]:
    """Each kernel of a scheduled module as `tfcheck bench --profile` names it beside its time:
    ``{"kernel", "rule" (`RULE_ATTR`; "metaschedule" for a tuned kernel, else "unscheduled"),
    "buffers" (its parameters' shapes), "multiply_adds" (`blocks.multiply_adds`)}``. The VM calls
    each by its name here, so the times join on it."""
    found = []
    for gvar, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc):
            attrs = func.attrs or {}
            tuned = "metaschedule" if attrs.get("tirx.is_scheduled", False) else "unscheduled"
            shapes = ["x".join(str(d.value if isinstance(d, tirx.IntImm) else d) for d in param.shape)
                      for param in func.params if hasattr(param, "shape")]
            found.append({"kernel": gvar.name_hint, "rule": str(attrs.get(RULE_ATTR, tuned)),
                          "buffers": " ".join(shapes), "multiply_adds": blocks.multiply_adds(func)})
    return sorted(found, key=lambda entry: entry["kernel"])


def _run_passes(mod: tvm.IRModule, target: Target, passes: list[tvm.transform.Pass]) -> tvm.IRModule:
    """Run Relax passes with ``target`` current (legalisation and constant folding build for it)."""
    with target:
        return tvm.transform.Sequential(passes)(mod)


def legalize_and_fuse(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """The CPU backend's own legalisation and fusion, so TIR functions carry whole fused operators.

    ``AttachAttrLayoutFreeBuffers`` marks which parameters are constants, for weight packing;
    float32 exp, sigmoid, tanh, erf and softmax take vectorisable approximations (`fast_math.py`);
    convolutions first get their output channels padded to whole vectors and a prime output width
    to one a register tile of several rows divides, and with AVX-512 a 1x1 convolution runs over its
    image's pixels in a row, the steps after it moved before the reshape back into its epilogue
    (`channel_padding.py`, `flat_steps.py`). Reshapes to the shape a
    tensor already has (TFLite's fully connected layer on a 3-D input imports with one) go first:
    FuseOps does not fuse a matmul with an elementwise step across a reshape, so the encoder
    block's GELU and residual adds ran as kernels of their own (docs/schedules.md, "Reshapes"); for
    the same reason a dense layer over an input flattened for it and unflattened after (TFLite's
    fully connected layer over a sequence of any length) becomes one batched matmul
    (`flattened_dense.py`).
    TFLite's layer norms, imported op by op, become one `layer_norm` each (`layer_norm.py`), and a
    step by a scalar after a reshape (an attention's scale) moves before it, into the epilogue of the
    matmul the reshape follows (`scalar_steps.py`); matmuls of one input by constant weights (an
    attention's projections) become one (`parallel_matmuls.py`). After fusion, a 1x1 expansion and
    the depthwise convolution that reads it become one kernel where that pays
    (`expansion_depthwise.py`).
    """
    passes = [
        relax.transform.RemoveRedundantReshape(),
        tvm.transform.module_pass(lambda module, _context: flattened_dense.unflatten_dense_layers(module), opt_level=0,
                                  name="UnflattenDenseLayers"),
        tvm.transform.module_pass(lambda module, _context: layer_norm.fuse_layer_norms(module), opt_level=0,
                                  name="FuseLayerNorms"),
        tvm.transform.module_pass(lambda module, _context: scalar_steps.move_scalar_steps_before_reshapes(module),
                                  opt_level=0, name="MoveScalarStepsBeforeReshapes"),
        tvm.transform.module_pass(lambda module, _context: parallel_matmuls.combine_parallel_matmuls(module),
                                  opt_level=0, name="CombineParallelMatmuls"),
        tvm.transform.module_pass(lambda module, _context: winograd.winograd_convolutions(module, target),
                                  opt_level=0, name="WinogradConvolutions"),
        tvm.transform.module_pass(lambda module, _context: pad_output_channels(module, target), opt_level=0,
                                  name="PadOutputChannels"),
        tvm.transform.module_pass(lambda module, _context: flat_steps.move_steps_before_unflattening(module),
                                  opt_level=0, name="MoveStepsBeforeUnflattening"),
        relax.transform.LegalizeOps(customize_legalize_map=fast_math_legalization()),
        relax.transform.AnnotateTIROpPattern(),
        tvm.transform.module_pass(lambda module, _context: _reshapes_as_injective(module), opt_level=0,
                                  name="ReshapesAsInjective"),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        tvm.transform.module_pass(
            lambda module, _context: expansion_depthwise.fuse_expansions_into_depthwise(module, target), opt_level=0,
            name="FuseExpansionsIntoDepthwise"),
        relax.transform.DeadCodeElimination(),
        relax.transform.AttachAttrLayoutFreeBuffers(),
    ]
    return _run_passes(mod, target, passes)


# TVM's operator pattern kinds (`relax.transform.AnnotateTIROpPattern`).
_INJECTIVE, _OPAQUE = 2, 8


def _reshapes_as_injective(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each reshape kernel that `AnnotateTIROpPattern` called opaque marked injective.

    Over a symbolic size a reshape's indices (``(h * 32 + d) // 128 % n``) are beyond what the
    pattern analysis recognises, and FuseOps fuses nothing across an opaque kernel: the encoder
    block for sequences of any length ran its Q/K/V slices and the head transposes after them as
    four kernels (19 against 10 us at 128 tokens, where the fixed-length build fuses each slice
    with its transpose). `has_reshape_pattern` proves the function a reshape (it never says so of
    one that is not), and a reshape is injective whatever the sizes.
    """
    updated = {}
    for gvar, func in mod.functions_items():
        if (isinstance(func, tirx.PrimFunc) and int(func.attrs.get("op_pattern", -1)) == _OPAQUE
                and relax.analysis.has_reshape_pattern(func)):
            updated[gvar] = func.with_attr("op_pattern", _INJECTIVE)
    if not updated:
        return mod
    mod = mod.clone()
    for gvar, func in updated.items():
        mod[gvar] = func
    return mod


def schedule_module(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """Apply the first matching rule to every unscheduled PrimFunc of an already legalised module.

    Returns a new module; ``mod`` itself is left as it was.
    """
    mod = mod.clone()
    smallest = _smallest_sizes(mod)
    updated = {}
    for gvar, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc) and not func.attrs.get("tirx.is_scheduled", False):
            sizes = {var.name: smallest[var.name] for var in blocks.shape_vars(func) if var.name in smallest}
            scheduled = _schedule_function(gvar.name_hint, func.with_attr(blocks.SMALLEST_SIZES_ATTR, sizes)
                                           if sizes else func, target)
            if scheduled is not None:
                updated[gvar] = scheduled
    for gvar, func in updated.items():
        mod[gvar] = func
    return mod


def _smallest_sizes(mod: tvm.IRModule) -> dict[str, int]:
    """The smallest value of each symbolic size, by name, from the Relax functions'
    `tir_var_lower_bound` (the build's `dims=`: `symbolic_import.with_bounds`)."""
    smallest: dict[str, int] = {}
    for _, func in mod.functions_items():
        if isinstance(func, relax.Function) and func.attrs and "tir_var_lower_bound" in func.attrs:
            smallest.update({str(name): int(value) for name, value in func.attrs["tir_var_lower_bound"].items()})
    return smallest


def _has_packing_block(func: tirx.PrimFunc) -> bool:
    """Whether any block of a PrimFunc, nested ones included, is a weight-packing block
    (ours, `contraction.py`, or MetaSchedule's layout rewrite in a tuned function)."""
    sch = s_tir.Schedule(func)
    root = func.body.block.name_hint  # "root", or a hand-written kernel's own name
    pending = [sch.get_sblock(root)]
    while pending:
        block = pending.pop()
        if blocks.PACKING_ANNOTATION in sch.get(block).annotations:
            return True
        pending.extend(sch.get_child_blocks(block))
    return False


def split_packing(mod: tvm.IRModule) -> tvm.IRModule:
    """``SplitLayoutRewritePreproc``, shown only the PrimFuncs that have a packing block.

    The pass walks the root block of every PrimFunc and aborts on one whose root holds a statement
    without any block, as TOPI's hand-written kernels do (``get_valid_counts`` of
    ``tf.image.non_max_suppression``), although it would leave such a function unchanged. The
    others go back into the result untouched (their GlobalVars are the ones the calls use).
    """
    hidden = {gvar: func for gvar, func in mod.functions_items()
              if isinstance(func, tirx.PrimFunc) and not _has_packing_block(func)}
    if len(hidden) == sum(isinstance(func, tirx.PrimFunc) for _, func in mod.functions_items()):
        return mod
    shown = tvm.IRModule({gvar: func for gvar, func in mod.functions_items() if gvar not in hidden},
                         attrs=mod.attrs)
    split = relax.transform.SplitLayoutRewritePreproc()(shown)
    for gvar, func in hidden.items():
        split[gvar] = func
    return split


def fold_packed_weights(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """Split the weight-packing blocks out of the scheduled functions and run them at build time.

    A weight used by several calls of one kernel (an unrolled loop's steps, `compiler/frontend/loop_unroll.py`)
    gets one packing call per use: common-subexpression elimination makes them one, so folding
    packs it once (50 times took 8 s for the benchmark LSTM).
    """
    passes = [
        tvm.transform.module_pass(lambda module, _context: split_packing(module), opt_level=0, name="SplitPacking"),
        relax.transform.EliminateCommonSubexpr(),
        relax.transform.FoldConstant(),
        relax.transform.DeadCodeElimination(),
    ]
    return _run_passes(mod, target, passes)


def apply_default_schedules(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """Legalise, fuse and schedule a Relax module (as imported from TFLite) for a CPU target.

    The result is ready for ``compile_cpu(mod, target)`` (``tvm.compile`` and one fix): the default
    CPU pipeline's legalisation and fusion passes find nothing left to do and keep the schedules.
    """
    return fold_packed_weights(schedule_module(legalize_and_fuse(mod, target), target), target)


@tvm.transform.module_pass(opt_level=0, name="tfcheck.NoAliasForLoneBuffers")
def _no_alias_for_lone_buffers(mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
    """Mark the PrimFuncs with at most one parameter (the VM's `shape_func`) as `tirx.noalias`:
    a lone buffer has nothing to alias, and the mark is what keeps the kernels fast (`compile_cpu`)."""
    for gvar, func in list(mod.functions_items()):
        if isinstance(func, tirx.PrimFunc) and len(func.params) <= 1 and not func.attrs.get("tirx.noalias", False):
            mod[gvar] = func.with_attr("tirx.noalias", True)
    return mod


def compile_cpu(mod: tvm.IRModule, target: Target) -> Any:
    """``tvm.compile`` with TVM's default Relax pipeline, then ``copy_shared_outputs_pass`` (no output
    is a constant's or a weight's memory: `compiler/schedules/lowering/fresh_outputs.py`), ``_no_alias_for_lone_buffers``
    and, on every kernel, the loops over the cores chosen at run time (`over_cores.py`), vectors
    along lengths known at run time in whole vectors and a checked tail (`tails.py`), and symbolic
    sizes known not to be negative (`known_sizes.py`).

    A module with symbolic shapes gets a `shape_func` from the Relax VM (`VMShapeLower`) that is
    not marked `tirx.noalias`; with it in the same LLVM module, TVM 0.27's code generator tags every
    kernel's loads and stores as possibly aliased ("tvm-alias" TBAA), so LLVM keeps the register
    tile's accumulators in memory. MobileNetV2's 1x1 convolutions ran 2-3x slower in the symbolic
    artifact than the same TIR compiled alone or the static artifact (docs/benchmarks.md).
    """
    pipeline = tvm.transform.Sequential([
        relax.get_pipeline("default"), copy_shared_outputs_pass, _no_alias_for_lone_buffers,
        _on_each_kernel("tfcheck.VersionParallelLoops", lambda func: version_parallel_loops(func, target)),
        _on_each_kernel("tfcheck.PeelTails", peel_tails), _on_each_kernel("tfcheck.BindSizes", bind_sizes)])
    return tvm.compile(mod, target=target, relax_pipeline=pipeline)


def _on_each_kernel(name: str, rewrite: Callable[[tirx.PrimFunc], tirx.PrimFunc]) -> tvm.transform.Pass:
    """A module pass that applies ``rewrite`` to every PrimFunc (replaced where it returns another)."""

    @tvm.transform.module_pass(opt_level=0, name=name)
    def run(mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        for gvar, func in list(mod.functions_items()):
            if isinstance(func, tirx.PrimFunc):
                updated = rewrite(func)
                if not updated.same_as(func):
                    mod[gvar] = updated
        return mod

    return run
