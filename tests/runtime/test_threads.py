"""TVM's thread count: one thread per physical core available, unless the user chose one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tfcheck.runtime.threads import BIND_VARIABLE, THREADS_VARIABLE, available_cpus, physical_cores, use_all_cores


def _fake_sysfs(root: Path, cores_by_cpu: dict[int, tuple[int, int]]) -> Path:
    """A /sys/devices/system/cpu tree where logical CPU n is (package, core) `cores_by_cpu[n]`."""
    for cpu, (package, core) in cores_by_cpu.items():
        topology = root / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{package}\n")
        (topology / "core_id").write_text(f"{core}\n")
    return root


def test_hyperthreads_of_one_core_count_once(tmp_path):
    sysfs = _fake_sysfs(tmp_path, {0: (0, 0), 1: (0, 1), 2: (0, 0), 3: (0, 1)})
    assert physical_cores([0, 1, 2, 3], sysfs) == 2


def test_a_vm_without_smt_counts_every_cpu(tmp_path):
    sysfs = _fake_sysfs(tmp_path, {0: (0, 0), 1: (0, 1)})
    assert physical_cores([0, 1], sysfs) == 2


def test_same_core_id_on_two_packages_is_two_cores(tmp_path):
    sysfs = _fake_sysfs(tmp_path, {0: (0, 0), 1: (1, 0)})
    assert physical_cores([0, 1], sysfs) == 2


def test_only_the_cpus_the_process_may_use_count(tmp_path):
    sysfs = _fake_sysfs(tmp_path, {0: (0, 0), 1: (0, 1), 2: (0, 2), 3: (0, 3)})
    assert physical_cores([2, 3], sysfs) == 2


def test_unreadable_topology_counts_one_core_per_cpu(tmp_path):
    assert physical_cores([0, 1, 2], tmp_path / "missing") == 3


def test_fills_in_the_variable_when_unset():
    environ: dict[str, str] = {}
    count = use_all_cores(environ)
    assert count == physical_cores(available_cpus())
    assert environ == {THREADS_VARIABLE: str(count), BIND_VARIABLE: "0"}


@pytest.mark.parametrize("variable", [THREADS_VARIABLE, "OMP_NUM_THREADS"])
def test_a_users_choice_wins(variable):
    environ = {variable: "7", BIND_VARIABLE: "1"}
    assert use_all_cores(environ) == 7
    assert environ == {variable: "7", BIND_VARIABLE: "1"}


def test_workers_are_not_pinned_to_cores_unless_the_user_asks():
    """A pinned worker waits for its own core on a shared machine (the token model: 24-60 ms a call
    at batch 8 under load, 0.09 ms unpinned); a user's own choice still wins."""
    environ = {THREADS_VARIABLE: "2"}
    use_all_cores(environ)
    assert environ[BIND_VARIABLE] == "0"


def test_a_loaded_artifact_runs_on_every_core(artifacts):
    """In a fresh process with no thread variable set, TVM's pool starts with one thread per core
    (TVM alone would take half the CPUs on x86)."""
    out = artifacts(("addmul", (2, 3)))
    script = textwrap.dedent(f"""
        import json
        import numpy as np
        import tfcheck, tvm_ffi
        lib = tfcheck.load({str(out)!r})
        lib.addmul(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))
        print(json.dumps(tvm_ffi.get_global_func("runtime.NumThreads")()))
    """)
    env = {k: v for k, v in os.environ.items() if k not in (THREADS_VARIABLE, "OMP_NUM_THREADS")}
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               check=True, timeout=120, env=env)
    assert json.loads(completed.stdout) == physical_cores(available_cpus())
