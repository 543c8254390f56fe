"""What `tfcheck build` tells the user, as functions of what it knows (no TensorFlow, no build):
the summary under the table, and the hint for a function without an input_signature."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from tfcheck.commands.build import _print_table, summary_lines
from tfcheck.compiler.driver import BuildRecord
from tfcheck.compiler.trace import _tensor_parameters, signature_hint


def record(status: str, name: str, cache: Path, out: Path | None = None) -> BuildRecord:
    result = BuildRecord(f"models.{name}", name, "llvm:znver5", status)
    if status in ("built", "cached"):
        result.artifact = str(cache / f"{name}-key")
        result.exported = str(out / name) if out else None
    return result


def test_summary_counts_statuses_and_says_where_artifacts_went(tmp_path: Path) -> None:
    cache, out = tmp_path / "cache", tmp_path / "deploy"
    records = [record("built", "a", cache, out), record("failed", "b", cache), record("cached", "c", cache, out),
               record("built", "d", cache, out), record("failed", "e", cache), record("built", "f", cache, out)]
    assert summary_lines(records) == ["3 built, 1 cached, 2 failed", f"artifacts in the cache {cache}",
                                      f"exported to {out}/: a, c, d, f"]
    assert summary_lines([record("failed", "b", cache)]) == ["1 failed"]


def test_the_table_ends_with_the_summary(tmp_path: Path) -> None:
    stream = io.StringIO()
    _print_table([record("built", "a", tmp_path, tmp_path / "out"), record("failed", "b", tmp_path)],
                 Console(file=stream, width=200))
    assert stream.getvalue().splitlines()[-3:] == ["1 built, 1 failed", f"artifacts in the cache {tmp_path}",
                                                   f"exported to {tmp_path / 'out'}/: a"]


@pytest.mark.parametrize(("parameters", "entries", "specs"), [
    (["images", "labels"], None,
     "[tf.TensorSpec([...], tf.float32, name='images'), tf.TensorSpec([...], tf.float32, name='labels')]"),
    (["x"], [((1, 8),), ((4, 8),)], "[tf.TensorSpec([None, 8], tf.float32, name='x')]"),
    (["a", "b"], [((2, 3), (3,))], "[tf.TensorSpec([2, 3], tf.float32, name='a'), tf.TensorSpec([3], tf.float32, name='b')]"),
    (["a", "b"], [((2, 3),)], "[tf.TensorSpec([...], tf.float32, name='a'), tf.TensorSpec([...], tf.float32, name='b')]"),
    (["x"], [((1, 8),), ((1, 8, 3),)], "[tf.TensorSpec([...], tf.float32, name='x')]"),
])
def test_the_signature_hint_uses_what_is_known(parameters: list[str], entries: list | None, specs: str) -> None:
    hint = signature_hint(parameters, entries)
    assert hint.startswith("no input_signature") and f"@tf.function(input_signature={specs})" in hint
    assert "224" not in hint


def test_the_hint_names_the_tensor_parameters() -> None:
    def f(images, labels, training=False, *rest, scale=1.0): ...
    def g(x=None): ...
    assert _tensor_parameters(f) == ["images", "labels"]
    assert _tensor_parameters(g) == ["x"]
