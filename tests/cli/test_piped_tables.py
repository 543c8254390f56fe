"""Tables written to a pipe or a file are whole (issue 40, item 5): rich cut cells to 80 columns
with `…` where stdout is not a terminal (`tfcheck rules > rules.txt` gave `python-container-in-graph-lo…`)."""

from __future__ import annotations

import pytest

from tfcheck.commands import bench, build
from tfcheck.compiler.bench.latency import FunctionBench, Measurement
from tfcheck.compiler.build.driver import BuildRecord
from tfcheck.rule import all_rules
from tfcheck.runtime.manifest import TensorSpec

LONG_NAME = "models.a_rather_long_package_name.with_submodules.serving_signature_for_the_classifier"


def test_rules_are_whole_when_piped(project, run_cli) -> None:
    result = run_cli(project({}), "rules")
    assert result.exit_code == 0
    assert "…" not in result.stdout
    lines = result.stdout.splitlines()
    for rule in all_rules():
        assert any(rule.name in line and rule.summary() in line for line in lines), rule.code


def test_the_bench_table_is_whole_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    result = FunctionBench(LONG_NAME, [TensorSpec("images", (1, 224, 224, 3), "float32")],
                           [Measurement(backend, median_ms=1.25, ratio=1.0) for backend in bench.BACKENDS])
    bench._print_table([result], bench.table_console())
    printed = capsys.readouterr().out
    assert "…" not in printed
    assert LONG_NAME in printed and "float32[1, 224, 224, 3]" in printed and "tf.function" in printed


def test_the_build_table_is_whole_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    record = BuildRecord(LONG_NAME, "classifier", "llvm -mcpu=sapphirerapids -num-cores=16", "built", seconds=12.5,
                         ops=42, max_abs_error=1e-6, max_rel_error=2e-6, size=3_000_000)
    build._print_table([record], build._console("text"))
    printed = capsys.readouterr().out
    assert "…" not in printed
    assert LONG_NAME in printed and "llvm -mcpu=sapphirerapids -num-cores=16" in printed
