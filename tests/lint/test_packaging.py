"""The package as users get it: a plain (non-editable) install, the linter alone, and the pre-commit hook."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_env, fresh_venv

pytestmark = pytest.mark.slow


def test_wheel_installs_rules_and_compiler_inside_tfcheck(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.startswith("tfcheck-")}
    assert tops == {"tfcheck"}, f"top-level packages other than tfcheck: {tops}"
    assert "tfcheck/rules/tfc001_print_in_graph.py" in names
    assert "tfcheck/compiler/__init__.py" in names


def test_pre_commit_hook_runs_through_pre_commit(tmp_path: Path) -> None:
    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent))
    assert pre_commit, "pre-commit is in the dev extra"
    repo = tmp_path / "user-repo"
    repo.mkdir()
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    run = lambda *args: subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True)
    run("git", "init", "-q")
    (repo / "good.py").write_text("import tensorflow as tf\n\n@tf.function\ndef f(x):\n    return x\n")
    (repo / "bad.py").write_text("import tensorflow as tf\n\n@tf.function\ndef f(x):\n    print(x)\n    return x\n")
    (repo / "notes.txt").write_text("print(x)\n")
    run("git", "add", ".")
    result = run(pre_commit, "try-repo", str(REPO), "tfcheck", "--all-files")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "bad.py:5:5: TFC001" in result.stdout
    assert "good.py" not in result.stdout.split("Failed")[-1] and "notes.txt" not in result.stdout
    (repo / "bad.py").write_text("import tensorflow as tf\n\n@tf.function\ndef f(x):\n    tf.print(x)\n    return x\n")
    run("git", "add", ".")
    result = run(pre_commit, "try-repo", str(REPO), "tfcheck", "--all-files")
    assert result.returncode == 0, result.stdout + result.stderr


BAD = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    print(x)\n    return x\n"
# Modules that only the extras bring; none may be importable in a linter-only install.
HEAVY = ("numpy", "tensorflow", "tvm", "tvm_ffi", "tflite")


def test_the_linter_alone_installs_and_runs_without_the_extras(wheel: Path, tmp_path: Path) -> None:
    """`pip install tfcheck` (libcst, click, rich): full help, a working check, and from each command
    that needs an extra its help, then a clear message with exit 2 when it runs."""
    from tfcheck.cli import COMMANDS

    bin_dir = fresh_venv(tmp_path / "venv", str(wheel))
    project = tmp_path / "project"
    project.mkdir()
    (project / "bad.py").write_text(BAD)
    run = lambda *args: subprocess.run([str(bin_dir / "tfcheck"), *args], cwd=project, env=clean_env(),
                                       capture_output=True, text=True, timeout=120)
    probe = subprocess.run([str(bin_dir / "python"), "-c", "import importlib.util as u; "
                            f"print([m for m in {HEAVY!r} if u.find_spec(m)])"],
                           cwd=project, env=clean_env(), capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "[]", "the linter-only install must not bring the extras"
    help_text = run("--help")
    assert help_text.returncode == 0, help_text.stderr
    assert all(f"  {name} " in help_text.stdout for name in COMMANDS)
    check = run("check", "--no-cache", "bad.py")
    assert check.returncode == 1, check.stderr
    assert "bad.py:5:5: TFC001" in check.stdout
    for name in ("rules", "ls", "clean"):
        assert run(name).returncode == 0, name
    for name, entry in COMMANDS.items():
        if entry.extra is not None:
            helped = run(name, "--help")
            assert helped.returncode == 0 and "Options:" in helped.stdout, (name, helped.stderr)
            result = run(name, *{"bench": ["bad.py"], "run": ["."]}.get(name, []))
            assert result.returncode == 2, (name, result.stdout, result.stderr)
            assert f"tfcheck {name} needs the {entry.extra} extra: pip install 'tfcheck[{entry.extra}]'" \
                in result.stderr
