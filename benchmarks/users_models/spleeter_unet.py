"""deezer/spleeter (64daa5a): the 2-stems separation network as spleeter's `unet` model function
builds it (`spleeter.model.functions.unet.unet`: one U-Net per instrument, six strided 5x5
convolutions down, six transposed ones up, a sigmoid mask times the mix), over the mix
spectrogram its 2stems configuration feeds it (T=512 frames, F=1024 bins, 2 channels), batch 1,
random weights. Spleeter builds it inside a TF1 Estimator; here the same function is applied to a
Keras input, as a TensorFlow 2 user would. `spleeter.model` imports pandas (its dataset helpers).
tf.keras 2 code (`tensorflow.compat.v1.keras` initializers): run with TF_USE_LEGACY_KERAS=1."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "spleeter"))

import tensorflow as tf  # noqa: E402
from spleeter.model.functions.unet import unet  # noqa: E402 - after the repository is on the path

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
mix = tf.keras.Input(shape=(512, 1024, 2), name="mix_spectrogram")
model = tf.keras.Model(mix, unet(mix, ["vocals", "accompaniment"], {}))


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 512, 1024, 2], tf.float32)])
def separate(mix_spectrogram):
    return model(mix_spectrogram, training=False)
