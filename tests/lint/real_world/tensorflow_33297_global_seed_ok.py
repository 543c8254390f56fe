"""tensorflow/tensorflow#33297 "Surprising random seed behavior when using @tf.function" (correct code).

The global seed is set in eager code, outside the function; the tf.function only draws from
`tf.random.uniform`. The surprise discussed in the thread is TensorFlow's documented seeding, not a
tf.function pitfall in this code, which must stay silent.
"""
import tensorflow as tf


@tf.function
def rnd():
    return tf.random.uniform(shape=[])


tf.random.set_seed(42)
print(rnd())
print(rnd())
