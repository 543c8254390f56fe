"""LongxingTan/Time-series-prediction (1d1324b, the `tfts` package): two of its forecasters as its
README trains them (`AutoConfig.for_model(name)`, `AutoModel.from_config(config,
predict_sequence_length=8)`, 24 steps of 2 features in), each made into the Keras model
`KerasTrainer.train` makes (`model.build_model(Input(shape=(24, 2)))`): `seq2seq` (a GRU encoder, a
GRU-cell decoder unrolled over the 8 steps, attention) for one series, and `transformer` (encoder
and decoder stacks) for batches of 1 to 64. Random weights. tfts's data helpers import pandas."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "Time-series-prediction"))

import tensorflow as tf  # noqa: E402
from tfts import AutoConfig, AutoModel  # noqa: E402 - after the repository is on the path

import tfcheck  # noqa: E402

train_length, predict_sequence_length, n_feature = 24, 8, 2
tf.keras.utils.set_random_seed(0)


def trained_form(name: str) -> tf.keras.Model:
    config = AutoConfig.for_model(name)
    model = AutoModel.from_config(config, predict_sequence_length=predict_sequence_length)
    return model.build_model(inputs=tf.keras.layers.Input(shape=(train_length, n_feature), name="input"))


seq2seq = trained_form("seq2seq")
transformer = trained_form("transformer")


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, train_length, n_feature], tf.float32)])
def forecast_seq2seq(x):
    return seq2seq(x, training=False)


@tfcheck.aot(dims={"batch": (1, 64)})
@tf.function(input_signature=[tf.TensorSpec([None, train_length, n_feature], tf.float32)])
def forecast_transformer(x):
    return transformer(x, training=False)
