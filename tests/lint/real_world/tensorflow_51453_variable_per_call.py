"""tensorflow/tensorflow#51453 "unable to create tf.variables inside a function that is decorated with @tf.function".

The reporter wants a new `tf.Variable` on each of ~50 calls of a tf.function: variables may be
created only on the first trace.
"""
import tensorflow as tf


@tf.function
def weight_fn():
    w = tf.Variable(tf.truncated_normal())  # expect: TFC004
