"""tensorflow/tensorflow#46518 "Very slow tf.TensorArray and a possible bug when used with range()" (works).

A maintainer's two versions of one loop inside a tf.function: a Python list appended in a Python
`range` loop (unrolled while tracing: fine when the number of steps is the same on every call), and
a TensorArray written in a `tf.range` loop. Both are correct; they differ in trace and run time.
"""
import tensorflow as tf

@tf.function
def list_appends_tff(n):
    l = []
    for i in range(n):
        l.append(i)
    return tf.stack(l)

@tf.function
def t_array_tff_tfr(n):
    t = tf.TensorArray(dtype=tf.int32, size=0, dynamic_size=True)
    for i in tf.range(n):
        t = t.write(i, i)
    return t.stack()
