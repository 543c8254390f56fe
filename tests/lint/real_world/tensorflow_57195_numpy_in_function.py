"""tensorflow/tensorflow#57195 "AttributeError: 'Tensor' object has no attribute 'numpy'".

The reporter calls `.numpy()` on a tensor inside a tf.function: while tracing the tensor is
symbolic and has no `numpy` method, so the function cannot be traced.
"""
import tensorflow as tf

x = tf.ones([1])
y = tf.ones([1])


@tf.function
def f(x, y):
    return (x + y).numpy()  # expect: TFC011


f(x, y)
