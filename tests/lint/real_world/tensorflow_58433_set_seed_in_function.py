"""tensorflow/tensorflow#58433 "OperatorNotAllowedInGraphError: using random seed in tf.function".

`tf.random.set_seed` called inside a tf.function with a tensor: the global seed is read while
tracing, so a tensor seed fails (and a Python one is fixed at the first trace).
"""
import tensorflow as tf


@tf.function
def f(X):
    tf.random.set_seed(X)  # expect: TFC023
    tf.print(tf.random.normal((2, 3)))


f(tf.constant(1))
