"""tensorflow/tensorflow#51453 "unable to create tf.variables inside a function that is decorated with @tf.function" (the fix).

The fix quoted in the thread from TensorFlow's error message: create the variable outside the
function and capture it.
"""
import tensorflow as tf

v = tf.Variable(1.0)


@tf.function
def f():
    return v


f()  # <tf.Tensor: numpy=1.>
v.assign_add(1.)
f()  # <tf.Tensor: numpy=2.>
