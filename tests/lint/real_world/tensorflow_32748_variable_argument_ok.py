"""tensorflow/tensorflow#32748 "AttributeError when passing tf.Variable into tf.function" (works).

The workaround a maintainer gave for an AttributeError TensorFlow 2.0 raised when two new
`tf.Variable`s were passed to one tf.function: pass tensors instead. Both calls reuse one trace.
"""
import tensorflow as tf
@tf.function
def foo(v):
    pass

foo(tf.constant(1))
foo(tf.constant(1))
