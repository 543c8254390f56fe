"""LynnHo/CycleGAN-Tensorflow-2 (093dc9d): the two ResNet generators as its test.py builds and
runs them (`module.ResnetGenerator` at the 256x256 crop: reflection padding, instance norm from
tensorflow-addons, nine residual blocks, transposed convolutions), and `sample_A2B` as test.py
writes it (A -> B -> A), batch 1. tf.keras 2 code: run with TF_USE_LEGACY_KERAS=1.
tensorflow-addons 0.23 (the last) imports `keras.src.engine.keras_tensor`, which Keras 3 no
longer has: tf_keras's module stands in for it, and addons' own InstanceNormalization runs."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "CycleGAN-Tensorflow-2"))

import tf_keras.src.engine  # noqa: E402
import tf_keras.src.engine.keras_tensor  # noqa: E402

sys.modules.setdefault("keras.src.engine", tf_keras.src.engine)  # for tensorflow_addons/utils/types.py
sys.modules.setdefault("keras.src.engine.keras_tensor", tf_keras.src.engine.keras_tensor)

import module  # noqa: E402 - after the repository is on the path
import tensorflow as tf  # noqa: E402

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
G_A2B = module.ResnetGenerator(input_shape=(256, 256, 3))
G_B2A = module.ResnetGenerator(input_shape=(256, 256, 3))


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 256, 256, 3], tf.float32)])
def sample_A2B(A):
    A2B = G_A2B(A, training=False)
    A2B2A = G_B2A(A2B, training=False)
    return A2B, A2B2A
