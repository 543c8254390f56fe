"""The fork server: a child forked from it is the process `python -m module` would have started,
and wherever it could not be, the child is a fresh process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tfcheck.compiler.process import forkserver
from tfcheck.compiler.process.child import run_child


@dataclass(frozen=True)
class Report:
    """The probe's result (the probe defines the same dataclass)."""

    text: str


# What a child sees of its process. `forked`: the module its preload() imported is there already.
PROBE = '''
import atexit, json, os, sys
from dataclasses import dataclass
from tfcheck.compiler.process.child import child_main

@dataclass(frozen=True)
class Report:
    text: str

def preload():
    import probe_marker

def step(request, events):
    from pathlib import Path
    from tfcheck.compiler.cache.fastkey import ReadRecorder
    recorder = ReadRecorder([Path.cwd()], [])
    forked = "probe_marker" in sys.modules
    recorder.start()
    preload()  # as the tracing child imports TensorFlow after starting its recorder
    print("printed by the step")
    atexit.register(print, "printed at exit")
    return Report(json.dumps({
        "forked": forked, "fast_key_variables": sorted(recorder.inputs().environment), "cwd": os.getcwd(), "path0": sys.path[0],
        "argv0": sys.argv[0], "argv": sys.argv[1:], "name": __name__, "own_session": os.getsid(0) == os.getpid(),
        "stdin": sys.stdin.read(), "probe": os.environ.get("PROBE"), "request": request.text,
        "environment": sorted(set(os.environ) - {"TFCHECK_EVENTS_FD"}),
    }))

if __name__ == "__main__":
    child_main(step, Report)
'''


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The probe module and its marker in a folder of their own; the working directory another."""
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "probe_child.py").write_text(PROBE)
    (modules / "probe_marker.py").write_text("import os\nos.environ.get('PROBE_AT_IMPORT')\n")
    workdir = tmp_path / "project"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    return modules


def run_probe(modules: Path, forked: bool = True, **environment: str) -> tuple[dict[str, Any], str]:
    """The probe's report, and what it printed (its log)."""
    work = modules.parent / "work"
    outcome = run_child("probe_child", Report("hello"), Report, work, on_stage=lambda _stage: None, timeout=60,
                        env={"PYTHONPATH": str(modules), **environment}, forked=forked)
    assert outcome.error is None, outcome.error
    return json.loads(outcome.result.text), (work / "probe_child.log").read_text()


def test_a_forked_child_is_the_process_python_m_would_start(probe: Path) -> None:
    fresh, fresh_log = run_probe(probe, forked=False)
    forked, forked_log = run_probe(probe)
    again, _ = run_probe(probe)  # the server's second child
    assert (fresh["forked"], forked["forked"], again["forked"]) == (False, True, True)
    assert {**forked, "forked": False} == fresh == {**again, "forked": False}
    assert fresh["cwd"] == fresh["path0"] == str(probe.parent / "project")
    assert fresh["argv0"] == str(probe / "probe_child.py") and fresh["name"] == "__main__"
    assert fresh["own_session"] and fresh["stdin"] == "" and fresh["request"] == "hello"
    assert forked_log == fresh_log == "printed by the step\nprinted at exit\n"


def test_a_folder_holding_a_module_the_server_imported_gets_a_fresh_process(probe: Path) -> None:
    """In a fresh process, `probe_marker.py` in the working directory is the one imported."""
    assert run_probe(probe)[0]["forked"]
    Path("probe_marker.py").write_text("")
    assert not run_probe(probe)[0]["forked"]


def server_pid() -> int:
    server = forkserver._SERVERS.by_module["probe_child"]
    assert server is not None
    return server._process.pid


def test_the_folder_a_preloaded_module_came_from_is_no_shadow(probe: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tfcheck build` run in the folder of the module itself."""
    monkeypatch.chdir(probe)
    report, _ = run_probe(probe)
    assert report["forked"] and report["cwd"] == str(probe)


def test_a_variable_the_preload_read_gets_a_server_of_its_own(probe: Path) -> None:
    first, _ = run_probe(probe, PROBE_AT_IMPORT="a")
    first_server = server_pid()
    second, _ = run_probe(probe, PROBE_AT_IMPORT="b")
    assert first["forked"] and second["forked"] and server_pid() != first_server


def test_a_variable_no_import_read_shares_the_server(probe: Path) -> None:
    first, _ = run_probe(probe, PROBE="a")
    first_server = server_pid()
    second, _ = run_probe(probe, PROBE="b")
    assert (first["forked"], first["probe"]) == (True, "a")
    assert (second["forked"], second["probe"]) == (True, "b") and server_pid() == first_server


def test_the_fast_key_counts_what_the_preload_read(probe: Path) -> None:
    """A forked child never imports the marker itself; its fast key still holds the variable the
    import read, as a fresh process's does."""
    fresh, _ = run_probe(probe, forked=False, PROBE_AT_IMPORT="a")
    forked, _ = run_probe(probe, PROBE_AT_IMPORT="a")
    assert forked["forked"] and "PROBE_AT_IMPORT" in fresh["fast_key_variables"]
    assert forked["fast_key_variables"] == fresh["fast_key_variables"]


def test_the_switch_turns_the_server_off(probe: Path) -> None:
    report, _ = run_probe(probe, TFCHECK_FORK_SERVER="0")
    assert not report["forked"]


def test_a_killed_server_is_replaced(probe: Path) -> None:
    assert run_probe(probe)[0]["forked"]
    server = forkserver._SERVERS.by_module["probe_child"]
    assert server is not None
    server._process.send_signal(signal.SIGKILL)
    server._process.wait()
    assert run_probe(probe)[0]["forked"] and server_pid() != server._process.pid


def test_a_module_without_preload_runs_in_fresh_processes(probe: Path) -> None:
    source = probe / "probe_child.py"
    source.write_text(source.read_text().replace("def preload():", "def import_marker():")
                      .replace("    preload()  #", "    import_marker()  #"))
    first, _ = run_probe(probe)
    second, _ = run_probe(probe)
    assert not first["forked"] and not second["forked"] and second["request"] == "hello"


def test_the_tracing_preload_leaves_tensorflows_runtime_for_the_child() -> None:
    """What the tracing server imports must not start TensorFlow's runtime: its thread pools would
    not exist in a forked child, and a user's module may still configure them (`tf.config`)."""
    script = ("import os\n"
              "from tfcheck.compiler.trace.tracing import preload\n"
              "preload()\n"
              "from tensorflow.python.eager import context\n"
              "import tensorflow as tf\n"
              "print(context.context()._initialized)\n"
              "tf.config.threading.set_inter_op_parallelism_threads(1)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False"]


def test_a_module_whose_server_failed_gets_one_in_another_environment(probe: Path, tmp_path: Path) -> None:
    """Another `PYTHONPATH` finds another module of the same name, which has a `preload()`."""
    source = probe / "probe_child.py"
    without = tmp_path / "without"
    without.mkdir()
    (without / "probe_child.py").write_text(source.read_text().replace("def preload():", "def import_marker():")
                                            .replace("    preload()  #", "    import_marker()  #"))
    (without / "probe_marker.py").write_text((probe / "probe_marker.py").read_text())
    assert not run_probe(without)[0]["forked"]
    assert run_probe(probe)[0]["forked"]
