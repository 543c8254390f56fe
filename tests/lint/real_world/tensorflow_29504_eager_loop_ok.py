"""tensorflow/tensorflow#29504 "tf.function fails to parse for-loop in some circumstances" (works).

The same function without `@tf.function`, which the reporter shows returning the right result: in
eager mode the loop runs in Python and the list holds one tensor per step.
"""
import tensorflow as tf


def function_with_loop(num_iter):
    digit_list = []
    for i in tf.range(num_iter):
        digit_list.append(i)
    return tf.add_n(digit_list)


function_with_loop(5)
