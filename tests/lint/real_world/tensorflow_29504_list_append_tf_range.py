"""tensorflow/tensorflow#29504 "tf.function fails to parse for-loop in some circumstances".

A Python list appended to inside a `for i in tf.range(...)` loop: AutoGraph turns the loop into a
graph loop whose body is traced once, and the list cannot be carried through it (ValueError:
Trying to capture a tensor from an inner function).
"""
import tensorflow as tf


@tf.function
def tf_function_with_loop(num_iter):
    digit_list = []
    for i in tf.range(num_iter):
        digit_list.append(i)  # expect: TFC017
    return tf.add_n(digit_list)


tf_function_with_loop(5)
