"""Issue 6's acceptance: build the whole zoo, load it in a fresh process that has no TensorFlow
imported, and every function returns TensorFlow's result (computed in another process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.zoo_check import REPO, check_zoo

pytestmark = pytest.mark.slow

ZOO = ["mlp.py", "cnn_bn.py", "attention.py", "lstm.py", "range_loop.py", "mobilenet_v2.py", "resnet50.py"]


def test_every_zoo_function_matches_tensorflow_without_tensorflow(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    build = subprocess.run(
        [sys.executable, "-m", "tfcheck", "build", *(f"fixtures/aot/{name}" for name in ZOO),
         "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--format", "json"],
        cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert len(json.loads(build.stdout)["functions"]) == len(ZOO)
    assert check_zoo(out, tmp_path / "work"), capsys.readouterr().out
    report = capsys.readouterr().out
    assert report.count(": max |artifact - TensorFlow|") == len(ZOO) and "DIFFERS" not in report
