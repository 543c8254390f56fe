"""tensorflow/tensorflow#48305 "OperatorNotAllowedInGraphError".

TF1 code moved under `@tf.function`: unpacking `tf.shape(x)` iterates over a symbolic tensor (the
reported error), `np.array` is applied to a tensor, and a `tf.Variable` is created on every trace.
"""
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
import numpy as np


def create_placeholders(n_x):
    x = tf.placeholder(tf.float32, [None, n_x], name="x")
    return x


def get(x):
    [r, c] = tf.shape(x)  # expect: TFC021
    mat = tf.zeros([r, c])
    return np.array(mat, dtype='float32')  # expect: TFC011


@tf.function
def model(h):
    (m, n_x) = h.shape
    x = create_placeholders(n_x)
    with tf.name_scope("x_layer"):
        z = get(x)

    with tf.Session() as sess:
        v = tf.Variable(tf.ones([2, 3]), name="v")  # expect: TFC004
        z = sess.run([z], feed_dict={x: v})


h = tf.Variable(tf.ones([3, 3]), name="h")
model(h)
