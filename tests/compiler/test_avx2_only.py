"""benchmarks/avx2_only: a command sees an AVX2-only CPU, and crashes still crash as before."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tfcheck.runtime.target import feature_key, host_cpu_features

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "avx2_only" / "run.py"
FEATURES = ("from numpy._core._multiarray_umath import __cpu_features__ as f; "
            "print(f['AVX2'], f['FMA3'], f['AVX512F'], f['AVX512BW'])")

pytestmark = pytest.mark.skipif(
    feature_key("cpuid_fault") not in host_cpu_features() or shutil.which("cc") is None,
    reason="needs Linux CPUID faulting (the cpuid_fault flag) and a C compiler")


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUN), "--", *command], capture_output=True, text=True, timeout=120)


def test_the_command_sees_avx2_and_no_avx512() -> None:
    masked = _run(sys.executable, "-c", FEATURES)
    assert masked.returncode == 0, masked.stderr
    assert masked.stdout.split() == ["True", "True", "False", "False"]


def test_a_real_segmentation_fault_still_ends_the_process_and_reaches_faulthandler() -> None:
    crash = "import ctypes; ctypes.string_at(0)"
    plain = _run(sys.executable, "-c", crash)
    assert plain.returncode == -11  # SIGSEGV, as without the shim
    reported = _run(sys.executable, "-X", "faulthandler", "-c", crash)
    assert reported.returncode == -11 and "Segmentation fault" in reported.stderr


def test_a_segmentation_fault_a_process_sends_itself_still_ends_it() -> None:
    """No instruction to re-run: the shim sends it again (run.py ends this way as its command did,
    so run.py under run.py, as the tests are under the mask, ended with status 245 instead)."""
    killed = _run(sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert killed.returncode == -11


def test_without_a_command_it_says_so() -> None:
    result = subprocess.run([sys.executable, str(RUN)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "no command given" in result.stderr
