"""`tfcheck run`, `tfcheck ls` and `tfcheck clean`."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from tfcheck.cli import main


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_run_writes_named_outputs(artifacts, tmp_path):
    out = artifacts(("addmul", (2, 3)))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", x * 3)
    result = _invoke("run", str(out), "-i", str(tmp_path / "x.npy"), "-i",
                     f"y={tmp_path / 'y.npy'}", "-o", str(tmp_path / "result.npz"))
    assert result.exit_code == 0, result.output
    saved = np.load(tmp_path / "result.npz")
    np.testing.assert_array_equal(saved["sum"], x * 4)
    np.testing.assert_array_equal(saved["prod"], x * 4 * x)
    assert "sum: float32[2, 3]" in result.output


def test_run_single_output_to_npy_and_errors(artifacts, tmp_path):
    out = artifacts(("scale", (1, 4)), ("addmul", (2, 3)))
    np.save(tmp_path / "x.npy", np.ones((1, 4), np.float32))
    ambiguous = _invoke("run", str(out), "-i", str(tmp_path / "x.npy"))
    assert ambiguous.exit_code == 2 and "choose one with --function" in ambiguous.output
    ok = _invoke("run", str(out), "-f", "scale", "-i", str(tmp_path / "x.npy"),
                 "-o", str(tmp_path / "y.npy"))
    assert ok.exit_code == 0, ok.output
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.full((1, 4), 3.0))
    np.save(tmp_path / "bad.npy", np.ones((2, 4), np.float32))
    bad = _invoke("run", str(out), "-f", "scale", "-i", str(tmp_path / "bad.npy"))
    assert bad.exit_code == 2 and "argument 'x' has shape (2, 4), expected x: float32[1, 4]" in bad.output


def test_ls_lists_and_clean_empties_the_cache(artifacts, tmp_path, monkeypatch):
    cache = artifacts(("scale", (1, 4)), ("addmul", (2, 3)))
    (cache / "index.json").write_text("{}", encoding="utf-8")
    (cache / "notes").mkdir()
    listing = json.loads(_invoke("ls", "--cache-dir", str(cache), "--format", "json").output)
    assert [(row["function"], row["shapes"], row["target"]) for row in listing] == [
        ("demo.models.addmul", "(2, 3), (2, 3)", "llvm:x86-64"),
        ("demo.models.scale", "(1, 4)", "llvm:x86-64")]
    assert all(row["size_bytes"] > 1000 and row["age_seconds"] > 0 for row in listing)
    text = _invoke("ls", "--cache-dir", str(cache)).output
    assert text.splitlines()[0].split() == ["FUNCTION", "TARGET", "SHAPES", "SIZE", "AGE", "KEY"]
    lint_cache = tmp_path / ".tfcheck_cache"
    lint_cache.mkdir()
    monkeypatch.chdir(tmp_path)
    (cache / ".fastkeys").mkdir()
    (cache / ".fastkeys" / "0123abcd").write_text("{}")
    cleaned = _invoke("clean", "--cache-dir", str(cache))
    assert "removed 2 artifact(s)" in cleaned.output
    assert sorted(p.name for p in cache.iterdir()) == ["notes"]  # not an artifact: kept
    assert lint_cache.is_dir()
    _invoke("clean", "--cache-dir", str(cache), "--lint-cache")
    assert not lint_cache.exists()
    assert "no artifacts in" in _invoke("ls", "--cache-dir", str(cache)).output


def test_ls_and_clean_follow_the_project_configuration(artifacts, tmp_path, monkeypatch):
    cache = artifacts(("scale", (1, 4)))
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.tfcheck]\ncache-dir = "lint"\n\n[tool.tfcheck.build]\ncache-dir = "{cache}"\n',
        encoding="utf-8")
    (tmp_path / "lint").mkdir()
    monkeypatch.chdir(tmp_path)
    listing = json.loads(_invoke("ls", "--format", "json").output)
    assert [row["function"] for row in listing] == ["demo.models.scale"]
    assert "removed 1 artifact(s)" in _invoke("clean", "--lint-cache").output
    assert not (tmp_path / "lint").exists()
