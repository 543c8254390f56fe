"""kpe/bert-for-tf2 (55f6a6f): `bert.BertModelLayer` with the parameters its README shows (BERT
base: 12 layers, hidden 768, a vocabulary of 16000, token types), in the README's Keras model
over `max_seq_len = 128` token ids and token type ids, for batches of 1 to 8. Two changes a user
following the README has to make: `name=` goes to `from_params` (as the README's next example
has it; `Params` refuses it), and `num_heads=12` is given (the README leaves it out, and the
default None fails `hidden_size % num_heads`).
Random weights. The package is tf.keras 2 code on py-params and params-flow; params-flow imports
the legacy `tensorflow.python.keras`, which today's TensorFlow no longer fills: tf_keras stands in
for it. Run with TF_USE_LEGACY_KERAS=1."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "bert-for-tf2"))

import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

sys.modules["tensorflow.python"].keras = tf_keras  # params_flow's `from tensorflow.python.keras import backend`
sys.modules.setdefault("tensorflow.python.keras", tf_keras)
sys.modules.setdefault("tensorflow.python.keras.backend", tf_keras.backend)
from bert import BertModelLayer  # noqa: E402 - after the stand-in
from tensorflow import keras  # noqa: E402

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
bert_params = BertModelLayer.Params(
    vocab_size=16000, use_token_type=True, use_position_embeddings=True, token_type_vocab_size=2,
    num_layers=12, num_heads=12, hidden_size=768, hidden_dropout=0.1, intermediate_size=4 * 768, intermediate_activation="gelu",
    adapter_size=None, shared_layer=False, embedding_size=None)
l_bert = BertModelLayer.from_params(bert_params, name="bert")  # the README's `name=` inside Params is refused
max_seq_len = 128
l_input_ids = keras.layers.Input(shape=(max_seq_len,), dtype='int32')
l_token_type_ids = keras.layers.Input(shape=(max_seq_len,), dtype='int32')
output = l_bert([l_input_ids, l_token_type_ids])
model = keras.Model(inputs=[l_input_ids, l_token_type_ids], outputs=output)
model.build(input_shape=[(None, max_seq_len), (None, max_seq_len)])
l_bert_ids = BertModelLayer.from_params(bert_params, name="bert")  # a layer built for two inputs takes no other
ids_model = keras.Model(inputs=l_input_ids, outputs=l_bert_ids(l_input_ids))
ids_model.build(input_shape=(None, max_seq_len))


@tfcheck.aot(dims={"batch": (1, 8)})
@tf.function(input_signature=[tf.TensorSpec([None, max_seq_len], tf.int32),
                              tf.TensorSpec([None, max_seq_len], tf.int32)])
def encode(input_ids, token_type_ids):
    return model([input_ids, token_type_ids], training=False)


@tfcheck.aot(dims={"batch": (1, 8)})
@tf.function(input_signature=[tf.TensorSpec([None, max_seq_len], tf.int32)])
def encode_ids(input_ids):
    return ids_model(input_ids, training=False)
