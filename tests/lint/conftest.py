"""The linter's tests exercise its rules, the opt-in tier included: a test project written without a
configuration of its own selects every rule (`select = ["ALL"]`). A test of the defaults passes a
configuration (an empty `[tool.tfcheck]` table for the defaults themselves)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

ALL_RULES = '[tool.tfcheck]\nselect = ["ALL"]\n'


@pytest.fixture
def project(project: Callable[..., Path]) -> Callable[..., Path]:
    """tests/conftest.py's `project`, with the all-rules configuration when the test gives none."""

    def write(files: dict[str, str], config: str | None = None) -> Path:
        return project(files, ALL_RULES if config is None else config)

    return write


@pytest.fixture(autouse=True)
def _every_rule_in_tmp_path(request: pytest.FixtureRequest) -> None:
    """A test folder (`tmp_path`) starts with the all-rules configuration; a test that writes its own
    `pyproject.toml` or `tfcheck.toml` there replaces it."""
    if "tmp_path" in request.fixturenames:
        config = request.getfixturevalue("tmp_path") / "pyproject.toml"
        if not config.exists():
            config.write_text(ALL_RULES, encoding="utf-8")
