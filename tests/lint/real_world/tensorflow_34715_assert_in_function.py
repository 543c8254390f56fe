"""tensorflow/tensorflow#34715 "Can't use assert statement inside tf.function".

A Python `assert` on a tensor inside a tf.function: while tracing, the tensor cannot be turned into
a Python bool (OperatorNotAllowedInGraphError).
"""
import tensorflow as tf


@tf.function
def f(x):
    assert tf.constant(True), 'assert failed'  # expect: TFC008
    return x


x = tf.ones(())
print(f(x))
