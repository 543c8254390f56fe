"""A sample of the operator-coverage sweep (benchmarks/coverage_sweep.py) builds and verifies in CI.

The full sweep (every keras.applications model, recurrent layers, convolutions, attention,
post-processing operators) takes hours on a 2-core machine; it is a benchmark command, and its
table is in docs/build.md. Here its `SAMPLE` is built in one `tfcheck build` run: each case
must build and verify against TensorFlow, or, if the sweep documents it as unsupported, fail
with the operator named and a reason, never crash the build or the other cases.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, load_benchmark
from tfcheck.compiler.trace.discover import discover

SWEEP = load_benchmark("coverage_sweep")


def test_every_case_is_one_discoverable_function(tmp_path: Path) -> None:
    SWEEP.write_modules(SWEEP.ALL, tmp_path)
    found = discover(sorted(tmp_path.glob("*.py")))
    assert not found.errors
    assert sorted(f.label for f in found.functions) == sorted(f"{c.name}.{c.name}" for c in SWEEP.ALL)
    assert all(f.problem is None for f in found.functions)


def test_sample_names_existing_cases() -> None:
    assert len(SWEEP.SAMPLE) == len(SWEEP.SAMPLE_NAMES) + 1
    assert {case.family for case in SWEEP.SAMPLE} == {"recurrent", "convolution", "postprocess", "keras.applications"}


def test_table_lists_failures_with_their_reason_and_the_cases_not_run() -> None:
    outcomes = [SWEEP.Outcome("top_k", "postprocess", "built", ["TOPK_V2"], 9.5, 500.0, 0.0, 0.0,
                              latency_ms={"tf.function": 2.0, "tflite": 1.0, "tvm": 0.5}),
                SWEEP.Outcome("nms", "postprocess", "failed", message="TVM cannot import | NMS")]
    table = SWEEP.markdown(outcomes, ["app_vgg16"])
    assert "| top_k | postprocess | built | TOPK_V2 | 9.5 | 500 | 0.0e+00 / 0.0e+00 | 2 | 1 (0.50x) | 0.5 (0.25x) |" \
        in table
    assert "failed: TVM cannot import \\| NMS" in table
    assert "1 of 2 cases built and verified.\nNot run: app_vgg16." in table


def test_docs_table_is_replaced_between_the_markers(tmp_path: Path) -> None:
    doc = tmp_path / "build.md"
    doc.write_text(f"before\n{SWEEP.START}\nold\n{SWEEP.END}\nafter\n")
    SWEEP.write_docs(doc, "new table")
    assert doc.read_text() == f"before\n{SWEEP.START}\nnew table\n{SWEEP.END}\nafter\n"


@pytest.mark.slow
def test_sample_builds_and_verifies_or_names_the_operator(tmp_path: Path) -> None:
    SWEEP.write_modules(SWEEP.SAMPLE, tmp_path / "modules")
    process = subprocess.run(
        [sys.executable, "-m", "tfcheck", "build", str(tmp_path / "modules"), "--cache-dir", str(tmp_path / "cache"),
         "--format", "json"],
        cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    report = json.loads(process.stdout)
    records = {record["function"]: record for record in report["functions"]}
    assert sorted(records) == sorted(f"{case.name}.{case.name}" for case in SWEEP.SAMPLE), report["errors"]
    for case in SWEEP.SAMPLE:
        record = records[f"{case.name}.{case.name}"]
        if case.unsupported is None:
            assert record["status"] == "built", record["message"]
            assert record["verified"] is True
        else:
            assert record["status"] == "failed"
            assert case.unsupported in record["message"], record["message"]
    expected_exit = 1 if any(case.unsupported for case in SWEEP.SAMPLE) else 0
    assert process.returncode == expected_exit, process.stderr[-2000:]
