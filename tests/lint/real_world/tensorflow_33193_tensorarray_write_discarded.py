"""tensorflow/tensorflow#33193 "AutoGraph returns an empty array when I use a for-loop and TensorArray".

Every `b.write(...)` result is discarded; in graph mode the returned array is empty (it happens to
work eagerly, where the write mutates in place).
"""
import numpy as np
import tensorflow as tf

a = np.array([1, 2, 3], np.int32)


@tf.function  # works without the decorator
def foo(a):
    b = tf.TensorArray(tf.string, 4)
    b.write(0, "test")  # expect: TFC020
    for i in tf.range(3):
        if a[i] == 2:
            b.write(i, "fuzz")  # expect: TFC020
        elif a[i] == 3:
            b.write(i, "buzz")  # expect: TFC020
    return b.stack()


print(foo(a))
