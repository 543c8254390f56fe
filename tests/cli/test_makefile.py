"""`make demo`/`make test` print no pip noise (issue 40, item 11): setuptools' "Editable installation"
warning prints through `pip install -q`, so the venv step keeps pip's output in a log and shows it
only when the install fails. Run with a stand-in Python whose "pip" only prints that warning."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

NOISE = "UserWarning: Editable installation of a project without a build backend"
FAKE_PYTHON = f"""#!/bin/sh
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0; fi
echo "{NOISE}" >&2
exit "${{FAKE_PIP_STATUS:-0}}"
"""

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _make_venv(tmp_path: Path, pip_status: int) -> subprocess.CompletedProcess[str]:
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    (tmp_path / "pyproject.toml").write_text("")
    return subprocess.run(["make", "-f", str(REPO / "Makefile"), "-C", str(tmp_path), "venv",
                           f"PYTHON={python}", f"VENV={tmp_path / 'venv'}"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "FAKE_PIP_STATUS": str(pip_status)})


def test_a_successful_install_prints_no_pip_output(tmp_path: Path) -> None:
    result = _make_venv(tmp_path, 0)
    assert result.returncode == 0, result.stderr
    assert NOISE not in result.stdout + result.stderr
    assert NOISE in (tmp_path / "venv" / "pip-install.log").read_text()


def test_a_failed_install_shows_pip_output(tmp_path: Path) -> None:
    result = _make_venv(tmp_path, 1)
    assert result.returncode != 0
    assert NOISE in result.stdout + result.stderr
