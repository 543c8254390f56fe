"""tensorflow/tensorflow#30768 "Cryptic error message when assigning to a variable in a tf.function".

The reporter rebinds the global `v`, a `tf.Variable`, with `v = v + x` inside a tf.function instead
of calling `v.assign(v + x)` (the reporter's own comment). The rebinding runs only while tracing and
stores a tensor of the trace in the global, replacing the variable.
"""
import tensorflow as tf

v = tf.Variable(0.)


@tf.function
def f(x):
    global v
    v = v + x  # no problem if use v.assign(v + x)  # expect: TFC009
    return v


f(42.0)
