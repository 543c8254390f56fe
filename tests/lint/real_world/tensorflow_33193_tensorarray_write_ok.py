"""tensorflow/tensorflow#33193 "AutoGraph returns an empty array when I use a for-loop and TensorArray" (the fix).

The maintainer's reply ("This works for me"): assign every `write` result back to `b`.
"""
import numpy as np
import tensorflow as tf

a = np.array([1, 2, 3], np.int32)


@tf.function
def foo(a):
    b = tf.TensorArray(tf.string, 4)
    b = b.write(0, "test")
    for i in tf.range(3):
        if a[i] == 2:
            b = b.write(i, "fuzz")
        elif a[i] == 3:
            b = b.write(i, "buzz")
    return b.stack()


print(foo(a))
