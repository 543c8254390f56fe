"""How many threads TVM's parallel loops use: one per physical core this process may run on.

Unless `TVM_NUM_THREADS` (or `OMP_NUM_THREADS`) says otherwise, TVM's thread pool takes half of
`std::thread::hardware_concurrency()` on x86, assuming every core runs two hyperthreads. Where
there is no SMT (most cloud VMs present each vCPU as a core) that halves the parallelism: on this
project's 2-vCPU benchmark machine every compiled model ran on one core while TensorFlow used
both, and a ResNet50 3x3 convolution took 2.4 ms instead of 1.5 ms. It also ignores the CPU set a
container or `taskset` gives the process.

TVM also pins each worker thread to one core (unless `TVM_BIND_THREADS=0`). On a machine whose
cores other processes share, a parallel loop then waits until the pinned worker's core is free: a
scheduler time slice, where an unpinned worker would have run on the other core. On this project's
2-core machine under load, the token model (`fixtures/aot/symbolic.py`) took 24-60 ms a call at
batch 8 with pinned workers and 0.09 ms without; on a quiet machine the two were the same
(docs/benchmarks.md). So the workers are left unpinned.

The pool reads the variables once, when the first parallel loop starts, so `use_all_cores` must run
before that; it only fills the variables in, so a user's own setting always wins. Child processes
(MetaSchedule's measuring workers) inherit them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, MutableMapping
from pathlib import Path

THREADS_VARIABLE = "TVM_NUM_THREADS"
BIND_VARIABLE = "TVM_BIND_THREADS"
# TVM falls back on this one when its own is unset, so a user who set it has chosen already.
_OPENMP_VARIABLE = "OMP_NUM_THREADS"
_SYSFS_CPUS = Path("/sys/devices/system/cpu")


def available_cpus() -> set[int]:
    """The logical CPUs this process may run on (a container's or `taskset`'s set, not the host's)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def physical_cores(cpus: Iterable[int], sysfs: Path = _SYSFS_CPUS) -> int:
    """How many distinct physical cores the logical `cpus` belong to (hyperthreads share one).

    Falls back to one core per logical CPU where the topology cannot be read (non-Linux systems).
    """
    cpus = list(cpus)
    cores = set()
    for cpu in cpus:
        topology = sysfs / f"cpu{cpu}" / "topology"
        try:
            cores.add(((topology / "physical_package_id").read_text().strip(),
                       (topology / "core_id").read_text().strip()))
        except OSError:
            return max(len(cpus), 1)
    return max(len(cores), 1)


def use_all_cores(environ: MutableMapping[str, str] = os.environ) -> int:
    """Give TVM one unpinned thread per available physical core unless the user chose a number
    (or pinning); return the number."""
    environ.setdefault(BIND_VARIABLE, "0")
    for variable in (THREADS_VARIABLE, _OPENMP_VARIABLE):
        chosen = environ.get(variable, "").strip()
        if chosen.isdigit() and int(chosen) > 0:
            return int(chosen)
    count = physical_cores(available_cpus())
    environ[THREADS_VARIABLE] = str(count)
    return count
