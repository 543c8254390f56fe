"""Shared test helpers: write a small project to a temp folder and run the real CLI on it."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tfcheck.cli import main

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path: Path) -> Callable[..., Path]:
    """`project({"pkg/a.py": "code"}, config="...")` writes files (dedented) and returns the folder."""

    def write(files: dict[str, str], config: str | None = None) -> Path:
        for name, text in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        if config is not None:
            (tmp_path / "pyproject.toml").write_text(textwrap.dedent(config), encoding="utf-8")
        return tmp_path

    return write


def _runner() -> CliRunner:
    """A runner that keeps stderr apart from stdout (click < 8.2 needs mix_stderr=False for that)."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """Run `tfcheck ARGS` in a folder, in-process, capturing output."""

    def run(folder: Path, *args: str) -> Result:
        monkeypatch.chdir(folder)
        return _runner().invoke(main, list(args), catch_exceptions=False)

    return run
