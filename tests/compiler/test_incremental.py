"""Incremental and parallel builds: the fast key (`compiler/cache/fastkey.py`) returns a cached artifact
without starting TensorFlow only while nothing the trace read has changed, and `--jobs N` gives
the same report, in the same order, as `--jobs 1`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result

from tfcheck.compiler.build import driver
from tfcheck.compiler.cache import fastkey
from tfcheck.compiler.build.driver import jobs_for
from tfcheck.compiler.process.messages import TraceInputs

MODEL = '''
import os
from pathlib import Path

import h5py
import tensorflow as tf
import tfcheck

import helper

UNITS = int(os.environ.get("UNITS", "3"))
with h5py.File(Path(__file__).with_name("weights.h5"), "r") as weights_file:  # read by HDF5's C code
    weights = weights_file["dense"][:, :UNITS]


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
def affine(x):
    return tf.matmul(x, weights) * helper.SCALE
'''

RECORD = '''
import ctypes, ctypes.util, json, os, sys
from pathlib import Path
from tfcheck.compiler.cache.fastkey import ReadRecorder
from tfcheck.compiler.process.messages import to_message

recorder = ReadRecorder([Path(sys.argv[1])], [])
recorder.start()
import helper  # from the script's folder, sys.path[0], listed before the recorder started
Path(sys.argv[1], "weights.txt").read_text()
os.listdir(Path(sys.argv[1], "configs"))
libc = ctypes.CDLL(ctypes.util.find_library("c"))  # native code: no audit event
libc.close(libc.open(os.fsencode(Path(sys.argv[1], "native.bin")), os.O_RDONLY))
os.getenv("UNITS")
if sys.argv[2:] == ["rewrite"]:  # edited while being traced
    Path(sys.argv[1], "weights.txt").write_text("4 5 6\\n")
print(json.dumps(to_message(recorder.inputs())))
'''


def recording_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def recorded(folder: Path, *args: str) -> TraceInputs:
    """What a ReadRecorder in a fresh process (its hooks cannot be removed) records for RECORD,
    run in `folder` (made on the first call), bytecode written as for an installed project."""
    if not folder.exists():
        folder.mkdir()
        (folder / "helper.py").write_text("SCALE = 2.0\n")
        (folder / "weights.txt").write_text("1 2 3\n")
        (folder / "native.bin").write_bytes(b"\0")
        (folder / "configs").mkdir()
        (folder / "configs" / "a.toml").write_text("")
        (folder / "record.py").write_text(RECORD)
    output = subprocess.run([sys.executable, str(folder / "record.py"), str(folder), *args], capture_output=True,
                            text=True, check=True, env=recording_environment())
    data = json.loads(output.stdout)
    del data["contract_version"]
    return TraceInputs(**data)


def test_the_recorder_notes_modules_files_listings_and_variables(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UNITS", raising=False)
    recorded(tmp_path / "project")
    tmp_path /= "project"
    assert (tmp_path / "__pycache__").is_dir()
    inputs = recorded(tmp_path)  # helper.py now imported from its .pyc: no open of the source
    assert {str(tmp_path / name) for name in ("helper.py", "weights.txt", "native.bin", "record.py")} <= set(inputs.files)
    assert not any("site-packages" in path for path in inputs.files)  # installed: versioned instead
    assert str(tmp_path / "configs") in inputs.listings
    assert not any("site-packages" in path for path in inputs.listings)
    assert inputs.environment["UNITS"] is None and inputs.complete
    assert "tfcheck" in inputs.distributions
    environment = recording_environment()
    assert fastkey.changed(inputs, environment) is None

    (tmp_path / "weights.txt").write_text("1 2 4\n")
    assert fastkey.changed(inputs, environment) == str(tmp_path / "weights.txt")
    (tmp_path / "weights.txt").write_text("1 2 3\n")
    (tmp_path / "configs" / "b.toml").write_text("")
    assert fastkey.changed(inputs, environment) == str(tmp_path / "configs")
    (tmp_path / "configs" / "b.toml").unlink()
    (tmp_path / "numpy.py").write_text("")  # would shadow an installed module: a folder on sys.path changed
    assert fastkey.changed(inputs, environment) == str(tmp_path)
    (tmp_path / "numpy.py").unlink()
    assert fastkey.changed(inputs, {**environment, "UNITS": "2"}) == "environment"
    # TensorFlow's C++ reads its variables with getenv: a new TF_ variable counts though unread
    assert fastkey.changed(inputs, {**environment, "TF_NEW_SETTING": "1"}) == "environment"
    real_version = fastkey.distribution_version
    monkeypatch.setattr(fastkey, "distribution_version",
                        lambda name: "0.0" if name == "tfcheck" else real_version(name))
    assert fastkey.changed(inputs, environment) == "distribution tfcheck"


def test_a_file_written_during_the_trace_gives_no_fast_key(tmp_path: Path) -> None:
    assert recorded(tmp_path / "kept").complete
    assert not recorded(tmp_path / "rewritten", "rewrite").complete


def test_each_imported_distribution_is_versioned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a module, TensorFlow's ~3,000 modules took 10 s of a small function's trace."""
    asked: list[str] = []
    monkeypatch.setattr(fastkey, "distribution_version", lambda name: asked.append(name) or "1.0")
    _, distributions = fastkey._imported_modules()
    assert "numpy" in distributions and sorted(asked) == sorted(set(asked)) == sorted(distributions)


