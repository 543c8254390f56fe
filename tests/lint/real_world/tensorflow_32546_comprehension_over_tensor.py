"""tensorflow/tensorflow#32546 "[autograph List comprehension issue] OperatorNotAllowedInGraphError error in Tensorflow 2.0".

The AutoGraph guide's `square_if_positive` decorated and called with a tensor: the comprehension
iterates over a symbolic tensor in Python.
"""
import tensorflow as tf


@tf.function
def square_if_positive(x):
    return [i ** 2 if i > 0 else i for i in x]  # expect: TFC021


square_if_positive(tf.range(-5, 5))
