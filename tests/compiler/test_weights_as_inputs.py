"""Functions built with their weights as inputs (`@tfcheck.aot(weights="inputs")`, and "auto" over
64 MB): TensorFlow's freezer and converter never see a weight value, the compile child binds them
as constants (docs/build.md, "Memory"). The build must still verify, key the cache on every
weight's bytes, and refuse (or fall back on) a variable it cannot lift.
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
keras = pytest.importorskip("keras")

from tfcheck.compiler.trace.bridge import (WeightsRefused, lift_weights, reference_outputs, tflite_outputs,  # noqa: E402
                                      to_tflite, weight_values)
from tfcheck.compiler.trace.tracing import lifted_graph_sha256, prepare  # noqa: E402

# Peak RSS growth over the weights' size while lifting, hashing, converting and saving a Dense
# 4096x4096 (64 MB): measured 1.6x (freezing and converting it: 10.3x, test_tf_side_memory.py).
LIFTED_PEAK_OVER_WEIGHTS = 2.5
# Peak RSS growth over the weights' size of TFLite's verification run on 8 lifted Conv2D 3x3
# 512->512 (72 MB): measured 1.3x with the builtin kernels, 2.1x with XNNPACK.
TFLITE_PEAK_OVER_LIFTED_WEIGHTS = 1.7

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "aot"

# Beside the zoo's conv+BN model (`fixtures/aot/cnn_bn.py`, taken with its weights as inputs):
MORE_MODELS = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)
depthwise = keras.Sequential([keras.Input((8, 8, 4)), keras.layers.DepthwiseConv2D(3, padding="same")])
dense = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)])
# ConvNeXt's depthwise convolution: Keras runs `groups=` through an XLA function that takes the variable.
grouped = keras.Sequential([keras.Input((8, 8, 16)), keras.layers.Conv2D(16, 3, groups=16, padding="same")])
# ConvNeXt's pointwise layers: a Dense on a 4-D input, a BATCH_MATMUL of a 4-D and a 2-D operand.
pointwise = keras.Sequential([keras.Input((4, 4, 8)), keras.layers.Dense(16)])


@tfcheck.aot(weights="inputs")
@tf.function(input_signature=[tf.TensorSpec([2, 8, 8, 4], tf.float32)])
def depthwise_conv(images):
    return depthwise(images, training=False)


@tfcheck.aot(weights="inputs")
@tf.function(input_signature=[tf.TensorSpec([3, 16], tf.float32)])
def mlp(x):
    return dense(x, training=False)


@tfcheck.aot(weights="inputs")
@tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 16], tf.float32)])
def grouped_conv(images):
    return grouped(images, training=False)


@tfcheck.aot(weights="inputs")
@tf.function(input_signature=[tf.TensorSpec([1, 4, 4, 8], tf.float32)])
def dense_4d(images):
    return pointwise(images, training=False)
'''

COUNTER = '''
import tensorflow as tf
import tfcheck

steps = tf.Variable(0.0, name="steps")
scale = tf.Variable(2.0, name="scale")


@tfcheck.aot(weights="{mode}")
@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def counted(x):
    steps.assign_add(1.0)
    return x * scale
'''


def build(run_cli: Callable[..., Result], folder: Path) -> dict[str, dict[str, Any]]:
    result = run_cli(folder, "build", "--cache-dir", str(folder / "cache"), "--format", "json", "--no-lint")
    report = json.loads(result.stdout)
    return {record["function"].rsplit(".", 1)[-1]: record for record in report["functions"]}


def dense_function() -> Any:
    """A seeded Dense(64 -> 256) as a concrete function (64 KB of weights), and its model."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256)])
    function = tf.function(lambda x: model(x), input_signature=[tf.TensorSpec([2, 64], tf.float32)])
    return model, function.get_concrete_function()


def test_lifted_model_converts_without_weights_and_matches_tensorflow() -> None:
    model, concrete = dense_function()
    lifted = lift_weights(concrete)
    flatbuffer = to_tflite(lifted.function)
    weights = list(weight_values(lifted))
    assert sorted(lifted.names) == sorted(v.name for v in concrete.variables)
    assert len(flatbuffer) < sum(w.nbytes for w in weights)  # the values are not in the model
    x = np.random.default_rng(0).standard_normal((2, 64)).astype("float32")
    [got] = tflite_outputs(flatbuffer, [x, *weights])
    np.testing.assert_allclose(got, reference_outputs(concrete, [x])[0], atol=1e-5)


