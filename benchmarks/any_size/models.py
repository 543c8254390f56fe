"""Keras MobileNetV2 (no top, average-pooled, batch norms calibrated) for images of any size from
96 to 224 pixels a side and at 224x224, and a Transformer encoder block (Keras 3's
MultiHeadAttention, LayerNormalization and Dense) for sequences of any length from 16 to 256 and
at 128: what `benchmarks/any_size.py` builds and compares (docs/schedules.md, "Images of any size")."""
import sys
from pathlib import Path

import keras
import tensorflow as tf

import tfcheck

keras.utils.set_random_seed(0)
mnet = keras.applications.MobileNetV2(weights=None, input_shape=(None, None, 3), include_top=False, pooling="avg")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures" / "aot"))
from calibration import calibrate_batch_norm  # noqa: E402 - the fixtures' helper
calibrate_batch_norm(mnet, (4, 160, 160, 3))


@tfcheck.aot(dims={"images_1": (96, 224), "images_2": (96, 224)})
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32)])
def mobilenet_any(images):
    return mnet(images, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 224, 224, 3], tf.float32)])
def mobilenet_224(images):
    return mnet(images, training=False)


class Encoder(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.attention = keras.layers.MultiHeadAttention(num_heads=4, key_dim=32)
        self.norm1, self.norm2 = keras.layers.LayerNormalization(), keras.layers.LayerNormalization()
        self.dense1, self.dense2 = keras.layers.Dense(512, activation="gelu"), keras.layers.Dense(128)

    def call(self, x):
        x = self.norm1(x + self.attention(x, x))
        return self.norm2(x + self.dense2(self.dense1(x)))


encoder = Encoder()
encoder(tf.zeros([1, 64, 128]))


@tfcheck.aot(dims={"tokens_1": (16, 256)})
@tf.function(input_signature=[tf.TensorSpec([1, None, 128], tf.float32)])
def encoder_any(tokens):
    return encoder(tokens)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 128, 128], tf.float32)])
def encoder_128(tokens):
    return encoder(tokens)
