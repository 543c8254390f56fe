"""tensorflow/tensorflow#34744 "Nested TensorArray using tf.function. Write->concat->write" (works).

The reporter's narrowed-down function: a TensorArray written with `tarr = tarr.write(...)` and
concatenated in a `tf.range` loop. The code is correct; the failure the reporter saw came from
TensorFlow's parallel execution of the loop (it went away with one inter-op thread).
"""
import tensorflow as tf

@tf.function
def computeElement():
    tarr = tf.TensorArray(tf.int32, size=1,clear_after_read=False)
    tarr = tarr.write(0, [1])
    concat = tarr.concat()

    # PROBLEM HERE
    for x in tf.range(50):
        concat = tarr.concat()

    return concat
