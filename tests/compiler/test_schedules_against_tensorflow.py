"""The default CPU schedules against TensorFlow itself, for varied shapes of every operator they cover.

`tests/schedules/test_operators.py` checks each rule on hand-built Relax modules against NumPy;
here the same operators come from TensorFlow code, go the whole way (trace, freeze, TFLite, Relax,
default schedules, LLVM) and are verified by the build against the tf.function's own outputs on
the build's seeded inputs. Each function takes unknown dimensions and lists shape entries with
odd, prime and vector-unfriendly extents, batch 1 and more, so one function gives several
differently tiled kernels.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

pytestmark = pytest.mark.slow

OPERATORS = '''
import tensorflow as tf
import tfcheck

RNG = tf.random.Generator.from_seed(7)
CONV3 = RNG.normal([3, 3, 5, 19])
CONV5 = RNG.normal([5, 5, 5, 24])
POINTWISE = RNG.normal([1, 1, 5, 40])
DEPTHWISE = RNG.normal([3, 3, 24, 1])
DENSE = RNG.normal([33, 19])
BIAS = RNG.normal([19])
WINOGRAD = RNG.normal([3, 3, 24, 32]) * 0.2
BIAS32 = RNG.normal([32])
SEVEN = RNG.normal([1, 7, 24, 16]) * 0.2


@tfcheck.aot(shapes=[(1, 7, 9, 5), (2, 16, 16, 5), (3, 13, 6, 5)])
@tf.function(input_signature=[tf.TensorSpec([None, None, None, 5], tf.float32)])
def conv_same_bias_relu6(x):
    return tf.nn.relu6(tf.nn.conv2d(x, CONV3, 1, "SAME") + BIAS)


@tfcheck.aot(shapes=[(1, 17, 15, 24), (2, 9, 9, 24), (1, 9, 9, 24)])
@tf.function(input_signature=[tf.TensorSpec([None, None, None, 24], tf.float32)])
def winograd_forms(x):
    # Winograd's F(4x4, 3x3), F(2x2, 3x3) and F(2, 7) across a 1x7 window
    # (compiler/schedules/rewrites/winograd.py): 'same' with its bias and ReLU in the output
    # transform, 'valid' alone; partial tiles, a batch.
    same = tf.nn.relu(tf.nn.conv2d(x, WINOGRAD, 1, "SAME") + BIAS32)
    return same, tf.nn.conv2d(x, WINOGRAD, 1, "VALID"), tf.nn.conv2d(x, SEVEN, 1, "SAME")


@tfcheck.aot(shapes=[(1, 11, 11, 5), (2, 17, 9, 5)])
@tf.function(input_signature=[tf.TensorSpec([None, None, None, 5], tf.float32)])
def conv_strided_valid_and_dilated(x):
    strided = tf.nn.conv2d(x, CONV5, 2, "VALID")
    dilated = tf.nn.conv2d(x, CONV3, 1, "SAME", dilations=2)
    return tf.nn.relu(strided), dilated


@tfcheck.aot(shapes=[(1, 14, 14, 5), (4, 7, 7, 5)])
@tf.function(input_signature=[tf.TensorSpec([None, None, None, 5], tf.float32)])
def pointwise_stride_two(x):
    return tf.nn.conv2d(x, POINTWISE, 2, "VALID")


@tfcheck.aot(shapes=[(1, 15, 15, 24), (2, 8, 11, 24)])
@tf.function(input_signature=[tf.TensorSpec([None, None, None, 24], tf.float32)])
def depthwise(x):
    same = tf.nn.depthwise_conv2d(x, DEPTHWISE, [1, 1, 1, 1], "SAME")
    strided = tf.nn.depthwise_conv2d(x, DEPTHWISE, [1, 2, 2, 1], "SAME")
    return tf.nn.relu6(same), strided


@tfcheck.aot(shapes=[(1, 33), (7, 33), (64, 33)])
@tf.function(input_signature=[tf.TensorSpec([None, 33], tf.float32)])
def dense_bias_relu(x):
    return tf.nn.relu(tf.matmul(x, DENSE) + BIAS)


@tfcheck.aot(shapes=[((3, 9, 31), (3, 31, 7)), ((1, 64, 16), (1, 16, 48))])
@tf.function(input_signature=[tf.TensorSpec([None, None, None], tf.float32),
                              tf.TensorSpec([None, None, None], tf.float32)])
def batch_matmul(a, b):
    return tf.matmul(a, b)


@tfcheck.aot(shapes=[(1, 13, 13, 7), (2, 8, 10, 16)])
@tf.function(input_signature=[tf.TensorSpec([None, None, None, None], tf.float32)])
def pooling_and_mean(x):
    biggest = tf.nn.max_pool2d(x, 3, 2, "SAME")
    average = tf.nn.avg_pool2d(x, 2, 2, "VALID")
    return biggest, average, tf.reduce_mean(x, axis=[1, 2])
'''


def test_every_shape_of_every_operator_matches_tensorflow(project: Callable[..., Path],
                                                          run_cli: Callable[..., Result]) -> None:
    folder = project({"operators.py": OPERATORS})
    result = run_cli(folder, "build", "--cache-dir", str(folder / "cache"), "--format", "json")
    records = json.loads(result.stdout)["functions"]
    failures = [f"{r['function']} {r['inputs']}: {r['message']}" for r in records if r["status"] != "built"]
    assert not failures and result.exit_code == 0, "\n".join(failures)
    built = {(r["function"].rsplit(".", 1)[-1], json.dumps([i["shape"] for i in r["inputs"]])) for r in records}
    assert len(built) == 19  # every shape entry of every function became its own artifact
    for record in records:
        assert record["verified"] is True, record
        assert record["max_abs_error"] < 1e-3, record
