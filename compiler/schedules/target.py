"""What the schedules need to know about a CPU target: its vector width and register file."""

from __future__ import annotations

from tvm.target import Target
from tvm.target.codegen import llvm_get_vector_width

# Vector registers a register tile of accumulators may use: AVX-512 has 32 (28 leaves room for the
# loaded weights and the broadcast input), AVX2 has 16 (12).
_WIDE_REGISTER_FILE_BITS = 512


def vector_lanes(target: Target, dtype_bits: int) -> int:
    """Elements of ``dtype_bits`` in one vector register (at least 4, so SSE-only targets still vectorise)."""
    width = llvm_get_vector_width(target)
    return max(width if width > 0 else 128, 128) // dtype_bits


def accumulator_budget(target: Target) -> int:
    """How many vector registers a tile of accumulators may occupy without spilling."""
    return 28 if llvm_get_vector_width(target) >= _WIDE_REGISTER_FILE_BITS else 12


def num_cores(target: Target) -> int:
    """The ``num-cores`` attribute of the target (1 when absent): parallel loops only pay above 1."""
    return int(target.attrs.get("num-cores", 1))
