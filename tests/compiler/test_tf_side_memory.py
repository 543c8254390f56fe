"""The TFLite conversion of a frozen function: no second freeze, the same flatbuffer, bounded memory.

VGG16's build peaked at 14.6 GB in the tracing child, not in TVM: the TFLite converter froze the
already frozen function again (60 s and 4 GB for VGG16's 528 MB of weights) before its MLIR
conversion (docs/build.md, "Memory"). The memory test measures the conversion stage as
benchmarks/stage_memory.py does, on a model with 64 MB of weights.
"""

from __future__ import annotations

from typing import Any

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tfcheck.compiler.build.memory import StagePeaks, status_mb  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, to_tflite  # noqa: E402

# Peak RSS growth of the conversion over the weights' size: measured 10.3x without the second
# freeze and 15x with it (Dense 4096x4096, TensorFlow 2.20).
CONVERSION_PEAK_OVER_WEIGHTS = 12.5


def frozen_model(layers: list[Any], shape: tuple[int, ...]) -> tuple[Any, float]:
    """A seeded Keras model as a frozen concrete function, and its weights' size in MB."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input(shape[1:]), *layers])
    function = tf.function(lambda x: model(x), input_signature=[tf.TensorSpec(shape, tf.float32)])
    return freeze(function.get_concrete_function()), sum(w.numpy().nbytes for w in model.weights) / 2**20


def public_conversion(frozen: Any) -> bytes:
    """What `tf.lite.TFLiteConverter` itself gives for the function, with the build's settings."""
    converter = tf.lite.TFLiteConverter.from_concrete_functions([frozen])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def test_conversion_does_not_freeze_the_frozen_function_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorflow.lite.python import lite

    frozen, _ = frozen_model([keras.layers.Dense(8)], (1, 16))
    calls = []
    original = lite._convert_to_constants.convert_variables_to_constants_v2_as_graph
    monkeypatch.setattr(lite._convert_to_constants, "convert_variables_to_constants_v2_as_graph",
                        lambda *args, **kwargs: calls.append(args) or original(*args, **kwargs))
    to_tflite(frozen)
    assert calls == []


@pytest.mark.parametrize("layers, shape", [
    ([keras.layers.Dense(8, activation="relu"), keras.layers.Dense(4)], (1, 16)),
    ([keras.layers.LSTM(8), keras.layers.Dense(4)], (1, 5, 3)),  # control flow: a WHILE loop
], ids=["dense", "lstm"])
def test_flatbuffer_is_the_one_the_converter_gives(layers: list[Any], shape: tuple[int, ...]) -> None:
    frozen, _ = frozen_model(layers, shape)
    assert to_tflite(frozen) == public_conversion(frozen)


@pytest.mark.slow
def test_conversion_peak_stays_within_a_multiple_of_the_weights() -> None:
    frozen, weights_mb = frozen_model([keras.layers.Dense(4096), keras.layers.Dense(8)], (1, 4096))
    peaks = StagePeaks()
    before = status_mb("VmRSS")
    with peaks.stage("convert"):
        to_tflite(frozen)
    assert (peaks.peak_mb() - before) / weights_mb < CONVERSION_PEAK_OVER_WEIGHTS