def test_jobs_default_to_the_cores_and_are_capped_by_memory() -> None:
    assert jobs_for(3, available=100 * driver.JOB_MEMORY) == (3, None)
    jobs, note = jobs_for(4, available=2 * driver.JOB_MEMORY + 1)
    assert jobs == 2 and note is not None and "instead of 4" in note
    assert jobs_for(4, available=0)[0] == 1
    assert jobs_for(None, available=100 * driver.JOB_MEMORY)[0] >= 1


# --- end to end (TensorFlow children): slow -------------------------------------------------------


def build(run_cli: Callable[..., Result], folder: Path, *args: str) -> dict[str, Any]:
    result = run_cli(folder, "build", *args, "--cache-dir", str(folder / ".cache"), "--format", "json")
    return json.loads(result.stdout)


def save_weights(path: Path, dense: np.ndarray) -> None:
    import h5py

    with h5py.File(path, "w") as weights:
        weights["dense"] = dense


# `tfcheck build` in a fresh process, reporting which of TVM and TensorFlow it imported.
BUILD_AND_LIST_IMPORTS = """
import atexit, json, sys
from tfcheck.cli import main
atexit.register(lambda: print(json.dumps([m for m in ("tvm", "tensorflow") if m in sys.modules]), file=sys.stderr))
main(["build", "--cache-dir", ".cache", "--format", "json"])
"""


def build_in_a_fresh_process(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """The build's JSON report, and the heavy modules its (main) process imported."""
    done = subprocess.run([sys.executable, "-c", BUILD_AND_LIST_IMPORTS], cwd=folder, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), json.loads(done.stderr.splitlines()[-1])


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The child processes the driver starts, by module, as they start."""
    started: list[str] = []
    run_child = driver.run_child

    def counting(module: str, *args: Any, **kwargs: Any) -> Any:
        started.append(module)
        return run_child(module, *args, **kwargs)

    monkeypatch.setattr(driver, "run_child", counting)
    return started


@pytest.mark.slow
def test_an_unchanged_build_starts_no_child_and_every_change_rebuilds(
        project: Callable[..., Path], run_cli: Callable[..., Result], children: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UNITS", raising=False)
    folder = project({"model.py": MODEL, "helper.py": "SCALE = 2.0\n"})
    save_weights(folder / "weights.h5", np.arange(12, dtype=np.float32).reshape(4, 3))
    trace, compile_ = "tfcheck.compiler.trace.tracing", "tfcheck.compiler.build.compile"

    def status() -> tuple[str, str]:
        children.clear()
        [record] = build(run_cli, folder)["functions"]
        return record["status"], record["artifact"]

    first = status()
    assert first[0] == "built" and children == [trace, compile_]
    assert status() == ("cached", first[1]) and children == []  # the fast path: no TensorFlow
    # ... and no TVM: the host's LLVM CPU name comes from the cache's record of this machine
    report, imported = build_in_a_fresh_process(folder)
    assert [(r["status"], r["artifact"]) for r in report["functions"]] == [("cached", first[1])]
    assert imported == []

    seen = {first[1]}
    for change in ("an imported helper", "a weights file read at import, replaced", "an environment constant"):
        if change == "an imported helper":
            (folder / "helper.py").write_text("SCALE = 3.0\n")
        elif change.startswith("a weights file"):
            (folder / "weights.h5").unlink()
            save_weights(folder / "weights.h5", np.ones((4, 3), dtype=np.float32))
        else:  # a constant that the module reads from the environment
            monkeypatch.setenv("UNITS", "2")
        outcome, artifact = status()
        assert (outcome, children) == ("built", [trace, compile_]), change
        assert artifact not in seen, change
        seen.add(artifact)
        assert status() == ("cached", artifact) and children == [], change

    # A file that could shadow a module (the import root's listing): traced again, same graph.
    (folder / "extra.py").write_text("")
    assert status() == ("cached", artifact) and children == [trace]
    # An installed package upgraded: traced again; same graph, so the full key finds the artifact.
    real_version = fastkey.distribution_version
    monkeypatch.setattr(fastkey, "distribution_version",
                        lambda name: "99.0" if name == "numpy" else real_version(name))
    assert status() == ("cached", artifact) and children == [trace]
    # tfcheck, TVM or the compiler's sources: a new key, built again
    versions = driver.versions
    monkeypatch.setattr(driver, "versions", lambda: {**versions(), "tvm": "99.0"})
    outcome, upgraded = status()
    assert (outcome, children) == ("built", [trace, compile_]) and upgraded not in seen


TWO = '''
import tensorflow as tf
import tfcheck


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 2], tf.float32)])
def double(x):
    return x * 2.0


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
def unknown_batch(x):
    return x * 2.0 + 1.0
'''


@pytest.mark.slow
def test_jobs_2_gives_the_report_and_artifacts_of_jobs_1(project: Callable[..., Path],
                                                        run_cli: Callable[..., Result]) -> None:
    folder = project({"a.py": TWO, "b.py": textwrap.dedent(TWO).replace("x * 2.0", "x * 3.0")})
    reports = []
    for jobs in ("2", "1"):
        result = run_cli(folder, "build", "--jobs", jobs, "--cache-dir", str(folder / f".cache-{jobs}"),
                         "--format", "json")
        reports.append([(r["function"], r["status"], r["artifact"] and Path(r["artifact"]).name, r["message"])
                        for r in json.loads(result.stdout)["functions"]])
    assert reports[0] == reports[1]
    assert [(function, status) for function, status, _, _ in reports[0]] == [
        ("a.double", "built"), ("a.unknown_batch", "built"), ("b.double", "built"), ("b.unknown_batch", "built")]
