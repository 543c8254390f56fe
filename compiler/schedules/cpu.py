"""What the schedules need to know about a CPU target: its vector width, register file, caches and cores.

All of it is read from the target (its `mcpu`, `mattr`, `mtriple` and `num-cores`), never from the
machine the build runs on: a build for `znver3` on an AVX-512 machine makes exactly the choices an
AVX2 machine makes (issue 39). A build for the host gets the host's properties because its target
spells them out (`compiler/build/targets.py`: the host's CPU name, the extensions it hides, its cores).
The cache sizes come from a table of the CPUs LLVM names (`_CACHES_KIB`), so a build for the host
gets the caches of the CPU LLVM took it for.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm.target import Target
from tvm.target.codegen import llvm_cpu_has_features, llvm_get_vector_width

_X86_WIDTHS = (("avx512f", 512), ("avx", 256), ("sse2", 128))

# L1 data cache and L2 per core, in KiB, of the CPUs LLVM names (`mcpu`): what the cache blocking
# sizes its blocks for (`tiling.column_block`). Zen 3's 512 KB L2 is where the blockings sized for the
# 1-2 MB of the Xeons and Zen 5 the schedules were tuned on stop fitting (issue 39).
_CACHES_KIB: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("nehalem", "westmere", "sandybridge", "ivybridge", "core-avx-i", "haswell", "core-avx2",
                     "broadwell", "skylake", "cannonlake"), (32, 256)),
    **dict.fromkeys(("skylake-avx512", "cascadelake", "cooperlake"), (32, 1024)),
    **dict.fromkeys(("icelake-client", "rocketlake"), (48, 512)),
    **dict.fromkeys(("icelake-server", "tigerlake", "alderlake"), (48, 1280)),
    **dict.fromkeys(("raptorlake", "meteorlake", "sapphirerapids", "emeraldrapids", "graniterapids"), (48, 2048)),
    **dict.fromkeys(("znver1", "znver2", "znver3"), (32, 512)),
    "znver4": (32, 1024),
    "znver5": (48, 1024),
    **dict.fromkeys(("neoverse-n1", "neoverse-n2", "neoverse-v1"), (64, 1024)),
    "neoverse-v2": (64, 2048),
}
# A CPU the table does not name: the smallest L1d and L2 of the x86 cores since Nehalem.
_DEFAULT_CACHES_KIB = (32, 256)


@dataclass(frozen=True)
class CpuTarget:
    """The properties of a CPU target that the schedules decide from."""

    vector_bits: int  # width of one vector register
    vector_registers: int  # registers the register tile may use
    num_cores: int  # cores the parallel loops may use
    l1d_bytes: int  # L1 data cache per core
    l2_bytes: int  # L2 cache per core


_DESCRIPTIONS: dict[str, CpuTarget] = {}


def describe(target: Target) -> CpuTarget:
    """What the schedules know of `target` (asked of LLVM once per target)."""
    key = str(target)
    if key not in _DESCRIPTIONS:
        bits = _detect_vector_bits(target)
        l1d, l2 = _CACHES_KIB.get(str(target.attrs.get("mcpu", "")), _DEFAULT_CACHES_KIB)
        _DESCRIPTIONS[key] = CpuTarget(bits, 32 if bits >= 512 else 16, int(target.attrs.get("num-cores", 1)),
                                       l1d << 10, l2 << 10)
    return _DESCRIPTIONS[key]


def _detect_vector_bits(target: Target) -> int:
    """Vector register width in bits, from the features LLVM knows for the target's CPU and `mattr`.

    ``llvm_get_vector_width`` answers 512 for every x86 CPU on an AVX-512 machine (``haswell``,
    ``znver3``), so x86 widths come from the CPU's features, asked first: a target without
    ``mtriple`` (``{"kind": "llvm", "mcpu": "znver3"}``) is x86 by its features too, and got the
    build machine's 512 bits when its architecture was read from the missing triple.
    """
    for feature, bits in _X86_WIDTHS:
        if llvm_cpu_has_features([feature], target):
            return bits
    if str(target.attrs.get("mtriple", "")).startswith(("x86_64", "i386", "i486", "i586", "i686")):
        return 128  # an x86 CPU without SSE2 (i386 targets): no wider vectors either
    width = llvm_get_vector_width(target)
    return width if width > 0 else 128


def vector_bits(target: Target) -> int:
    """Vector register width of ``target`` in bits."""
    return describe(target).vector_bits


def vector_lanes(target: Target, dtype_bits: int) -> int:
    """Elements of ``dtype_bits`` in one vector register."""
    return max(vector_bits(target) // dtype_bits, 1)


def vector_registers(target: Target) -> int:
    """How many vector registers the register tile (accumulators, weights, a broadcast input) may use:
    32 with AVX-512, 16 with AVX2, SSE and NEON."""
    return describe(target).vector_registers


def num_cores(target: Target) -> int:
    """The ``num-cores`` attribute of the target (1 when absent): parallel loops only pay above 1."""
    return describe(target).num_cores


def l2_bytes(target: Target) -> int:
    """The L2 cache of one core of ``target``'s CPU (`_CACHES_KIB`): the weights a core's blocks may keep."""
    return describe(target).l2_bytes
