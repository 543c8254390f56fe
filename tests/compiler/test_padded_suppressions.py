"""Non-max suppressions padded to their maximum (compiler/trace/padded_selections.py,
compiler/frontend/suppression_padding.py; issue 42).

zzh8829/yolov3-tf2's `yolo_nms` (yolov3_tf2/models.py at 2784050) selects boxes with
`tf.image.non_max_suppression_with_scores` (soft-NMS, sigma 0.5), counts them from the
selection's shape and pads the selection with zeros to `yolo_max_boxes`. Both its builds failed
verification on every box: TFLite's suppression always returns `max_output_size` entries, so the
converted count was 100 where TensorFlow's was the number selected, and TVM's converter padded the
indices with -1, so the padded boxes were gathered from the last box instead of box 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
tvm = pytest.importorskip("tvm")

from tests.compiler.tflite_run import run_tvm  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, to_tflite  # noqa: E402
from tfcheck.compiler.trace.tracing import tflite_operators  # noqa: E402

BOXES, MAX_BOXES = 300, 100


def yolo_nms(soft_nms_sigma: float) -> Callable[..., Any]:
    """The tail of yolo_nms as the repository writes it, from the boxes and their best scores."""

    @tf.function(input_signature=[tf.TensorSpec([BOXES, 4], tf.float32), tf.TensorSpec([BOXES], tf.float32)])
    def select(bbox: Any, scores: Any) -> Any:
        selected_indices, selected_scores = tf.image.non_max_suppression_with_scores(
            boxes=bbox, scores=scores, max_output_size=MAX_BOXES, iou_threshold=0.5, score_threshold=0.5,
            soft_nms_sigma=soft_nms_sigma)
        num_valid_nms_boxes = tf.shape(selected_indices)[0]
        selected_indices = tf.concat(
            [selected_indices, tf.zeros(MAX_BOXES - num_valid_nms_boxes, tf.int32)], 0)
        selected_scores = tf.concat(
            [selected_scores, tf.zeros(MAX_BOXES - num_valid_nms_boxes, tf.float32)], -1)
        boxes = tf.expand_dims(tf.gather(bbox, selected_indices), axis=0)
        return boxes, tf.expand_dims(selected_scores, axis=0), tf.expand_dims(num_valid_nms_boxes, axis=0)

    return select



def boxes_and_scores(score_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Random boxes, and scores of which a share over the threshold 0.5 that `score_scale` sets."""
    rng = np.random.default_rng(0)
    corners = rng.uniform(0, 0.8, (BOXES, 2)).astype(np.float32)
    bbox = np.concatenate([corners, corners + rng.uniform(0.05, 0.2, (BOXES, 2)).astype(np.float32)], axis=1)
    return bbox, (rng.uniform(0, 1, BOXES) * score_scale).astype(np.float32)


# Scores over the threshold 0.5 for none of the boxes, some (fewer than MAX_BOXES), and more than
# MAX_BOXES (where soft-NMS, which TensorFlow never suppresses outright, kept other boxes than
# TensorFlow from the 80th on while TVM followed TFLite's kernel).
@pytest.mark.parametrize("sigma, scale, selected", [
    (0.5, 0.45, 0), (0.5, 0.55, 24), (0.5, 1.0, MAX_BOXES), (0.0, 0.45, 0), (0.0, 0.55, 30), (0.0, 1.0, MAX_BOXES),
], ids=["soft-none", "soft-some", "soft-full", "hard-none", "hard-some", "hard-full"])
def test_yolo_nms_padded_by_hand_matches_tensorflow(sigma: float, scale: float, selected: int) -> None:
    select = yolo_nms(sigma)
    flatbuffer = to_tflite(freeze(select.get_concrete_function()))
    assert "SHAPE" not in {operator.op for operator in tflite_operators(flatbuffer)}  # the count is the op's
    bbox, scores = boxes_and_scores(scale)
    want = [tensor.numpy() for tensor in select(bbox, scores)]
    assert int(want[2][0]) == selected
    got = run_tvm(flatbuffer, bbox, scores)
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_array_equal(got[0], want[0])  # padded boxes are box 0, as TensorFlow gathers them
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-7)


def test_a_selection_used_otherwise_keeps_its_unpadded_suppression() -> None:
    """A gather of the unpadded selection needs its `n` entries: the suppression is not padded."""

    @tf.function(input_signature=[tf.TensorSpec([BOXES, 4], tf.float32), tf.TensorSpec([BOXES], tf.float32)])
    def select(bbox: Any, scores: Any) -> Any:
        indices = tf.image.non_max_suppression(bbox, scores, MAX_BOXES, 0.5, 0.5)
        chosen = tf.gather(scores, indices)
        return tf.concat([chosen, tf.zeros(MAX_BOXES - tf.shape(indices)[0])], 0)

    from tfcheck.compiler.trace.padded_selections import padded_suppressions

    graph_def = freeze(select.get_concrete_function()).graph.as_graph_def()
    assert padded_suppressions(graph_def) is graph_def
