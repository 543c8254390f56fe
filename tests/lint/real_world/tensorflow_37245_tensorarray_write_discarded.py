"""tensorflow/tensorflow#37245 "Warning/Error not present when not using the result of write in a TensorArray".

`TensorArray.write` returns a new TensorArray; the reporter discards it, so the stacked result
holds none of the writes.
"""
import tensorflow as tf


@tf.function
def use_tensor_array(x):
    y = tf.TensorArray(x.dtype, tf.shape(x)[0])
    for i in tf.range(tf.shape(x)[0]):
        y.write(i, x[i])  # expect: TFC020
    y = y.stack()
    return y


use_tensor_array(tf.constant([1, 3, 4, 6]))