def test_a_variable_passed_to_a_called_function_is_lifted_too() -> None:
    """ConvNeXt's grouped convolutions: the variable is an argument of an XLA-compiled call
    (`StatefulPartitionedCall`), which the lifted function must read as a value."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8, 256)), keras.layers.Conv2D(256, 5, groups=256, padding="same")])
    spec = tf.TensorSpec([1, 8, 8, 256], tf.float32)
    concrete = tf.function(lambda x: model(x), input_signature=[spec]).get_concrete_function()
    assert any(node.op == "StatefulPartitionedCall" for node in concrete.graph.as_graph_def().node)
    lifted = lift_weights(concrete)
    flatbuffer = to_tflite(lifted.function)
    weights = list(weight_values(lifted))
    assert len(flatbuffer) < sum(w.nbytes for w in weights)
    x = np.random.default_rng(0).standard_normal((1, 8, 8, 256)).astype("float32")
    [got] = tflite_outputs(flatbuffer, [x], weights)
    np.testing.assert_allclose(got, reference_outputs(concrete, [x])[0], atol=1e-5)


def test_the_key_covers_every_weight_value() -> None:
    model, concrete = dense_function()
    before = lifted_graph_sha256(lift_weights(concrete))
    kernel = model.layers[0].kernel
    kernel.assign(kernel.numpy() + np.eye(64, 256, dtype="float32") * 1e-3)
    assert lifted_graph_sha256(lift_weights(concrete)) != before


def test_auto_lifts_only_large_weights() -> None:
    _, concrete = dense_function()
    assert prepare(concrete, "auto").lifted is None
    assert prepare(concrete, "inputs").weights == 2


def test_written_variable_is_refused_by_name_or_frozen() -> None:
    steps = tf.Variable(0.0, name="steps")
    function = tf.function(lambda x: x + steps.assign_add(1.0), input_signature=[tf.TensorSpec([2], tf.float32)])
    concrete = function.get_concrete_function()
    with pytest.raises(WeightsRefused, match=r"variable 'steps.*AssignAddVariableOp"):
        lift_weights(concrete)
    with pytest.raises(WeightsRefused, match="steps"):
        prepare(concrete, "inputs")


@pytest.mark.slow
def test_conv_bn_depthwise_and_dense_models_build_and_verify_with_weights_as_inputs(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    cnn_bn = (FIXTURES / "cnn_bn.py").read_text(encoding="utf-8")
    assert "\n@tfcheck.aot\n" in cnn_bn
    folder = project({"cnn_bn.py": cnn_bn.replace("\n@tfcheck.aot\n", '\n@tfcheck.aot(weights="inputs")\n'),
                      "more.py": MORE_MODELS})
    records = build(run_cli, folder)
    for name in ("small_cnn", "depthwise_conv", "mlp", "grouped_conv", "dense_4d"):
        assert records[name]["status"] == "built", records[name]
        assert records[name]["verified"] is True
        assert records[name]["max_abs_error"] < 1e-4
        assert not records[name]["message"]  # not built frozen after all


@pytest.mark.slow
def test_a_written_variable_falls_back_to_freezing_or_is_refused(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    records = build(run_cli, project({"counter.py": COUNTER.format(mode="inputs")}))
    assert records["counted"]["status"] == "failed"
    assert "variable 'steps" in records["counted"]["message"]
    assert "AssignAddVariableOp" in records["counted"]["message"]


def test_unknown_weights_mode_is_refused() -> None:
    import tfcheck

    with pytest.raises(ValueError, match="weights='frozen'"):
        tfcheck.aot(weights="frozen")


@pytest.mark.slow
def test_lifting_converting_and_saving_stay_near_the_weights_size(tmp_path: Path) -> None:
    """Frozen, converting a model peaks at about 10 times its weights (test_tf_side_memory.py);
    lifted, nothing holds more than one weight besides TensorFlow's own variables."""
    from tfcheck.compiler.build.memory import StagePeaks, status_mb
    from tfcheck.compiler.process.weights_file import save_weights

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4096,)), keras.layers.Dense(4096), keras.layers.Dense(8)])
    function = tf.function(lambda x: model(x), input_signature=[tf.TensorSpec([1, 4096], tf.float32)])
    concrete = function.get_concrete_function()
    weights_mb = sum(w.numpy().nbytes for w in model.weights) / 2**20
    peaks = StagePeaks()
    before = status_mb("VmRSS")
    with peaks.stage("lift, key, convert, save"):
        lifted = lift_weights(concrete)
        lifted_graph_sha256(lifted)
        to_tflite(lifted.function)
        save_weights(weight_values(lifted), tmp_path / "weights.npz")
    assert (peaks.peak_mb() - before) / weights_mb < LIFTED_PEAK_OVER_WEIGHTS


