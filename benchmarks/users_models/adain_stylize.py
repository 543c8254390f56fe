"""srihari-humbarwadi/adain-tensorflow2.x (bc31428): AdaIN style transfer as its export.py serves
it (a style and a content image of any size, an alpha): VGG19 with reflection padding, adaptive
instance normalisation, the decoder's nearest upsampling. tf.keras 2 code: run with
TF_USE_LEGACY_KERAS=1. The VGG weights the repository loads are random ones saved here."""

import os
import sys
import tempfile
import types

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "adain-tensorflow2.x"))

import tensorflow as tf  # noqa: E402 - after the repository is on the path
from adain.model.network import style_transfer_network  # noqa: E402

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
preprocessing = types.SimpleNamespace(offset=[103.939, 116.779, 123.68], scale=[1.0, 1.0, 1.0])
_weights = os.path.join(tempfile.mkdtemp(prefix="adain-"), "vgg.weights.h5")
style_transfer_network.get_vgg_model(preprocessing).save_weights(_weights)
model = style_transfer_network.StyleTransferNetwork(preprocessing, _weights)
model((tf.zeros([1, 64, 64, 3]), tf.zeros([1, 64, 64, 3]), tf.constant(0.5)))
SIDES = ("style_images_1", "style_images_2", "content_images_1", "content_images_2")


@tfcheck.aot(dims={side: (32, 256) for side in SIDES})
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32), tf.TensorSpec([1, None, None, 3], tf.float32),
                              tf.TensorSpec([], tf.float32)])
def stylize(style_images, content_images, alpha):
    return model((style_images, content_images, alpha))["synthesized_images"]


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 256, 256, 3], tf.float32), tf.TensorSpec([1, 256, 256, 3], tf.float32),
                              tf.TensorSpec([], tf.float32)])
def stylize_256(style_images, content_images, alpha):
    return model((style_images, content_images, alpha))["synthesized_images"]
