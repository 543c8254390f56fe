"""CPU targets named by their LLVM CPU whatever this machine is, and whether this machine can run
the code built for one.

`named_target("znver3")` is an AVX2 target on every host: it takes only this machine's triple (its
code is linked and loaded here), never its CPU name, its `mattr` (the extensions a virtual machine
hides) or its core count, so the schedules' decisions for it are the same on every host.

`host_target()` is this machine's target as builds for the host have it (`host_cpu_target`), less
the extensions this CPU cannot execute: the same target on a real machine (`host_cpu_target` already
turns off what /proc/cpuinfo lacks), an AVX2 one under benchmarks/avx2_only/run.py, where CPUID hides
AVX-512 but /proc/cpuinfo and LLVM's CPU name (from the model) do not. Tests that run code "on the
host" use it, so that under the mask they build and decide as on an AVX2 machine.

`skip_unless_runnable(target)` skips a test that executes code built for `target` where this CPU
cannot execute it (code for AVX-512 on an AVX2-only CPU dies of SIGILL and takes the pytest worker
with it). The CPU's features are read as the code that executes sees them: CPUID (through NumPy's
`__cpu_features__`, which also checks that the OS saves the registers) and the kernel's
/proc/cpuinfo flags, both; so under benchmarks/avx2_only/run.py, where CPUID hides AVX-512 but
/proc/cpuinfo still lists it, the AVX-512 cases are skipped too.
"""

from __future__ import annotations

import functools
import platform
from typing import Any

import pytest
import tvm

from tfcheck.compiler.build.targets import host_cpu_target
from tfcheck.runtime.target import feature_key, host_cpu_features

# Two cores whatever the host has: the decisions that depend on cores (parallel loops) too are the same everywhere.
CORES = 2

# The x86 instruction-set extensions (LLVM names) that generated code may use and a CPU may lack.
# Tuning flags (`prefer-256-bit`) and system instructions (`xsave`, AMD's `clzero`) are not checked.
ISA_EXTENSIONS = ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "avx", "avx2", "fma", "f16c", "bmi", "bmi2",
                  "lzcnt", "movbe", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma",
                  "avx512vbmi", "avx512vbmi2", "avx512vnni", "avx512bitalg", "avx512vpopcntdq", "avx512bf16",
                  "avx512fp16")
_NUMPY_NAMES = {"fma": "FMA3"}  # NumPy's names are LLVM's upper-cased, dots removed, but for these
_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def host_triple() -> str:
    """This machine's LLVM triple, as the builds for it spell it."""
    return str(host_cpu_target()["mtriple"])


def named_target(mcpu: str, **attrs: Any) -> tvm.target.Target:
    """An llvm target for the CPU LLVM calls `mcpu` (`znver3`: AVX2; `znver4`, `skylake-avx512`:
    AVX-512; `x86-64`: SSE2), `CORES` cores unless `attrs` say otherwise, for this machine's triple."""
    return tvm.target.Target({"kind": "llvm", "mtriple": host_triple(), "mcpu": mcpu, "num-cores": CORES, **attrs})


def host_target(**attrs: Any) -> tvm.target.Target:
    """This machine's llvm target, with what this CPU cannot execute turned off in `mattr` (see the
    module); `attrs` (`num-cores`) added."""
    host = host_cpu_target()
    hidden = [f"-{name}" for name in missing_isa(tvm.target.Target(host)) if name in ISA_EXTENSIONS]
    if hidden:
        host = {**host, "mattr": [*host.get("mattr", []), *hidden]}
    return tvm.target.Target({**host, **attrs})


@functools.cache
def _cpuid_features() -> dict[str, bool]:
    """NumPy's view of this CPU (CPUID and the OS's XSAVE support); empty where NumPy has none."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_features__  # type: ignore[no-redef]
    return dict(__cpu_features__)


def host_can_execute(feature: str) -> bool:
    """Whether this CPU runs instructions of the x86 extension `feature` (an LLVM name): CPUID says
    so where NumPy knows the extension, and /proc/cpuinfo lists it where it is readable."""
    cpuid = _cpuid_features().get(_NUMPY_NAMES.get(feature, feature.upper().replace(".", "")))
    listed = host_cpu_features()
    return cpuid is not False and (not listed or feature_key(feature) in listed)


def missing_isa(target: tvm.target.Target) -> list[str]:
    """What code built for `target` may use and this CPU lacks: another architecture, or x86
    extensions (LLVM names); empty when this machine can run it."""
    from tvm.target.codegen import llvm_get_cpu_features

    triple = str(target.attrs.get("mtriple", "") or host_triple())
    arch = triple.split("-", 1)[0]
    machine = _ARCH_ALIASES.get(platform.machine().lower(), platform.machine().lower())
    if arch != machine:
        return [f"the {arch} architecture"]
    if not arch.startswith(("x86_64", "i386", "i686")):
        return []
    implied = {str(name) for name in llvm_get_cpu_features(target)}
    return [name for name in ISA_EXTENSIONS if name in implied and not host_can_execute(name)]


def skip_unless_runnable(target: tvm.target.Target) -> None:
    """Skip the calling test where this CPU cannot run code built for `target`, saying what it lacks."""
    missing = missing_isa(target)
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}, which code built for "
                    f"{target.attrs.get('mcpu', 'the target')} may use")
