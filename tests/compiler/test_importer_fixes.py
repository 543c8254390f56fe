"""TensorFlow code that TVM's TFLite frontend imports wrongly or not at all, built and verified.

Each function went through `tfcheck build` and failed before the fix in `compiler/frontend/importer.py`
(see docs/importer-fixes.md): the build verifies every artifact against the tf.function's own
outputs, so a wrong import fails the build rather than shipping.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

pytestmark = pytest.mark.slow

FUNCTIONS = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)
GRU = keras.layers.Bidirectional(keras.layers.GRU(16, return_sequences=True))
PARAMS = tf.random.stateless_normal([4, 3, 10, 5], seed=[1, 2])
UPSAMPLE_2D = keras.layers.Conv2DTranspose(8, 3, strides=2, padding="same")
UPSAMPLE_3D = keras.layers.Conv3DTranspose(4, 3, strides=2)
# a kernel smaller than its stride: TFLite's output is 16 rows, TVM's windows reach 15 (no output padding)
SPREAD_2D = keras.layers.Conv2DTranspose(4, 1, strides=2)
# keras.io's U-Net block: TFLite folds the batch norm into the transposed convolution and fuses the ReLU
UPSAMPLE_BN_RELU = keras.Sequential([keras.layers.Conv2DTranspose(8, 3, strides=2, padding="same"),
                                     keras.layers.BatchNormalization(), keras.layers.ReLU()])
# the decoder of TensorFlow's neural machine translation tutorial, one greedy step
EMBED = keras.layers.Embedding(40, 8)
DECODER_GRU = keras.layers.GRU(16, return_sequences=True, return_state=True)
VOCABULARY = keras.layers.Dense(40)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 5, 8], tf.float32)])
def bidirectional_gru(x):
    return GRU(x)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([8, 10], tf.float32), tf.TensorSpec([8], tf.int32)])
def gather_one_per_row(params, index):
    return tf.gather(params, index % 10, batch_dims=1)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([4, 6, 2], tf.int32)])
def gather_batch_and_middle_axes(index):
    # batch_dims=1, axis=2: one axis (3) between the batch axis and the gathered one (10)
    return tf.gather(PARAMS, index % 10, axis=2, batch_dims=1)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 3], tf.float32), tf.TensorSpec([1, 4, 6, 6, 2], tf.float32)])
def transposed_convolutions(image, volume):
    return UPSAMPLE_2D(image), UPSAMPLE_3D(volume), SPREAD_2D(image)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 3], tf.float32)])
def transposed_convolution_fused_relu(image):
    return UPSAMPLE_BN_RELU(image, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 50, 10], tf.float32)])
def int32_argmax_argmin(scores):
    return tf.argmax(scores, axis=-1, output_type=tf.int32), tf.argmin(scores, axis=1, output_type=tf.int32)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([6, 2], tf.int32), tf.TensorSpec([2, 2], tf.int32)])
def gather_nd_pairs(pairs, square):
    # [2, 2] indices: TVM's index layout fits the shape, and gathered the wrong elements
    return tf.gather_nd(PARAMS, pairs % [4, 3]), tf.gather_nd(PARAMS, square % [4, 3])


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([8, 1], tf.int32), tf.TensorSpec([8, 4], tf.float32)])
def scatter_with_repeats(rows, updates):
    # 8 generated indices from 1..7 repeat one: TensorFlow sums the updates written to one row
    return tf.scatter_nd(rows, updates, [8, 4])


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 1], tf.int32), tf.TensorSpec([1, 16], tf.float32)])
def greedy_decoder_step(token, state):
    # TensorFlow's converter folds the reshape into the dense layer (FULLY_CONNECTED flattens its
    # input); TVM kept the [1, 1, 40] rows, and `logits[0]` (STRIDED_SLICE) failed to import
    output, state = DECODER_GRU(EMBED(token), initial_state=state)
    logits = VOCABULARY(tf.reshape(output, (-1, output.shape[2])))
    return logits[0], logits, state  # `logits`: [1, 40], as TensorFlow has it


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([4, 9], tf.float32), tf.TensorSpec([], tf.int32)])
def window_at_run_time(x, start):
    return tf.slice(x, tf.stack([0, start]), [-1, 2], name="window") * 2.0


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([4, 9], tf.float32), tf.TensorSpec([], tf.int32)])
def columns_at_run_time(x, start):
    return x[:, start:start + 2] * 2.0


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([4, 10], tf.float32)])
def indices_of_positives(x):
    return tf.where(x > 0.0)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([10], tf.int32)])
def distinct_values(x):
    return tf.unique(x)[0]
'''


def test_imported_wrongly_before_now_build_and_match_tensorflow(project: Callable[..., Path],
                                                                  run_cli: Callable[..., Result]) -> None:
    folder = project({"importer_cases.py": FUNCTIONS})
    result = run_cli(folder, "build", "--cache-dir", str(folder / "cache"), "--format", "json")
    records = {r["function"].rsplit(".", 1)[-1]: r for r in json.loads(result.stdout)["functions"]}
    window, columns = records.pop("window_at_run_time"), records.pop("columns_at_run_time")
    distinct = records.pop("distinct_values")
    assert sorted(records) == ["bidirectional_gru", "gather_batch_and_middle_axes", "gather_nd_pairs",
                               "gather_one_per_row", "greedy_decoder_step", "indices_of_positives", "int32_argmax_argmin",
                               "scatter_with_repeats", "transposed_convolution_fused_relu", "transposed_convolutions"]
    for name, record in records.items():
        assert record["status"] == "built", f"{name}: {record['message']}"
        assert record["verified"] is True and record["max_abs_error"] < 1e-4, record
    # An operator TVM cannot import is named, with its TensorFlow node and what to do: refused by
    # tfcheck's own converter (a run-time SLICE) or crashing in TVM's (STRIDED_SLICE, a TypeError).
    assert window["status"] == columns["status"] == "failed" and result.exit_code == 1
    assert "TFLite operator SLICE from TensorFlow node 'window'" in window["message"]
    assert "computed at run time" in window["message"] and "remove @tfcheck.aot" in window["message"]
    assert "TFLite operator STRIDED_SLICE from TensorFlow node 'strided_slice': TypeError" in columns["message"]
    assert "needs inputs 1 and 2 of the operator to be constants" in columns["message"]
    # An output whose size the values decide and that the build refuses (TVM computes UNIQUE through
    # NumPy in its Python package, which production's runtime lacks): which call made it, what to do.
    assert distinct["status"] == "failed" and "TFLite operator UNIQUE" in distinct["message"]
    assert "comes from tf.unique, whose output's size the input values decide" in distinct["message"]
    assert "compute it after the call" in distinct["message"]
