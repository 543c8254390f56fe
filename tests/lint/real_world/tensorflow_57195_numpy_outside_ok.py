"""tensorflow/tensorflow#57195 "AttributeError: 'Tensor' object has no attribute 'numpy'" (the fix).

The answer in the thread: return the tensor from the tf.function and call `.numpy()` on the result,
outside the graph.
"""
import tensorflow as tf

x = tf.ones([1])
y = tf.ones([1])


@tf.function
def f(x, y):
    return x + y


print(f(x, y).numpy())
