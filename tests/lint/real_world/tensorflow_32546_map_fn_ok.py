"""tensorflow/tensorflow#32546 "[autograph List comprehension issue] OperatorNotAllowedInGraphError error in Tensorflow 2.0" (the fix).

The maintainer's two workarounds: `tf.map_fn` for the comprehension, or an explicit loop that
AutoGraph converts, writing into a TensorArray.
"""
import tensorflow as tf


@tf.function
def square_if_positive(x):
    return tf.map_fn(lambda i: i ** 2 if i > 0 else i, x)


@tf.function
def square_if_positive_loop(x):
    r = tf.TensorArray(x.dtype, 0, dynamic_size=True)
    for i in x:
        r = r.write(r.size(), i ** 2 if i > 0 else i)
    return r.stack()


square_if_positive(tf.range(-5, 5))
square_if_positive_loop(tf.range(-5, 5))
