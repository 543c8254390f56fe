"""Default CPU schedules for TVM Relax modules: fast untuned builds, in the spirit of TVM's dlight rules.

``apply_default_schedules(mod, target)`` legalises and fuses a Relax module and schedules each fused
TIR function with the first rule that recognises it: register-tiled micro-kernels for matmul,
convolution, depthwise convolution and pooling; TVM's CPU reduction rule for softmax and layer norm;
parallel, vectorised loops for everything elementwise. See docs/schedules.md.
"""

from .apply import apply_default_schedules, schedule_module

__all__ = ["apply_default_schedules", "schedule_module"]
