"""Keras applications as Keras ships them, for images of any size from 75 to 160 pixels a side:
Xception ('SAME' max poolings at stride 2), EfficientNetB0 ('SAME' depthwise convolutions at
stride 2, squeeze-and-excitation), ResNet50 and InceptionV3 (3x3 max poolings at stride 2),
DenseNet121 (2x2 average poolings at stride 2). `weights=None`, seeded, batch norms calibrated as
in fixtures/aot/. A build sweep: each must build and verify against TensorFlow at its smallest,
middle and largest sizes (docs/benchmarks.md, "Inputs of any size"):

    .venv/bin/tfcheck build benchmarks/any_size/applications.py --out /tmp/any_size_apps/out --cache-dir /tmp/any_size_apps/cache
"""
import sys
from pathlib import Path

import keras
import tensorflow as tf

import tfcheck

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures" / "aot"))
from calibration import calibrate_batch_norm  # noqa: E402 - the fixtures' helper

keras.utils.set_random_seed(0)
DIMS = {"images_1": (75, 160), "images_2": (75, 160)}


def _model(builder):
    """One application for images of any size, average-pooled, its batch norms calibrated."""
    model = builder(weights=None, input_shape=(None, None, 3), include_top=False, pooling="avg")
    calibrate_batch_norm(model, (2, 96, 96, 3))
    return model


xception = _model(keras.applications.Xception)
efficientnet = _model(keras.applications.EfficientNetB0)
resnet = _model(keras.applications.ResNet50)
densenet = _model(keras.applications.DenseNet121)
inception = _model(keras.applications.InceptionV3)


@tfcheck.aot(dims=DIMS)
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32)])
def xception_any(images):
    return xception(images, training=False)


@tfcheck.aot(dims=DIMS)
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32)])
def efficientnet_any(images):
    return efficientnet(images, training=False)


@tfcheck.aot(dims=DIMS)
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32)])
def resnet_any(images):
    return resnet(images, training=False)


@tfcheck.aot(dims=DIMS)
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32)])
def densenet_any(images):
    return densenet(images, training=False)


@tfcheck.aot(dims=DIMS)
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32)])
def inception_any(images):
    return inception(images, training=False)
