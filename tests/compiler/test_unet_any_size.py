"""A U-Net of valid convolutions for images of any size (issue 42), built, verified and called.

Its crops slice the skip connection by bounds computed at run time from both tensors' shapes
(STRIDED_SLICE, `compiler/frontend/symbolic_import.py` `_run_time_bounds`), and its up-convolutions
are transposed convolutions over an image of unknown size (TRANSPOSE_CONV, `_transposed_convolution`).
A slice whose bounds the build cannot prove inside the tensor at every size is refused, naming the
operator, and built at the fixed sizes its message asks for.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

import tfcheck
from tests.compiler.test_build import build, by_function
from tests.compiler.test_symbolic_build import reference_module

pytestmark = pytest.mark.slow

# jakeret/unet (src/unet/unet.py at b5f707d): ConvBlock, UpconvBlock, CropConcatBlock and build_model
# as written there (unused get_config methods and the docstring left out), three levels of 8 filters
# for one input channel. `centre` slices 4 rows around the middle, which start above row 0 only from
# 4 rows on: not provably inside, refused; `centre_listed` lists sizes, as the message says.
JAKERET_UNET = '''
import numpy as np
import tensorflow as tf
from tensorflow.keras import Model, Input
from tensorflow.keras import layers
from tensorflow.keras.initializers import TruncatedNormal

import tfcheck


class ConvBlock(layers.Layer):

    def __init__(self, layer_idx, filters_root, kernel_size, dropout_rate, padding, activation, **kwargs):
        super(ConvBlock, self).__init__(**kwargs)
        self.layer_idx=layer_idx
        self.filters_root=filters_root
        self.kernel_size=kernel_size
        self.dropout_rate=dropout_rate
        self.padding=padding
        self.activation=activation

        filters = _get_filter_count(layer_idx, filters_root)
        self.conv2d_1 = layers.Conv2D(filters=filters,
                                      kernel_size=(kernel_size, kernel_size),
                                      kernel_initializer=_get_kernel_initializer(filters, kernel_size),
                                      strides=1,
                                      padding=padding)
        self.dropout_1 = layers.Dropout(rate=dropout_rate)
        self.activation_1 = layers.Activation(activation)

        self.conv2d_2 = layers.Conv2D(filters=filters,
                                      kernel_size=(kernel_size, kernel_size),
                                      kernel_initializer=_get_kernel_initializer(filters, kernel_size),
                                      strides=1,
                                      padding=padding)
        self.dropout_2 = layers.Dropout(rate=dropout_rate)
        self.activation_2 = layers.Activation(activation)

    def call(self, inputs, training=None, **kwargs):
        x = inputs
        x = self.conv2d_1(x)

        if training:
            x = self.dropout_1(x)
        x = self.activation_1(x)
        x = self.conv2d_2(x)

        if training:
            x = self.dropout_2(x)

        x = self.activation_2(x)
        return x


class UpconvBlock(layers.Layer):

    def __init__(self, layer_idx, filters_root, kernel_size, pool_size, padding, activation, **kwargs):
        super(UpconvBlock, self).__init__(**kwargs)
        self.layer_idx=layer_idx
        self.filters_root=filters_root
        self.kernel_size=kernel_size
        self.pool_size=pool_size
        self.padding=padding
        self.activation=activation

        filters = _get_filter_count(layer_idx + 1, filters_root)
        self.upconv = layers.Conv2DTranspose(filters // 2,
                                             kernel_size=(pool_size, pool_size),
                                             kernel_initializer=_get_kernel_initializer(filters, kernel_size),
                                             strides=pool_size, padding=padding)

        self.activation_1 = layers.Activation(activation)

    def call(self, inputs, **kwargs):
        x = inputs
        x = self.upconv(x)
        x = self.activation_1(x)
        return x


class CropConcatBlock(layers.Layer):

    def call(self, x, down_layer, **kwargs):
        x1_shape = tf.shape(down_layer)
        x2_shape = tf.shape(x)

        height_diff = (x1_shape[1] - x2_shape[1]) // 2
        width_diff = (x1_shape[2] - x2_shape[2]) // 2

        down_layer_cropped = down_layer[:,
                                        height_diff: (x2_shape[1] + height_diff),
                                        width_diff: (x2_shape[2] + width_diff),
                                        :]

        x = tf.concat([down_layer_cropped, x], axis=-1)
        return x


def build_model(nx=None, ny=None, channels=1, num_classes=2, layer_depth=5, filters_root=64, kernel_size=3,
                pool_size=2, dropout_rate=0.5, padding="valid", activation="relu"):
    inputs = Input(shape=(nx, ny, channels), name="inputs")

    x = inputs
    contracting_layers = {}

    conv_params = dict(filters_root=filters_root,
                       kernel_size=kernel_size,
                       dropout_rate=dropout_rate,
                       padding=padding,
                       activation=activation)

    for layer_idx in range(0, layer_depth - 1):
        x = ConvBlock(layer_idx, **conv_params)(x)
        contracting_layers[layer_idx] = x
        x = layers.MaxPooling2D((pool_size, pool_size))(x)

    x = ConvBlock(layer_idx + 1, **conv_params)(x)

    for layer_idx in range(layer_idx, -1, -1):
        x = UpconvBlock(layer_idx,
                        filters_root,
                        kernel_size,
                        pool_size,
                        padding,
                        activation)(x)
        x = CropConcatBlock()(x, contracting_layers[layer_idx])
        x = ConvBlock(layer_idx, **conv_params)(x)

    x = layers.Conv2D(filters=num_classes,
                      kernel_size=(1, 1),
                      kernel_initializer=_get_kernel_initializer(filters_root, kernel_size),
                      strides=1,
                      padding=padding)(x)

    x = layers.Activation(activation)(x)
    outputs = layers.Activation("softmax", name="outputs")(x)
    model = Model(inputs, outputs, name="unet")

    return model


def _get_filter_count(layer_idx, filters_root):
    return 2 ** layer_idx * filters_root


def _get_kernel_initializer(filters, kernel_size):
    stddev = np.sqrt(2 / (kernel_size ** 2 * filters))
    return TruncatedNormal(stddev=stddev)


tf.keras.utils.set_random_seed(0)
unet = build_model(channels=1, num_classes=2, layer_depth=3, filters_root=8)


@tfcheck.aot(dims={"image_1": (44, 96), "image_2": (44, 96)})
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 1], tf.float32, name="image")])
def segment(image):
    return unet(image, training=False)


@tfcheck.aot(dims={"rows_1": (4, 32)})
@tf.function(input_signature=[tf.TensorSpec([1, None, 6], tf.float32, name="rows")])
def centre(rows):
    middle = tf.shape(rows)[1] // 2
    return rows[:, middle - 2:middle + 2] * 2.0


@tfcheck.aot(dims={"rows_1": (4, 32)}, shapes=[(1, 9, 6), (1, 16, 6)])
@tf.function(input_signature=[tf.TensorSpec([1, None, 6], tf.float32, name="rows")])
def centre_listed(rows):
    middle = tf.shape(rows)[1] // 2
    return rows[:, middle - 2:middle + 2] * 2.0
'''


def test_a_unet_of_valid_convolutions_builds_for_any_size(project: Callable[..., Path],
                                                          run_cli: Callable[..., Result]) -> None:
    folder = project({"jakeret_unet.py": JAKERET_UNET})
    code, report = build(run_cli, folder, "--out", str(folder / "out"))
    assert code == 1, report  # centre: refused
    records = by_function(report)
    segment = records["segment"]
    assert segment["status"] == "built" and segment["verified"], segment["message"]
    assert segment["dims"]["image_1"]["verified"] == [44, 71, 96]  # odd and even
    refused = records["centre"]
    assert refused["status"] == "failed" and "TFLite operator STRIDED_SLICE" in refused["message"]
    assert "cannot prove lie inside the axis at every size" in refused["message"]
    assert "Give the input's dimensions fixed sizes" in refused["message"]
    assert "list the concrete shapes: @tfcheck.aot(shapes=[" in refused["message"]
    listed = [record for record in report["functions"] if record["function"] == "jakeret_unet.centre_listed"]
    assert [record["status"] for record in listed] == ["built", "built"]  # the sizes listed, as the message says
    assert all(record["verified"] for record in listed)

    reference, library = reference_module(folder / "jakeret_unet.py"), tfcheck.load(folder / "out")
    rng = np.random.default_rng(6)
    for height, width in ((53, 61), (80, 72)):  # odd sizes: the crops' offsets round down
        image = rng.standard_normal((1, height, width, 1)).astype(np.float32)
        got, expected = library.segment(image), reference.unet(image, training=False).numpy()
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-4)
