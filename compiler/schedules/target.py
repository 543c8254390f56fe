"""What the schedules need to know about a CPU target: its vector width and register file."""

from __future__ import annotations

from tvm.target import Target
from tvm.target.codegen import llvm_cpu_has_features, llvm_get_vector_width

_X86_WIDTHS = (("avx512f", 512), ("avx", 256))
_BITS_BY_TARGET: dict[str, int] = {}


def _detect_vector_bits(target: Target) -> int:
    """Vector register width in bits, from the target's CPU features.

    ``llvm_get_vector_width`` answers for the host, not for the target's ``mcpu`` (512 for
    ``haswell`` on this machine), so x86 widths come from the features LLVM knows for the CPU.
    """
    if "x86" in str(target.attrs.get("mtriple", "")):
        for feature, bits in _X86_WIDTHS:
            if llvm_cpu_has_features([feature], target):
                return bits
        return 128
    width = llvm_get_vector_width(target)
    return width if width > 0 else 128


def vector_bits(target: Target) -> int:
    """Vector register width of ``target`` in bits (asked of LLVM once per target)."""
    key = str(target)
    if key not in _BITS_BY_TARGET:
        _BITS_BY_TARGET[key] = _detect_vector_bits(target)
    return _BITS_BY_TARGET[key]


def vector_lanes(target: Target, dtype_bits: int) -> int:
    """Elements of ``dtype_bits`` in one vector register."""
    return max(vector_bits(target) // dtype_bits, 1)


def vector_registers(target: Target) -> int:
    """How many vector registers the register tile (accumulators, weights, a broadcast input) may use:
    32 with AVX-512, 16 with AVX2, SSE and NEON."""
    return 32 if vector_bits(target) >= 512 else 16


def num_cores(target: Target) -> int:
    """The ``num-cores`` attribute of the target (1 when absent): parallel loops only pay above 1."""
    return int(target.attrs.get("num-cores", 1))
