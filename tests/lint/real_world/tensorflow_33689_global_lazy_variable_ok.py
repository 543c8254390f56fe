"""tensorflow/tensorflow#33689 "tf.function strange behavior with global variables" (works).

The reporter's rewrite that works: a module-level variable created once, behind an `is None` guard,
on the first trace.
"""
import tensorflow as tf

foo = None


@tf.function
def bar(value=None):
    if value is not None:
        result = tf.constant(value)
        return result
    else:
        global foo
        if foo is None:
            foo = tf.Variable(1)
        return foo


bar()
