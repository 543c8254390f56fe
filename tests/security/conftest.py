"""Linter tests: every rule on, opt-in ones included (see tests/lint/conftest.py)."""

from tests.lint.conftest import _every_rule_in_tmp_path, project  # noqa: F401 - fixtures, shared

