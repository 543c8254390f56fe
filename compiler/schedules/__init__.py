"""Default CPU schedules for TVM Relax modules: fast untuned builds, in the spirit of TVM's dlight rules.

``apply_default_schedules(mod, target)`` legalises and fuses a Relax module, schedules each fused
TIR function with the first rule that recognises it (register-tiled micro-kernels for matmul,
convolution, depthwise convolution and pooling, a depthwise convolution and the 1x1 expansion
before it as one kernel where that pays; parallel, vectorised loops for everything else) and packs
constant weights for the micro-kernels at build time. See docs/schedules.md.
"""

from tfcheck.compiler.schedules.apply import (
    apply_default_schedules,
    budget_fallbacks,
    compile_cpu,
    default_schedule,
    fold_packed_weights,
    kernel_table,
    legalize_and_fuse,
    schedule_module,
)

__all__ = [
    "apply_default_schedules",
    "budget_fallbacks",
    "compile_cpu",
    "default_schedule",
    "fold_packed_weights",
    "kernel_table",
    "legalize_and_fuse",
    "schedule_module",
]
