"""google-research/seed_rl#52 "Unable to update non-tensor variable in the tf.function".

`np.random.random()` inside a tf.function is evaluated once, while tracing: every call prints the
same "random" number.
"""
import numpy as np
import tensorflow as tf


@tf.function
def random1():
    i = np.random.random()  # expect: TFC010
    tf.print("number_random", i)
