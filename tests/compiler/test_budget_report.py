"""A kernel over the code-size budget builds with a simpler schedule, and the build says which."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

pytestmark = pytest.mark.slow

POLYNOMIAL = '''
import tensorflow as tf
import tfcheck

W = tf.random.stateless_normal([16, 32], seed=[1, 2]) * 0.1


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([8, 16], tf.float32)])
def polynomial(x):
    # the matmul's epilogue, inlined, grows 3x per step: 3^8 nodes per element, copied per register tile
    y = tf.matmul(x * 0.1, W)
    for _ in range(8):
        y = y * y + y
    return y
'''


def test_the_kernel_that_fell_back_is_in_the_manifest_and_the_build_output(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    folder = project({"exploding.py": POLYNOMIAL})
    result = run_cli(folder, "build", "--cache-dir", str(folder / "cache"))
    assert result.exit_code == 0, result.output
    [manifest_path] = (folder / "cache").rglob("manifest.json")
    manifest = json.loads(manifest_path.read_text())
    [fallback] = manifest["budget_fallbacks"]
    assert fallback["schedule"] == "schedule_fallback" and manifest["verify"]["passed"] is True
    assert [entry["rule"] for entry in fallback["refused"]] == ["schedule_contraction"]
    output = " ".join(result.output.split())  # rich wraps long lines
    assert f"• exploding.polynomial: kernel {fallback['kernel']} built with schedule_fallback: the schedule of " \
           "schedule_contraction (" in output
    assert f"was over the code-size budget of {fallback['budget']:,} TIR nodes after unrolling" in output
