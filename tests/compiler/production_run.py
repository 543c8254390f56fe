"""Building a module of annotated functions with `tfcheck build`, and running what it exported in a
process of its own that imports neither TVM nor TensorFlow: production's runtime alone, as a
deployment loads an artifact (tests of data-sized outputs, greedy decoding, float64 functions)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from tests.conftest import REPO

# What every script given to `run_exported` starts from: the exported folder as `library`, the
# inputs as `inputs` (an npz), the outputs to save to `sys.argv[3]`.
PRELUDE = '''
import sys
import numpy as np
import tfcheck

library = tfcheck.load(sys.argv[1])
inputs = np.load(sys.argv[2])
'''
# And what it ends with: the check that neither was imported.
CHECK = '''
assert "tvm" not in sys.modules and "tensorflow" not in sys.modules, sorted(sys.modules)
'''


def build_exported(module: Path, tmp_path: Path, *args: str) -> dict[str, dict[str, Any]]:
    """`tfcheck build MODULE --out tmp_path/out` in a child process; its JSON records by name."""
    build = subprocess.run(
        [sys.executable, "-m", "tfcheck", "build", str(module), "--cache-dir", str(tmp_path / "cache"),
         "--out", str(tmp_path / "out"), "--format", "json", *args],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    return {record["name"]: record for record in json.loads(build.stdout)["functions"]}


def run_exported(tmp_path: Path, body: str, inputs: dict[str, np.ndarray]) -> Any:
    """Run `body` (after `PRELUDE`, before `CHECK` and saving its `results` dict to an npz) on
    `inputs` against `tmp_path/out`, in a process of its own; the saved results."""
    np.savez(tmp_path / "inputs.npz", **inputs)
    script = PRELUDE + textwrap.dedent(body) + CHECK + "np.savez(sys.argv[3], **results)\n"
    (tmp_path / "run.py").write_text(script)
    run = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path / "out"), str(tmp_path / "inputs.npz"),
                          str(tmp_path / "outputs.npz")], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return np.load(tmp_path / "outputs.npz")
