"""tensorflow/tensorflow#35540 "Deadlock on recursive tf.function-decorated function calls".

A tf.function that calls itself: tracing it re-enters its own trace (a deadlock in TF 2.0).
"""
import tensorflow as tf


@tf.function(autograph=False)
def func1(depth=0):
    if depth > 1:
        return depth
    else:
        return func1(depth + 1)  # expect: TFC006


func1(0)
