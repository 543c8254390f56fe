"""syrax90/mask2former_tensorflow2 (8c176f0): Mask2Former as the repository builds it (ResNet50,
the multi-scale deformable attention pixel decoder, the transformer decoder), at 256x256, batch 1;
ResNet50 without its downloaded ImageNet weights. tf.keras 2 code (`add_weight` with a positional
name): run with TF_USE_LEGACY_KERAS=1. Its pixel decoder builds reference points in a
tf.while_loop that writes a tf.TensorArray of `[None, None, 2]` elements, one size per level, which
TensorFlow's converter cannot lower: the build says so, and what to do."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "mask2former_tensorflow2"))

import model_functions  # noqa: E402 - after the repository is on the path
import tensorflow as tf  # noqa: E402

import tfcheck  # noqa: E402

_resnet50 = model_functions.ResNet50
model_functions.ResNet50 = lambda **kwargs: _resnet50(**{**kwargs, "weights": None})  # no download
tf.keras.utils.set_random_seed(0)
model = model_functions.Mask2FormerModel(input_shape=(256, 256, 3))
model(tf.zeros([1, 256, 256, 3]), training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 256, 256, 3], tf.float32)])
def segment(images):
    return model(images, training=False)
