"""tensorflow/tensorflow#38215 "iterating over `tf.Tensor` is not allowed when using autograph" (correct code).

A `for` over `tf.range(batch_size)` in a tf.function, the form AutoGraph converts into a graph
loop. The reporter's error came from AutoGraph not converting their function in TF 2.1; the loop
itself is the recommended form. The reporter posted the loop only; it is shown in the tf.function
they describe.
"""
import tensorflow as tf


@tf.function
def f(batch_size):
    for batch in tf.range(batch_size):
        pass
