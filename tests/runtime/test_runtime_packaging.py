"""`pip install 'tfcheck[runtime]'` as production gets it: loads and runs a prebuilt artifact with
neither TensorFlow nor tfcheck's compiler importable, and `tfcheck build` asks for its extra."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import clean_env, fresh_venv

pytestmark = pytest.mark.slow

LOAD_AND_RUN = """
import importlib.util, sys
import numpy as np
import tfcheck
library = tfcheck.load(sys.argv[1])
print(library["scale"](np.ones((1, 4), np.float32)).tolist())
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "tvm") or m.startswith("tfcheck.compiler"))
print(loaded, importlib.util.find_spec("tensorflow"))
"""


def test_the_runtime_extra_loads_an_artifact_without_tensorflow(
        wheel: Path, tmp_path: Path, artifacts: Callable[..., Path]) -> None:
    out = artifacts(("scale", (1, 4)))
    bin_dir = fresh_venv(tmp_path / "venv", f"{wheel}[runtime]")
    ran = subprocess.run([str(bin_dir / "python"), "-c", LOAD_AND_RUN, str(out)], cwd=tmp_path, env=clean_env(),
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["[[3.0, 3.0, 3.0, 3.0]]", "[] None"]
    np.save(tmp_path / "x.npy", np.ones((1, 4), np.float32))
    tfcheck = lambda *args: subprocess.run([str(bin_dir / "tfcheck"), *args], cwd=tmp_path, env=clean_env(),
                                           capture_output=True, text=True, timeout=120)
    cli_run = tfcheck("run", str(out), "-i", "x.npy", "-o", "y.npy")
    assert cli_run.returncode == 0, cli_run.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.full((1, 4), 3.0))
    build = tfcheck("build")
    assert build.returncode == 2
    assert "tfcheck build needs the build extra: pip install 'tfcheck[build]'" in build.stderr
