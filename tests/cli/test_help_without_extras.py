"""In a linter-only install every command's help can be read (issue 40, item 4): only running a
command needs its extra, and then it says which to install (docs/cli.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import hiding_modules
from tfcheck.cli import COMMANDS

# What the build and runtime extras install, absent from a linter-only install.
EXTRA_MODULES = ("numpy", "tvm", "tvm_ffi", "tensorflow", "tflite", "ml_dtypes", "xgboost", "psutil", "cloudpickle")
NEEDS_EXTRA = sorted(name for name, entry in COMMANDS.items() if entry.extra)
ARGUMENTS = {"bench": ["src.py"], "run": ["."]}


def _run_without_extras(folder: Path, *args: str) -> dict[str, object]:
    """`tfcheck ARGS` in a process where no extra is installed: exit status, output, and which of
    the extras' modules got imported."""
    script = hiding_modules(EXTRA_MODULES) + textwrap.dedent(f"""
        import contextlib, io, json
        from tfcheck.cli import main
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main({list(args)!r}, prog_name="tfcheck")
            except SystemExit as exit:
                status = exit.code
        imported = sorted(name for name in sys.modules if name.partition('.')[0] in _HIDDEN)
        print(json.dumps({{"status": status, "stdout": out.getvalue(), "stderr": err.getvalue(), "imported": imported}}))
    """)
    completed = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True, text=True,
                               timeout=120, check=True)
    return json.loads(completed.stdout)


@pytest.mark.parametrize("name", NEEDS_EXTRA)
def test_help_works_without_the_extra(tmp_path: Path, name: str) -> None:
    result = _run_without_extras(tmp_path, name, "--help")
    assert result["status"] == 0, result["stderr"]
    assert result["stdout"].startswith(f"Usage: tfcheck {name} [OPTIONS]")
    assert "Options:" in result["stdout"] and "needs the" not in result["stderr"]
    assert result["imported"] == []


@pytest.mark.parametrize("name", NEEDS_EXTRA)
def test_running_without_the_extra_says_which_to_install(tmp_path: Path, name: str) -> None:
    (tmp_path / "src.py").write_text("x = 1\n")
    result = _run_without_extras(tmp_path, name, *ARGUMENTS.get(name, []))
    extra = COMMANDS[name].extra
    assert result["status"] == 2
    assert result["stderr"].startswith(f"tfcheck: error: tfcheck {name} needs the {extra} extra: "
                                       f"pip install 'tfcheck[{extra}]' (missing: numpy")
    assert result["stdout"] == "" and result["imported"] == []