@pytest.mark.slow
def test_tflite_verification_run_does_not_pack_a_second_copy_of_lifted_weights(tmp_path: Path) -> None:
    """Fed its weights as inputs, XNNPACK packs every convolution's filter into a copy of its own
    on each run; verification's TFLite run uses the builtin kernels instead (docs/build.md)."""
    from tfcheck.compiler.build.memory import StagePeaks, status_mb
    from tfcheck.compiler.trace.tracing import saved_weights
    from tfcheck.compiler.process.weights_file import save_weights

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((14, 14, 512)),
                              *[keras.layers.Conv2D(512, 3, padding="same", activation="relu") for _ in range(8)]])
    function = tf.function(lambda x: model(x), input_signature=[tf.TensorSpec([1, 14, 14, 512], tf.float32)])
    lifted = lift_weights(function.get_concrete_function())
    flatbuffer = to_tflite(lifted.function)
    count = save_weights(weight_values(lifted), tmp_path / "weights.npz")
    weights_mb = sum(w.numpy().nbytes for w in model.weights) / 2**20
    x = np.random.default_rng(0).standard_normal((1, 14, 14, 512)).astype("float32")
    peaks = StagePeaks()
    before = status_mb("VmRSS")
    with peaks.stage("TFLite outputs"):
        outputs = tflite_outputs(flatbuffer, [x], saved_weights(tmp_path, count))
    assert outputs is not None
    assert (peaks.peak_mb() - before) / weights_mb < TFLITE_PEAK_OVER_LIFTED_WEIGHTS


PADDED = '''
import tensorflow as tf
import tfcheck

pads = tf.Variable([[1, 1], [2, 2]], name="pads")


@tfcheck.aot(weights="inputs")
@tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32)])
def padded(x):
    return tf.pad(x, pads.read_value()) * 2.0
'''


