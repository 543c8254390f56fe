"""``apply_default_schedules``: legalise, fuse and schedule a Relax module for a CPU without tuning."""

from __future__ import annotations

import logging
from typing import Callable

import tvm
from tvm import relax, s_tir, tirx
from tvm.target import Target

from .contraction import schedule_contraction
from .fallback import schedule_fallback
from .fast_math import fast_math_legalization

logger = logging.getLogger(__name__)

Rule = Callable[[tirx.PrimFunc, Target], "s_tir.Schedule | None"]


# The PrimFunc attribute naming the rule that scheduled it (for tests, debugging and reports).
RULE_ATTR = "tfcheck.schedule_rule"

# First rule that recognises a function wins; unrecognised functions stay as legalised (correct, slow).
RULES: tuple[Rule, ...] = (schedule_contraction, schedule_fallback)


def default_schedule(name: str, func: tirx.PrimFunc, target: Target) -> tuple[s_tir.Schedule, str] | None:
    """The schedule the first fitting rule gives one PrimFunc, and that rule's name; None if none fits.

    The schedule's trace is what tuning replays when it compares the default with tuned schedules.
    A rule that fails on a function is logged and skipped, so one odd operator never stops the build.
    """
    for rule in RULES:
        try:
            sch = rule(func, target)
        except Exception as error:  # noqa: BLE001 - TVM raises many kinds; any of them means "rule does not fit"
            logger.info("schedule rule %s failed on %s: %s", rule.__name__, name, error)
            continue
        if sch is not None:
            return sch, rule.__name__
    return None


def _schedule_function(name: str, func: tirx.PrimFunc, target: Target) -> tirx.PrimFunc | None:
    """The scheduled version of one PrimFunc, or None to keep it unscheduled."""
    found = default_schedule(name, func, target)
    if found is None:
        return None
    sch, rule = found
    return sch.mod["main"].with_attrs({"tirx.is_scheduled": True, RULE_ATTR: rule})


def _run_passes(mod: tvm.IRModule, target: Target, passes: list[tvm.transform.Pass]) -> tvm.IRModule:
    """Run Relax passes with ``target`` current (legalisation and constant folding build for it)."""
    with target:
        return tvm.transform.Sequential(passes)(mod)


def legalize_and_fuse(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """The CPU backend's own legalisation and fusion, so TIR functions carry whole fused operators.

    ``AttachAttrLayoutFreeBuffers`` marks which parameters are constants, for weight packing;
    float32 exp, sigmoid, tanh, erf and softmax take vectorisable approximations (`fast_math.py`).
    """
    passes = [
        relax.transform.LegalizeOps(customize_legalize_map=fast_math_legalization()),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        relax.transform.DeadCodeElimination(),
        relax.transform.AttachAttrLayoutFreeBuffers(),
    ]
    return _run_passes(mod, target, passes)


def schedule_module(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """Apply the first matching rule to every unscheduled PrimFunc of an already legalised module.

    Returns a new module; ``mod`` itself is left as it was.
    """
    mod = mod.clone()
    updated = {}
    for gvar, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc) and not func.attrs.get("tirx.is_scheduled", False):
            scheduled = _schedule_function(gvar.name_hint, func, target)
            if scheduled is not None:
                updated[gvar] = scheduled
    for gvar, func in updated.items():
        mod[gvar] = func
    return mod


def fold_packed_weights(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """Split the weight-packing blocks out of the scheduled functions and run them at build time."""
    passes = [
        relax.transform.SplitLayoutRewritePreproc(),
        relax.transform.FoldConstant(),
        relax.transform.DeadCodeElimination(),
    ]
    return _run_passes(mod, target, passes)


def apply_default_schedules(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """Legalise, fuse and schedule a Relax module (as imported from TFLite) for a CPU target.

    The result is ready for ``tvm.compile(mod, target=target)``: the default CPU pipeline's
    legalisation and fusion passes find nothing left to do and keep the schedules.
    """
    return fold_packed_weights(schedule_module(legalize_and_fuse(mod, target), target), target)
