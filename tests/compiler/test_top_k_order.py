"""The order of a top k: the artifact equals TensorFlow wherever TensorFlow defines it, and a
mismatch blames `sorted=False` only where it can be the cause (compiler/frontend/top_k_order.py;
issue 42). srihari-humbarwadi/retinanet-tensorflow2.x's `FilterTopKDetections._filter_per_class`
(retinanet/model/layers/postprocessing_ops.py at 0df3de0) takes `tf.nn.top_k(scores, top_k,
sorted=False)` with `top_k = min(self.top_k, num_anchors)`: 5000 of 76725 anchors at 640x640, so
its order is TensorFlow's heap's; with fewer anchors than `top_k` (a small image) it is all of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result

tf = pytest.importorskip("tensorflow")
tvm = pytest.importorskip("tvm")

from tests.compiler.tflite_run import run_tvm  # noqa: E402
from tfcheck.compiler.frontend.top_k_order import TopK, order_hint, top_ks  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, to_tflite  # noqa: E402

ROWS, ANCHORS = 4, 40


def top_k_function(k: int, sorted_: bool) -> Callable[..., Any]:
    """The per-class filter's top k over [classes, anchors] scores, as the repository writes it."""
    return tf.function(lambda scores: tf.nn.top_k(scores, k, sorted=sorted_),
                       input_signature=[tf.TensorSpec([ROWS, ANCHORS], tf.float32)])



@pytest.mark.parametrize("k, sorted_", [(10, True), (ANCHORS, False), (ANCHORS, True), (1, False)],
                         ids=["sorted", "all-unsorted", "all-sorted", "one-unsorted"])
def test_the_artifact_keeps_the_order_tensorflow_defines_ties_included(k: int, sorted_: bool) -> None:
    scores = np.random.default_rng(0).integers(0, 5, (ROWS, ANCHORS)).astype(np.float32)  # many exact ties
    function = top_k_function(k, sorted_)
    values, indices = run_tvm(to_tflite(freeze(function.get_concrete_function())), scores)
    want_values, want_indices = (tensor.numpy() for tensor in function(scores))
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(indices, want_indices)


def test_tensorflows_heap_order_is_neither_sorted_nor_the_inputs() -> None:
    """Why the message names sorted=False for fewer than the axis: what TensorFlow 2.21 returns."""
    scores = np.random.default_rng(0).standard_normal((ROWS, ANCHORS)).astype(np.float32)
    values, indices = (tensor.numpy() for tensor in top_k_function(10, False)(scores))
    assert not np.all(np.diff(values, axis=-1) <= 0)
    assert not np.all(np.diff(indices, axis=-1) > 0)
    np.testing.assert_array_equal(np.sort(values, axis=-1)[:, ::-1], np.sort(scores, axis=-1)[:, ::-1][:, :10])


def test_top_ks_reads_k_and_the_axis_from_the_flatbuffer(tmp_path: Path) -> None:
    path = tmp_path / "model.tflite"
    path.write_bytes(to_tflite(freeze(top_k_function(10, False).get_concrete_function())))
    [found] = top_ks(path)
    assert (found.k, found.size, found.order_defined) == (10, ANCHORS, False)
    assert "pass sorted=True" in order_hint([found]) and "the top 10 of 40" in order_hint([found])
    assert "sorted=True" not in order_hint([TopK("node", ANCHORS, ANCHORS)])


FILTER = '''
import tensorflow as tf

import tfcheck


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([4, 40], tf.float32)])
def filter_per_class(scores):
    scores, indices = tf.nn.top_k(scores, 10, sorted=SORTED)
    return scores, indices
'''


def build(run_cli: Callable[..., Result], folder: Path, sorted_: bool) -> dict[str, Any]:
    folder.mkdir()
    (folder / "topk_filter.py").write_text(FILTER.replace("SORTED", str(sorted_)), encoding="utf-8")
    result = run_cli(folder, "build", "--no-lint", "--cache-dir", str(folder / "cache"), "--format", "json",
                     "topk_filter.py")
    [record] = json.loads(result.stdout)["functions"]
    return record


def test_an_unsorted_top_k_fails_naming_sorted_false_and_the_advice_builds(
        run_cli: Callable[..., Result], tmp_path: Path) -> None:
    failed = build(run_cli, tmp_path / "unsorted", False)
    assert failed["status"] == "failed"
    assert "the top 10 of 40" in failed["message"] and "so pass sorted=True" in failed["message"]
    followed = build(run_cli, tmp_path / "sorted", True)
    assert followed["status"] == "built", followed["message"]
