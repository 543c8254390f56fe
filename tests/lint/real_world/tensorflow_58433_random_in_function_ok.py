"""tensorflow/tensorflow#58433 "OperatorNotAllowedInGraphError: using random seed in tf.function" (works).

The reporter's snippet that works: a random op inside the tf.function, no seed set in graph code.
"""
import tensorflow as tf


@tf.function
def f(X):
    tf.print(tf.random.normal((2, 3)))


f(tf.constant(1))
