"""Whole real code bases and generated programs: tfcheck must never fail internally on any of them."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings

from tfcheck.analysis import analyze, selected_rules
from tfcheck.config import Config
from tfcheck.jobs import FileJob

SITE = Path(sysconfig.get_paths()["purelib"])
CORPORA = {
    "stdlib": Path(sysconfig.get_paths()["stdlib"]),
    "tensorflow-keras": [SITE / "tensorflow" / "python", SITE / "keras" / "src"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CORPORA))
def test_a_real_code_base_runs_without_internal_errors(name: str, tmp_path: Path) -> None:
    paths = CORPORA[name] if isinstance(CORPORA[name], list) else [CORPORA[name]]
    missing = [p for p in paths if not p.is_dir()]
    if missing:
        pytest.skip(f"not installed: {missing}")
    command = [sys.executable, "-m", "tfcheck", "check", "--format", "json", "--exit-zero",
               "--cache-dir", str(tmp_path / "cache"), *map(str, paths)]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "internal error" not in result.stderr, result.stderr[-3000:]
    json.loads(result.stdout)


PROLOGUE = "import tensorflow as tf\n\n@tf.function\ndef _graph(x):\n    return x\n\n"


def _analyse(code: str, tmp_path: Path) -> None:
    """Analyse generated code as a graph-code candidate, so the engine and all rules see all of it."""
    path = tmp_path / "generated.py"
    path.write_text(PROLOGUE + code, encoding="utf-8")
    config = Config(root=tmp_path, select=("ALL",))
    result = analyze(FileJob(path, "generated.py", "generated.py", "generated", False), config, _RULES)
    assert not result.errors, "\n".join(map(str, result.errors)) + "\n---\n" + code


_RULES = selected_rules(Config(select=("ALL",)))
_QUIET = dict(deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                     HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@settings(max_examples=250, **_QUIET)
@given(code=hypothesmith.from_grammar())
def test_programs_generated_from_the_grammar(code: str, tmp_path: Path) -> None:
    _analyse(code, tmp_path)


@pytest.mark.slow
@settings(max_examples=40, **_QUIET)
@given(code=hypothesmith.from_node())
def test_programs_generated_from_syntax_trees(code: str, tmp_path: Path) -> None:
    _analyse(code, tmp_path)
