"""Every command: the help lists them all without importing them, the extra each needs, and the exit
status of usage, config and internal errors (docs/cli.md)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from tfcheck import cli, requirements
from tfcheck.cli import COMMANDS

GOOD = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    return x\n"
# The commands that read [tool.tfcheck]; the others take no configuration.
READS_CONFIG = ["check", "ls", "clean", "build", "inspect"]
# Arguments that get a command past click's own checks, to its callback.
ARGUMENTS = {"explain": ["TFC001"], "merge": ["report.json"], "bench": ["src"], "run": ["."]}


def test_help_lists_every_command_without_importing_any() -> None:
    code = ("import sys\nfrom tfcheck.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('tfcheck.commands') or m.split('.')[0] in "
            "('numpy', 'tensorflow', 'tvm', 'tvm_ffi', 'tfcheck.compiler')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    *help_lines, imported = result.stdout.splitlines()
    assert imported == "[]"
    listed = {line.split()[0] for line in help_lines[help_lines.index("Commands:") + 1:] if line.startswith("  ")}
    assert listed == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(project, run_cli, name: str) -> None:
    result = run_cli(project({}), name, "--help")
    assert result.exit_code == 0 and "Usage: " in result.stdout


@pytest.mark.parametrize("name", sorted(name for name, entry in COMMANDS.items() if entry.extra))
def test_a_command_without_its_extra_says_which_to_install(project, run_cli, monkeypatch, name: str) -> None:
    """Running it, not its help (tests/cli/test_help_without_extras.py): the extra is checked first."""
    monkeypatch.setitem(requirements.EXTRAS, COMMANDS[name].extra, ("tfcheck_test_absent_module",))
    result = run_cli(project({}), name, *ARGUMENTS.get(name, []))
    extra = COMMANDS[name].extra
    assert result.exit_code == 2
    assert result.stderr == (f"tfcheck: error: tfcheck {name} needs the {extra} extra: pip install "
                             f"'tfcheck[{extra}]' (missing: tfcheck_test_absent_module)\n")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_usage_error_exits_2(project, run_cli, name: str) -> None:
    result = run_cli(project({}), name, "--no-such-option")
    assert result.exit_code == 2 and "No such option" in result.stderr


@pytest.mark.parametrize("name", READS_CONFIG)
def test_config_error_exits_2(project, run_cli, name: str) -> None:
    root = project({"a.py": GOOD}, config="[tool.tfcheck]\nselekt = ['TFC001']\n")
    result = run_cli(root, name)
    assert result.exit_code == 2
    assert result.stderr.startswith("tfcheck: error: ")  # one wording for every command
    assert "unknown key [tool.tfcheck].selekt" in result.stderr and "Traceback" not in result.stderr


def _fail_with(monkeypatch: pytest.MonkeyPatch, name: str, error: BaseException) -> None:
    command = cli.main.get_command(click.Context(cli.main), name)

    def fail(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(command, "callback", fail)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_internal_error_is_a_short_message_and_exit_2(project, run_cli, monkeypatch, name: str) -> None:
    _fail_with(monkeypatch, name, RuntimeError("boom"))
    monkeypatch.delenv(cli.TRACEBACK_VARIABLE, raising=False)
    result = run_cli(project({}), name, *ARGUMENTS.get(name, []))
    assert result.exit_code == 2
    assert "tfcheck: internal error: RuntimeError: boom (test_commands.py:" in result.stderr
    assert "please report it" in result.stderr and f"{cli.TRACEBACK_VARIABLE}=1" in result.stderr
    assert "Traceback" not in result.stderr


def test_internal_error_traceback_on_request(project, run_cli, monkeypatch) -> None:
    _fail_with(monkeypatch, "rules", RuntimeError("boom"))
    monkeypatch.setenv(cli.TRACEBACK_VARIABLE, "1")
    with pytest.raises(RuntimeError, match="boom"):
        run_cli(project({}), "rules")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_error_never_exits_1(project, run_cli, monkeypatch, name: str) -> None:
    """1 means findings or failed builds; a ClickException raised by a command is an error, 2."""
    _fail_with(monkeypatch, name, click.ClickException("cannot do that"))
    result = run_cli(project({}), name, *ARGUMENTS.get(name, []))
    assert result.exit_code == 2 and "cannot do that" in result.stderr


def test_run_on_a_folder_without_artifacts_exits_2(project, run_cli) -> None:
    root = project({"empty/readme.txt": "nothing here\n"})
    result = run_cli(root, "run", "empty")
    assert result.exit_code == 2 and result.stderr.startswith("tfcheck: error: ")


def test_interrupt_exits_130(project, run_cli, monkeypatch) -> None:
    _fail_with(monkeypatch, "rules", KeyboardInterrupt())
    result = run_cli(project({}), "rules")
    assert result.exit_code == 130 and "interrupted" in result.stderr


def test_reporters_import_neither_the_runner_nor_the_analysis() -> None:
    """`tfcheck merge` renders reports of other runs: the result types it reads live apart from the runner."""
    code = ("import sys\nfrom tfcheck.output import FORMATS, renderer\nfor name in FORMATS:\n    renderer(name)\n"
            "print(sorted(m for m in sys.modules if m in ('tfcheck.runner', 'tfcheck.analysis', 'tfcheck.project')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
