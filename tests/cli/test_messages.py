"""One true message per outcome (issue 40): no success line after an error, a warning when nothing
was checked, errors that name what is wrong, and the total under `--statistics` (docs/cli.md)."""

from __future__ import annotations

import pytest

BAD = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    assert tf.reduce_sum(x) > 0\n    return x\n"
GOOD = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    return x\n"
BROKEN = "def f(:\n    pass\n"


def test_check_on_a_missing_path_prints_only_the_error(project, run_cli) -> None:
    result = run_cli(project({}), "check", "does/not/exist")
    assert result.exit_code == 2
    assert result.stderr == "tfcheck: error: does/not/exist: no such file or directory\n"
    assert result.stdout == ""


def test_check_with_an_error_beside_checked_files_does_not_say_all_passed(project, run_cli) -> None:
    result = run_cli(project({"good.py": GOOD}), "check", "good.py", "missing.py")
    assert result.exit_code == 2
    assert "All checks passed" not in result.stdout
    assert result.stdout.strip() == "No findings in 1 file, but 1 error: not everything was checked."


@pytest.mark.parametrize("command", ["build", "inspect"])
def test_build_on_a_missing_path_prints_only_the_error(project, run_cli, command: str) -> None:
    result = run_cli(project({}), command, "does/not/exist.py")
    assert result.exit_code == 2
    assert result.stderr == "tfcheck: error: does/not/exist.py: no such file, folder or module\n"
    assert result.stdout == ""


@pytest.mark.parametrize("text", [BROKEN, "import tfcheck\n\n@tfcheck.aot\n" + BROKEN], ids=["plain", "mentions-aot"])
def test_build_on_a_file_with_a_syntax_error_names_file_and_line(project, run_cli, text: str) -> None:
    """Whether the file mentions tfcheck or not: exit 2, as for a file that cannot be read."""
    result = run_cli(project({"broken.py": "\n" + text}), "build", "broken.py")
    assert result.exit_code == 2
    line = 2 if text == BROKEN else 5
    assert result.stderr == f"tfcheck: error: broken.py:{line}: syntax error: invalid syntax\n"
    assert "no @tfcheck.aot functions found" not in result.stdout


def test_build_finds_a_syntax_error_in_a_folder(project, run_cli) -> None:
    result = run_cli(project({"pkg/ok.py": GOOD, "pkg/broken.py": BROKEN}), "build", "pkg")
    assert result.exit_code == 2
    assert "broken.py:1: syntax error" in result.stderr


def test_check_on_an_empty_folder_warns_that_nothing_was_checked(project, run_cli) -> None:
    root = project({"empty/notes.txt": "not Python\n"})
    result = run_cli(root, "check", "empty")
    assert result.exit_code == 0
    assert result.stderr.startswith("tfcheck: warning: no files to check in empty (")
    assert "All checks passed" not in result.stdout


def test_output_file_under_a_file_says_the_parent_is_a_file(project, run_cli) -> None:
    root = project({"bad.py": BAD})
    for target in ("bad.py/x.json", "bad.py/deeper/x.json"):
        result = run_cli(root, "check", "--format", "json", "--output-file", target, "bad.py")
        assert result.exit_code == 2
        assert result.stderr == f"tfcheck: error: cannot write {target}: bad.py is a file, not a folder\n"


def test_statistics_end_with_the_total(project, run_cli) -> None:
    result = run_cli(project({"bad.py": BAD, "worse.py": BAD}), "check", "--statistics", ".")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == "Found 2 findings in 2 files (2 fixable with --fix [*])."
