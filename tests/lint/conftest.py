"""The linter's tests exercise its rules, the opt-in tier included: a test project written without a
configuration of its own selects every rule (`select = ["ALL"]`). A test of the defaults passes a
configuration (an empty `[tool.tfcheck]` table for the defaults themselves)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

ALL_RULES = '[tool.tfcheck]\nselect = ["ALL"]\n'


@pytest.fixture
def project(tmp_path: Path) -> Callable[..., Path]:
    """`project({"pkg/a.py": "code"}, config="...")` writes files (dedented) and returns the folder."""

    def write(files: dict[str, str], config: str | None = None) -> Path:
        for name, text in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        (tmp_path / "pyproject.toml").write_text(textwrap.dedent(config) if config is not None else ALL_RULES,
                                                 encoding="utf-8")
        return tmp_path

    return write


@pytest.fixture(autouse=True)
def _every_rule_in_tmp_path(request: pytest.FixtureRequest) -> None:
    """A test folder (`tmp_path`) starts with the all-rules configuration; a test that writes its own
    `pyproject.toml` or `tfcheck.toml` there replaces it."""
    if "tmp_path" in request.fixturenames:
        config = request.getfixturevalue("tmp_path") / "pyproject.toml"
        if not config.exists():
            config.write_text(ALL_RULES, encoding="utf-8")
