"""mcps5601/TimeGAN-tensorflow2 (6f68f9a): the embedder as the repository trains it (Masking, three
stacked GRUs or LSTMs with return_sequences, a sigmoid Dense), for batches of 1 to 128. Over the
unknown batch the build traces the layers unrolled (24 steps), so both have a symbolic artifact;
the GRU's shape entries are the fallback should that fail."""

import os
import sys
import types

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "TimeGAN-tensorflow2"))

import tensorflow as tf  # noqa: E402 - after the repository is on the path
from hider.timegan.modules.embedder import Embedder  # noqa: E402

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
SEQUENCE, FEATURES = 24, 6


def _embedder(kind: str) -> Embedder:
    args = types.SimpleNamespace(module_name=kind, feature_dim=FEATURES, hidden_dim=24, num_layers=3,
                                 max_seq_len=SEQUENCE)
    network = Embedder(args)
    network(tf.zeros([2, SEQUENCE, FEATURES]))
    return network


gru_embedder, lstm_embedder = _embedder("gru"), _embedder("lstm")


@tfcheck.aot(dims={"batch": (1, 128)}, shapes=[(1, SEQUENCE, FEATURES), (32, SEQUENCE, FEATURES)])
@tf.function(input_signature=[tf.TensorSpec([None, SEQUENCE, FEATURES], tf.float32)])
def embed_gru(x):
    return gru_embedder(x)


@tfcheck.aot(dims={"batch": (1, 128)})
@tf.function(input_signature=[tf.TensorSpec([None, SEQUENCE, FEATURES], tf.float32)])
def embed_lstm(x):
    return lstm_embedder(x)
