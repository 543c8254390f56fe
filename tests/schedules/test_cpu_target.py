"""What the schedules know of a CPU target (`compiler/schedules/cpu.py`) comes from the target
alone: a target named `znver3` is AVX2 (8-float vectors, 16 registers) on every host (issue 39)."""

from __future__ import annotations

import pytest
import tvm

from tfcheck.compiler.schedules import cpu
from tfcheck.compiler.schedules.cpu import CpuTarget

from ..isa import named_target

KIB = 1 << 10
# mcpu -> what an AVX-512, AVX2 or SSE2 machine knows of itself, with two cores: vector bits,
# registers, cores, L1d and L2 per core (`x86-64` names no CPU: the smallest caches).
KNOWN = {"znver4": CpuTarget(512, 32, 2, 32 * KIB, 1024 * KIB),
         "skylake-avx512": CpuTarget(512, 32, 2, 32 * KIB, 1024 * KIB),
         "sapphirerapids": CpuTarget(512, 32, 2, 48 * KIB, 2048 * KIB),
         "znver3": CpuTarget(256, 16, 2, 32 * KIB, 512 * KIB), "haswell": CpuTarget(256, 16, 2, 32 * KIB, 256 * KIB),
         "x86-64": CpuTarget(128, 16, 2, 32 * KIB, 256 * KIB)}


@pytest.mark.parametrize("mcpu", sorted(KNOWN))
def test_a_named_cpu_is_described_by_its_instruction_set(mcpu: str) -> None:
    assert cpu.describe(named_target(mcpu)) == KNOWN[mcpu]


@pytest.mark.parametrize("host_width", [128, 256, 512])
@pytest.mark.parametrize("mcpu", sorted(KNOWN))
def test_a_target_without_a_triple_is_described_the_same_on_every_host(
        mcpu: str, host_width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`llvm_get_vector_width` answers for the machine the build runs on (512 for `znver3` on an
    AVX-512 one); a target with no `mtriple` got that answer. Here it answers as each host would."""
    monkeypatch.setattr(cpu, "_DESCRIPTIONS", {})
    monkeypatch.setattr(cpu, "llvm_get_vector_width", lambda target: host_width)
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": 2})
    assert cpu.describe(target) == KNOWN[mcpu]


def test_extensions_turned_off_in_mattr_narrow_the_vectors() -> None:
    """A virtual machine that hides AVX-512 (`compiler/build/targets.py` turns it off in `mattr`)."""
    hidden = ["-avx512f", "-avx512cd", "-avx512bw", "-avx512dq", "-avx512vl"]
    described = cpu.describe(named_target("skylake-avx512", mattr=hidden))
    assert (described.vector_bits, described.vector_registers) == (256, 16)
    assert described.l2_bytes == KNOWN["skylake-avx512"].l2_bytes  # the CPU's caches stay its own


def test_an_arm_target_has_16_byte_vectors_and_its_cores() -> None:
    target = tvm.target.Target({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "neoverse-n1",
                                "num-cores": 4})
    assert cpu.describe(target) == CpuTarget(128, 16, 4, 64 * KIB, 1024 * KIB)


def test_cores_default_to_one() -> None:
    assert cpu.num_cores(tvm.target.Target({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver3"})) == 1