@pytest.mark.slow
def test_a_lifted_build_tvm_cannot_import_is_built_again_frozen(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    """TVM's PAD takes its paddings only as a constant: lifted, they are an input."""
    record = build(run_cli, project({"padded.py": PADDED}))["padded"]
    assert (record["status"], record["verified"]) == ("built", True)
    assert "built with its weights frozen into the graph" in record["message"]
    assert "TFLite operator PAD" in record["message"]


@pytest.mark.slow
def test_a_lifted_build_that_fell_back_goes_straight_to_the_frozen_artifact_next_time(
        project: Callable[..., Path], run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    """The lifted key of PAD's function is never cached: without the noted failure, every build
    would convert and compile it with its weights as inputs, fail, and trace it again frozen."""
    from tfcheck.compiler.build import driver

    folder = project({"padded.py": PADDED})
    first = build(run_cli, folder)["padded"]
    assert first["status"] == "built"
    children = []
    run_child = driver.run_child
    monkeypatch.setattr(driver, "run_child", lambda module, *args, **kwargs: children.append(module) or run_child(
        module, *args, **kwargs))
    second = build(run_cli, folder)["padded"]
    assert (second["status"], second["artifact"]) == ("cached", first["artifact"])
    assert children == ["tfcheck.compiler.trace.tracing"]  # one trace, frozen at once; nothing compiled
    assert "built with its weights frozen into the graph" in second["message"]
    assert "TFLite operator PAD" in second["message"]


# zzh8829/yolov3-tf2 (yolov3_tf2/models.py at 2784050): `yolo_nms` as its authors wrote it (soft-NMS
# with sigma 0.5, padded to yolo_max_boxes, the flags' defaults), over boxes and scores from a dense
# head, with the weights as inputs as YOLOv3's 248 MB take them. TVM's NMS kernel failed its schedule
# with the weights as inputs and frozen alike (2026-12-06).
YOLO_NMS = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)
head = keras.layers.Dense(5)
YOLO_MAX_BOXES, YOLO_IOU_THRESHOLD, YOLO_SCORE_THRESHOLD = 100, 0.5, 0.5


@tfcheck.aot(weights="inputs")
@tf.function(input_signature=[tf.TensorSpec([1, 64, 8], tf.float32)])
def detect(features):
    out = head(features)
    bbox, scores = tf.sigmoid(out[0, :, :4]), tf.sigmoid(out[0, :, 4])
    selected_indices, selected_scores = tf.image.non_max_suppression_with_scores(
        boxes=bbox, scores=scores, max_output_size=YOLO_MAX_BOXES, iou_threshold=YOLO_IOU_THRESHOLD,
        score_threshold=YOLO_SCORE_THRESHOLD, soft_nms_sigma=0.5)
    num_valid_nms_boxes = tf.shape(selected_indices)[0]
    selected_indices = tf.concat([selected_indices, tf.zeros(YOLO_MAX_BOXES - num_valid_nms_boxes, tf.int32)], 0)
    selected_scores = tf.concat([selected_scores, tf.zeros(YOLO_MAX_BOXES - num_valid_nms_boxes, tf.float32)], -1)
    boxes = tf.expand_dims(tf.gather(bbox, selected_indices), axis=0)
    return boxes, tf.expand_dims(selected_scores, axis=0), num_valid_nms_boxes
'''


@pytest.mark.slow
def test_a_function_that_fails_frozen_too_is_never_reported_as_built(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    """After the build with the weights as inputs failed, the frozen one is tried; when that fails
    as well, the message is its failure, then the first one's, and never begins "built with its
    weights frozen ..." (yolov3-tf2's `detect` and RetinaNet's `detect` did, issue 42). Should the
    NMS kernel build one day, the record is a frozen build that says why it is frozen."""
    record = build(run_cli, project({"nms.py": YOLO_NMS}))["detect"]
    message = record["message"]
    if record["status"] == "built":
        assert message.startswith("nms.detect: built with its weights frozen into the graph"), message
        return
    assert record["status"] == "failed"
    assert "built with its weights frozen" not in message, message
    assert "the build with the weights as inputs, tried first, failed" in message, message


def test_a_frozen_failure_says_whether_the_lifted_build_failed_alike() -> None:
    """retinanet-tensorflow2.x's `detect` (an unsorted top k) mismatched both ways, by a different
    count of elements: the same failure, said once."""
    from tfcheck.compiler.build.driver import BuildRecord, _say_frozen

    class Function:
        label = "retinanet_detect.detect"

    def mismatch(count: int) -> str:
        return (f"retinanet_detect.detect: the artifact does not match TensorFlow: output 0: {count} of 1600000 "
                "elements beyond atol=0.0001, rtol=0.001 (error 9.4e-01 of the output's scale)")

    record = BuildRecord("retinanet_detect.detect", "detect", "cpu", "failed", message=mismatch(1585659))
    _say_frozen(Function(), record, mismatch(1585614))  # type: ignore[arg-type]
    assert record.message == (mismatch(1585659)
                              + "; the build with the weights as inputs, tried first, failed the same way")
    other = BuildRecord("m.f", "f", "cpu", "failed", message="m.f: ScheduleError: ...")
    _say_frozen(Function(), other, "m.f: TVM cannot import TFLite operator PAD")  # type: ignore[arg-type]
    assert other.message == ("m.f: ScheduleError: ...; the build with the weights as inputs, tried first, failed too: "
                             "m.f: TVM cannot import TFLite operator PAD")
    built = BuildRecord("m.f", "f", "cpu", "built")
    _say_frozen(Function(), built, "m.f: TVM cannot import TFLite operator PAD")  # type: ignore[arg-type]
    assert built.message.startswith("retinanet_detect.detect: built with its weights frozen into the graph")


# A model the module runs once at import (as the coverage sweep's calibrated models do), then a
# function of it with its weights as inputs; the import fails where TensorFlow's oneDNN kernels are on.
ONEDNN_CHECKED = '''
import keras
import numpy as np
import tensorflow as tf
from tensorflow.python.util import _pywrap_util_port

import tfcheck

if _pywrap_util_port.IsMklEnabled():
    raise RuntimeError("TensorFlow's oneDNN kernels are on in the tracing child")
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)])
model(np.ones((2, 16), np.float32), training=True)


@tfcheck.aot(weights="inputs")
@tf.function(input_signature=[tf.TensorSpec([3, 16], tf.float32)])
def checked(x):
    return model(x, training=False)
'''

@pytest.mark.slow
def test_the_tracing_child_runs_tensorflow_without_onednn(
        project: Callable[..., Path], run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    record = build(run_cli, project({"onednn.py": ONEDNN_CHECKED}))["checked"]
    assert (record["status"], record["verified"]) == ("built", True), record["message"]
    assert record["max_abs_error"] < 1e-4
