"""tensorflow/tensorflow#37245 "Warning/Error not present when not using the result of write in a TensorArray" (the fix).

The reporter's function with the result of `write` assigned back, as the `write` documentation the
thread quotes requires.
"""
import tensorflow as tf


@tf.function
def use_tensor_array(x):
    y = tf.TensorArray(x.dtype, tf.shape(x)[0])
    for i in tf.range(tf.shape(x)[0]):
        y = y.write(i, x[i])
    y = y.stack()
    return y


use_tensor_array(tf.constant([1, 3, 4, 6]))
