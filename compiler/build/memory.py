"""Peak resident memory per build stage, read from `/proc/self/status` (Linux).

`tracemalloc` sees only Python's allocations; TensorFlow's converter, TVM and LLVM allocate
natively, so the kernel's own counters are what tell where a build's memory goes: `VmRSS` (resident
now) and `VmHWM` (the high-water mark), which writing `5` to `/proc/self/clear_refs` resets to the
current RSS, so that each stage's peak is its own (benchmarks/stage_memory.py, docs/build.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def status_mb(field_name: str) -> float:
    """One `kB` field of /proc/self/status (`VmRSS`, `VmHWM`) in MB."""
    for line in _STATUS.read_text().splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1]) / 1024
    raise KeyError(field_name)


def reset_peak() -> None:
    """Restart `VmHWM` from the current RSS (Linux 4.0 and later)."""
    _CLEAR_REFS.write_text("5")


@dataclass(frozen=True)
class StagePeak:
    """One stage: its peak RSS, the RSS it left behind, and how long it took."""

    stage: str
    peak_mb: float
    after_mb: float
    seconds: float


@dataclass
class StagePeaks:
    """Peaks of consecutive stages of one process: `with peaks.stage("import"): ...`."""

    stages: list[StagePeak] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        reset_peak()
        started = time.monotonic()
        yield
        self.stages.append(StagePeak(name, status_mb("VmHWM"), status_mb("VmRSS"), time.monotonic() - started))

    def peak_mb(self) -> float:
        return max(stage.peak_mb for stage in self.stages)

    def table(self) -> str:
        """The stages as a Markdown table."""
        rows = [f"| {s.stage} | {s.peak_mb:.0f} | {s.after_mb:.0f} | {s.seconds:.1f} |" for s in self.stages]
        return "\n".join(["| stage | peak MB | RSS after MB | s |", "|---|---:|---:|---:|", *rows])
