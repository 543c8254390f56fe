"""akanyaani/gpt-2-tensorflow2.0 (ab93122): `gpt2_model.Gpt2` with train_gpt2.py's defaults (8
decoder layers, d_model 768, 8 heads, dff 3072, 515 positions, a vocabulary of 24512, the output
projection tied to the embedding), its forward pass as sample.py calls it for the first step
(`model(context, training=False)`: logits and each layer's key/value `presents`), for one
sequence of 1 to 128 tokens, and of 64 tokens. Random weights. tf.keras 2 code (`add_weight`
with a positional name): run with TF_USE_LEGACY_KERAS=1."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "gpt-2-tensorflow2.0"))

import tensorflow as tf  # noqa: E402
from gpt2_model import Gpt2  # noqa: E402 - after the repository is on the path

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
model = Gpt2(num_layers=8, d_model=768, num_heads=8, dff=3072, max_seq_len=515, vocab_size=24512)
model(tf.ones([1, 8], tf.int32), training=False)


@tfcheck.aot(dims={"context_1": (1, 128)})
@tf.function(input_signature=[tf.TensorSpec([1, None], tf.int32)])
def next_token_logits(context):
    return model(context, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 64], tf.int32)])
def next_token_logits_64(context):
    return model(context, training=False)
