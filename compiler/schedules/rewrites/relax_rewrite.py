"""Running one Relax DPL rewrite over every Relax function of a module (the graph rewrites before
legalisation: `layer_norm.py`, `scalar_steps.py`)."""

from __future__ import annotations

from collections.abc import Callable

import tvm
from tvm import relax
from tvm.relax.dpl import rewrite_call

Rewrite = Callable[[relax.Expr, dict[relax.dpl.DFPattern, relax.Expr]], relax.Expr]


def rewrite_functions(mod: tvm.IRModule, pattern: relax.dpl.DFPattern, rewrite: Rewrite) -> tvm.IRModule:
    """A new module with ``rewrite`` applied to each match of ``pattern`` in each Relax function
    (``rewrite`` returns the original expression to leave a match as it is)."""
    updated = tvm.IRModule(mod.functions, attrs=mod.attrs)
    for global_var, function in mod.functions_items():
        if isinstance(function, relax.Function):
            updated[global_var] = rewrite_call(pattern, rewrite, function)
    return updated
