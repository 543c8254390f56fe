"""The package as users get it: a plain (non-editable) install and the pre-commit hook."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def test_wheel_installs_rules_and_compiler_inside_tfcheck(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(tmp_path), str(REPO)], check=True)
    [wheel] = tmp_path.glob("tfcheck-*.whl")
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
