"""compiler/build/memory.py: each stage's peak is its own, native allocations included."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tfcheck.compiler.build.memory import StagePeaks, status_mb

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")

SIZE_MB = 200


def test_a_stage_peak_counts_its_native_memory_and_the_next_stage_starts_afresh() -> None:
    peaks = StagePeaks()
    before = status_mb("VmRSS")
    with peaks.stage("allocate"):
        block = np.ones(SIZE_MB * 2**20, dtype=np.uint8)  # NumPy's buffer: native, touched
        del block
    with peaks.stage("nothing"):
        pass
    allocate, nothing = peaks.stages
    assert allocate.peak_mb >= before + SIZE_MB * 0.9
    assert nothing.peak_mb < allocate.peak_mb - SIZE_MB * 0.5
    assert peaks.peak_mb() == allocate.peak_mb
