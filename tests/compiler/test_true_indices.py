"""`tf.where(condition)` and `tf.boolean_mask`: outputs whose size the data decide build, and the
artifact returns TensorFlow's rows at every count, run by production's runtime in a process without
TVM or TensorFlow (`compiler/frontend/true_indices.py`).

The form is YOLOv4's `filter_boxes` as hunglc007/tensorflow-yolov4-tflite (9f16748, core/yolov4.py)
writes it for its default `--framework tf` export: the boxes and scores over a score threshold,
reshaped to [batch, -1, 4] from their own SHAPE. Before, TVM's WHERE converter took only the select
(`tf.where(c, x, y)`) and the build failed; and TVM's own `nonzero` runs through a NumPy function of
its Python package, which the verification (in the compiler's process) found and production did not.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.compiler.production_run import build_exported, run_exported

pytestmark = pytest.mark.slow

FUNCTIONS = '''
import tensorflow as tf
import tfcheck


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 60, 4], tf.float32), tf.TensorSpec([1, 60, 3], tf.float32)])
def filter_boxes(box_xywh, scores):
    score_threshold = 0.4
    scores_max = tf.math.reduce_max(scores, axis=-1)
    mask = scores_max >= score_threshold
    class_boxes = tf.boolean_mask(box_xywh, mask)
    pred_conf = tf.boolean_mask(scores, mask)
    class_boxes = tf.reshape(class_boxes, [tf.shape(scores)[0], -1, tf.shape(class_boxes)[-1]])
    pred_conf = tf.reshape(pred_conf, [tf.shape(scores)[0], -1, tf.shape(pred_conf)[-1]])
    return tf.concat([class_boxes, pred_conf], axis=-1)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([3, 4, 5], tf.int32)])
def nonzero_positions(x):
    return tf.where(x)


@tfcheck.aot(dims={"x_1": (1, 8)})
@tf.function(input_signature=[tf.TensorSpec([3, None], tf.float32)])
def positives_any_width(x):
    return tf.where(x > 0.0)
'''

# Run by the artifact's runtime alone (`production_run.run_exported`).
RUN = '''
results = {}
for key in sorted(inputs.files):
    name, _, case = key.partition("__")
    if name == "filter_boxes":
        results[key] = np.asarray(library.filter_boxes(inputs[key], inputs["scores__" + case]))
    elif name in ("nonzero_positions", "positives_any_width"):
        results[key] = np.asarray(getattr(library, name)(inputs[key]))
'''


def _cases() -> dict[str, np.ndarray]:
    """Scores none, some and all of which reach the threshold; integers with no, some, all non-zero;
    two widths of an input whose width is unknown."""
    rng = np.random.default_rng(7)
    boxes = rng.random((1, 60, 4), dtype=np.float32)
    scores = rng.random((1, 60, 3), dtype=np.float32)
    cases = {}
    for case, scale in (("none", 0.3), ("some", 0.6), ("all", 0.0)):
        cases[f"filter_boxes__{case}"] = boxes
        cases[f"scores__{case}"] = scores * scale + (0.5 if case == "all" else 0.0)
    for case, values in (("none", np.zeros((3, 4, 5))), ("some", rng.integers(-1, 2, (3, 4, 5))),
                         ("all", np.ones((3, 4, 5)))):
        cases[f"nonzero_positions__{case}"] = values.astype(np.int32)
    for width in (2, 7):  # a size of its own beside the count (the strides of the indices are symbolic)
        cases[f"positives_any_width__{width}"] = rng.standard_normal((3, width)).astype(np.float32)
    return cases


def test_data_sized_outputs_build_and_match_tensorflow_at_every_count(project: Callable[..., Path],
                                                                        tmp_path: Path) -> None:
    folder = project({"masks.py": FUNCTIONS})
    for record in build_exported(folder / "masks.py", tmp_path).values():
        assert record["status"] == "built" and record["verified"] is True, record["message"]
    manifest = json.loads((tmp_path / "out" / "filter_boxes" / "manifest.json").read_text())
    assert manifest["outputs"][0]["shape"] == [1, None, 7]  # the rows: what the data decide

    cases = _cases()
    got = run_exported(tmp_path, RUN, cases)

    import tensorflow as tf

    namespace: dict[str, object] = {}
    exec(compile(FUNCTIONS.replace("@tfcheck.aot\n", ""), "masks.py", "exec"), namespace)  # noqa: S102 - the test's own code
    rows = {}
    for key in got.files:
        name, _, case = key.partition("__")
        args = (cases[key], cases["scores__" + case]) if name == "filter_boxes" else (cases[key],)
        want = namespace[name](*map(tf.constant, args)).numpy()
        np.testing.assert_array_equal(got[key], want, err_msg=key)
        rows[key] = want.shape[-2]
    assert rows["filter_boxes__none"] == 0 and rows["filter_boxes__all"] == 60
    assert 0 < rows["filter_boxes__some"] < 60
    assert rows["nonzero_positions__none"] == 0 and rows["nonzero_positions__all"] == 60
