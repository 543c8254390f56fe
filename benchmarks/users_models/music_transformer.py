"""jason9693/MusicTransformer-tensorflow2.0 (f7c06c0): `MusicTransformerDecoder`'s forward pass,
its Encoder of relative global attention layers (the skewing trick: pad, reshape, slice) then a
Dense and a softmax, from the repository's custom/layers.py. That file imports the legacy
`tensorflow.python.keras`, which today's TensorFlow no longer fills: tf_keras stands in for it."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "MusicTransformer-tensorflow2.0"))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

sys.modules["tensorflow.python"].keras = tf_keras  # the repository's `from tensorflow.python import keras`
from custom.layers import Encoder  # noqa: E402 - after the stand-in

import tfcheck  # noqa: E402

tf.random.set_seed(0)
VOCABULARY, SEQUENCE = 390, 128
decoder = Encoder(num_layers=2, d_model=256, input_vocab_size=VOCABULARY, rate=0.2, max_len=512)
head = tf_keras.layers.Dense(VOCABULARY)
LOOKUP_MASK = tf.constant((1.0 - np.tril(np.ones([SEQUENCE, SEQUENCE], np.float32)))[None, None])
head(decoder(tf.zeros([1, SEQUENCE], tf.int32), mask=LOOKUP_MASK)[0])


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, SEQUENCE], tf.int32)])
def next_event(tokens):
    hidden, _ = decoder(tokens, training=False, mask=LOOKUP_MASK)
    return tf.nn.softmax(head(hidden))
