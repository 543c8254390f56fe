"""The model zoo of fixtures/aot/ builds for the host CPU and matches TensorFlow.

All of it runs in CI (slow tests): ResNet50 alone takes one to two minutes and a 100 MB library.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ZOO = REPO / "fixtures" / "aot"
SMALL = {
    "mlp.py": "mlp.mlp",
    "cnn_bn.py": "cnn_bn.small_cnn",
    "attention.py": "attention.encoder",
    "lstm.py": "lstm.lstm",
    "range_loop.py": "range_loop.range_loop",
}


def build(cache: Path, *files: str) -> dict[str, dict[str, Any]]:
    process = subprocess.run(
        [sys.executable, "-m", "tfcheck", "build", *(str(ZOO / f) for f in files), "--cache-dir", str(cache),
         "--format", "json"],
        cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    report = json.loads(process.stdout)
    assert process.returncode == 0, json.dumps(report, indent=1)[-3000:] + process.stderr[-2000:]
    return {record["function"]: record for record in report["functions"]}


def assert_matches_tensorflow(record: dict[str, Any]) -> None:
    assert record["status"] == "built", record["message"]
    assert record["verified"] is True
    assert record["max_abs_error"] < 1e-3
    manifest = json.loads(Path(record["artifact"], "manifest.json").read_text())
    assert manifest["verify"]["passed"] is True


def test_small_models_build_and_match_tensorflow(tmp_path: Path) -> None:
    records = build(tmp_path, *SMALL)
    assert sorted(records) == sorted(SMALL.values())
    for record in records.values():
        assert_matches_tensorflow(record)
    structure = json.loads(Path(records["attention.encoder"]["artifact"], "manifest.json").read_text())
    assert structure["function"] == "encoder_block"
    assert structure["output_structure"] == {"kind": "dict", "keys": ["encoded", "pooled"]}
    loop = json.loads(Path(records["range_loop.range_loop"]["artifact"], "manifest.json").read_text())
    assert "WHILE" in {op["op"] for op in loop["operators"]}
    assert loop["output_structure"] == {"kind": "tuple", "length": 2}


def test_mobilenet_v2_builds_and_matches_tensorflow(tmp_path: Path) -> None:
    records = build(tmp_path, "mobilenet_v2.py")
    assert_matches_tensorflow(records["mobilenet_v2.mobilenet_v2"])


def test_resnet50_builds_and_matches_tensorflow(tmp_path: Path) -> None:
    records = build(tmp_path, "resnet50.py")
    assert_matches_tensorflow(records["resnet50.resnet50"])


def test_efficientnet_b0_builds_and_matches_tensorflow(tmp_path: Path) -> None:
    """Its squeeze-and-excitation kernels once kept LLVM busy past the build's timeout."""
    records = build(tmp_path, "efficientnet_b0.py")
    assert_matches_tensorflow(records["efficientnet_b0.efficientnet_b0"])
