"""Issue 5's small workloads, at its batch sizes: `tfcheck bench benchmarks/compiled/small_models.py`.

MLP (batch 32), a small CNN with batch norm (batch 8), a Transformer encoder block
(MultiHeadAttention, batch 1) and an LSTM (batch 8). Weights are random (seeded): latency does not
depend on their values. `fixtures/aot/` holds the same kinds of model at the sizes the build tests
use; these are the sizes `docs/benchmarks.md` reports.
"""

import keras
import tensorflow as tf

import tfcheck

keras.utils.set_random_seed(0)

mlp_model = keras.Sequential([
    keras.Input((256,)),
    keras.layers.Dense(512, activation="relu"),
    keras.layers.Dense(512, activation="relu"),
    keras.layers.Dense(10),
])

cnn_model = keras.Sequential([
    keras.Input((32, 32, 3)),
    keras.layers.Conv2D(32, 3, padding="same", use_bias=False),
    keras.layers.BatchNormalization(),
    keras.layers.ReLU(),
    keras.layers.MaxPooling2D(),
    keras.layers.Conv2D(64, 3, padding="same", use_bias=False),
    keras.layers.BatchNormalization(),
    keras.layers.ReLU(),
    keras.layers.GlobalAveragePooling2D(),
    keras.layers.Dense(10),
])


SEQUENCE, WIDTH, HEADS = 64, 128, 4
attention = keras.layers.MultiHeadAttention(num_heads=HEADS, key_dim=WIDTH // HEADS)
norm_1, norm_2 = keras.layers.LayerNormalization(), keras.layers.LayerNormalization()
feed_forward = keras.Sequential([keras.layers.Dense(4 * WIDTH, activation="gelu"), keras.layers.Dense(WIDTH)])
_sample = tf.zeros([1, SEQUENCE, WIDTH])
attention(_sample, _sample)
norm_1(_sample)
norm_2(_sample)
feed_forward(_sample)

lstm_model = keras.Sequential([keras.Input((50, 32)), keras.layers.LSTM(128), keras.layers.Dense(10)])


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([32, 256], tf.float32)])
def mlp(x):
    return mlp_model(x, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([8, 32, 32, 3], tf.float32)])
def cnn_bn(images):
    return cnn_model(images, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, SEQUENCE, WIDTH], tf.float32)])
def encoder_block(tokens):
    attended = norm_1(tokens + attention(tokens, tokens, training=False))
    return norm_2(attended + feed_forward(attended, training=False))


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([8, 50, 32], tf.float32)])
def lstm(sequence):
    return lstm_model(sequence, training=False)
