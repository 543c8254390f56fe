"""Run a command as on an AVX2-only CPU, on a machine with AVX-512.

    .venv/bin/python benchmarks/avx2_only/run.py -- .venv/bin/tfcheck bench ARTIFACTS --format markdown

Issue 17 asks for the six workloads on an AVX2-only CPU as well; this project's machines have had
AVX-512. Every library in the comparison picks its kernels from CPUID (XNNPACK through cpuinfo,
oneDNN, XLA's and TVM's LLVM, NumPy), so the command runs with ``cpuid_mask.c`` preloaded: the
CPUID instruction faults (Linux's CPUID faulting, the ``cpuid_fault`` flag) and the shim answers
without the AVX-512, AMX and AVX-VNNI bits. glibc chose its string functions before the preload
runs, so ``GLIBC_TUNABLES`` turns its AVX-512 variants off as well. The kernel's /proc/cpuinfo still
lists AVX-512 (the tfcheck runtime's checks read it), and LLVM still names the CPU by its model, so
artifacts are built for an AVX2 CPU name explicitly (``--target`` with ``"mcpu": "znver3"``).

What this models is the instruction set only: caches, clock and cores stay the machine's.

The shim is compiled with the system's C compiler into a temporary folder; before the command runs,
a Python child checks that NumPy sees AVX2 and no AVX-512 under it (exit status 2 when not). The
command's exit status is this script's; a command ended by a signal ends it with the same signal.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tfcheck.runtime.target import feature_key, host_cpu_features

SHIM_SOURCE = Path(__file__).with_name("cpuid_mask.c")
CPUID_FAULTING = feature_key("cpuid_fault")  # the /proc/cpuinfo flag, as the runtime normalizes flags
GLIBC_OFF = ("AVX512F", "AVX512VL", "AVX512BW", "AVX512DQ", "AVX512CD", "AVX512ER", "AVX512PF")
CHECK = ("from numpy._core._multiarray_umath import __cpu_features__ as f; "
         "import sys; sys.exit(0 if f['AVX2'] and not f['AVX512F'] else 1)")


def compile_shim(folder: Path) -> Path:
    """The shared library, built from ``cpuid_mask.c`` into ``folder``."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        raise SystemExit("avx2_only: no C compiler (set CC)")
    library = folder / "cpuid_mask.so"
    subprocess.run([compiler, "-O2", "-Wall", "-shared", "-fPIC", "-o", str(library), str(SHIM_SOURCE), "-ldl"],
                   check=True)
    return library


def masked_environment(library: Path, base: dict[str, str]) -> dict[str, str]:
    """``base`` with the shim preloaded and glibc's AVX-512 string functions off."""
    preload = " ".join(filter(None, (str(library), base.get("LD_PRELOAD"))))
    hwcaps = "glibc.cpu.hwcaps=" + ",".join(f"-{name}" for name in GLIBC_OFF)
    tunables = ":".join(filter(None, (base.get("GLIBC_TUNABLES"), hwcaps)))
    return {**base, "LD_PRELOAD": preload, "GLIBC_TUNABLES": tunables}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    command = parser.parse_args().command
    command = command[1:] if command[:1] == ["--"] else command
    if not command:
        parser.error("no command given")
    if CPUID_FAULTING not in host_cpu_features():
        raise SystemExit("avx2_only: this CPU or hypervisor offers no CPUID faulting (no cpuid_fault flag)")
    with tempfile.TemporaryDirectory(prefix="avx2-only-") as folder:
        environment = masked_environment(compile_shim(Path(folder)), dict(os.environ))
        if subprocess.run([sys.executable, "-c", CHECK], env=environment).returncode != 0:
            print("avx2_only: NumPy still sees AVX-512 under the shim", file=sys.stderr)
            return 2
        code = subprocess.run(command, env=environment).returncode
    if code < 0:  # ended by a signal: end the same way, so that callers see what the command did
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main())
