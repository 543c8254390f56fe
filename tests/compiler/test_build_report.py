"""What `tfcheck build` tells the user, as functions of what it knows (no TensorFlow, no build):
the summary under the table, and the hints for a function without an input_signature or with
unknown dimensions."""

from __future__ import annotations

import ast
import io
import re
import tomllib
from pathlib import Path

import pytest
from rich.console import Console

from tfcheck.aot import normalize_shapes
from tfcheck.commands.build import _print_table, summary_lines
from tfcheck.compiler.build.driver import BuildRecord
from tfcheck.compiler.trace.symbolic import entries_example
from tfcheck.compiler.trace.tracing import _tensor_parameters, signature_hint
from tfcheck.config import parse_table
from tfcheck.runtime.manifest import SymbolicDim


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


@pytest.mark.parametrize("shapes", [[[None, 4]], [[None, 4], [None]], [[2, None, 3]], [["batch", 4], ["batch"]]])
def test_the_unknown_dimension_hint_shows_both_spellings_that_work(shapes: list) -> None:
    example = entries_example(shapes, "models.f")
    decorated, configured = re.fullmatch(r"@tfcheck\.aot\(shapes=(.*)\) or, in pyproject\.toml, "
                                         r"\[tool\.tfcheck\.build\] (shapes = .*)", example).groups()
    table = tomllib.loads(f"[tool.tfcheck.build]\n{configured}\n")["tool"]["tfcheck"]
    from_config = parse_table(table, Path("pyproject.toml")).build.shapes["models.f"]
    from_decorator = normalize_shapes(ast.literal_eval(decorated))
    assert [[list(shape) for shape in entry] for entry in from_decorator] == from_config
    assert len(from_config) == 2 and all(None not in shape for entry in from_config for shape in entry)


def test_the_unknown_dimension_hint_takes_the_sizes_the_dims_allow() -> None:
    """MobileNetV2 for images of 96 to 224 pixels a side was offered `(1, 1, 1, 3)` and `(1, 8, 8, 3)`."""
    dims = {"images_1": SymbolicDim(96, 224), "images_2": SymbolicDim(96, 224), "batch": SymbolicDim(2, None)}
    example = entries_example([["batch", "images_1", "images_2", 3]], "models.f", dims=dims)
    assert example.startswith("@tfcheck.aot(shapes=[(2, 96, 96, 3), (8, 224, 224, 3)])")


def test_a_mismatch_of_a_function_with_a_top_k_says_why_its_order_may_differ(tmp_path: Path) -> None:
    """retinanet-tensorflow2.x filters its detections with tf.nn.top_k(..., sorted=False) of fewer
    than the axis: the artifact's order (sorted) is not TensorFlow's, which the mismatch message has
    to explain, reading k and the axis from the variant's flatbuffer."""
    tf = pytest.importorskip("tensorflow")
    from tfcheck.compiler.build.driver import _top_k_order_hint
    from tfcheck.compiler.process.messages import OperatorCount, TracedVariant
    from tfcheck.compiler.trace.bridge import freeze, to_tflite

    top_k = tf.function(lambda scores: tf.nn.top_k(scores, 10, sorted=False),
                        input_signature=[tf.TensorSpec([4, 40], tf.float32)])
    (tmp_path / "model.tflite").write_bytes(to_tflite(freeze(top_k.get_concrete_function())))

    def variant(*ops: str) -> TracedVariant:
        return TracedVariant(str(tmp_path), [], "sha", "captures", "key",
                             operators=[OperatorCount(op, 1, f"model/filter/{op.lower()};other") for op in ops])

    assert _top_k_order_hint(variant("CONV_2D", "ADD")) == ""
    hint = _top_k_order_hint(variant("CONV_2D", "TOPK_V2"))
    assert "the top 10 of 40 (TensorFlow node '" in hint and "pass sorted=True" in hint
    assert "within rounding of each other may still trade places" in hint
