"""tensorflow/tensorflow#38555 "[tf.function] tf.Variable converted to tf.Tensor automatically in second loop".

Python `print` calls inside a tf.function run only while tracing; the reporter reads the traced
placeholders they print as the values. (The reported error comes from rebinding `a` to the result
of `assign`, which no rule covers.)
"""
import numpy as np
import tensorflow as tf


@tf.function
def foo(a):
    print(a)  # expect: TFC001
    for i in range(10):
        if a[0] > 3:
            print(f'True: a_{i}: {a}')  # expect: TFC001
            a = a[0].assign(1)
        else:
            print(f'False: a_{i}: {a}')  # expect: TFC001
            a = a[0].assign(2)


a = tf.Variable(np.array([1, 2, 3]))
foo(a)
