"""tensorflow/tensorflow#44491 "deterministic `Dataset.map`s aren't" (correct code).

A map function that returns `tf.random.uniform`, and `.numpy()` called on the dataset's elements
in eager code. The non-determinism is a tf.data issue; nothing here is a tf.function pitfall.
"""
import tensorflow as tf
import numpy as np

seed = 0
tf.random.set_seed(seed)


def map_fn(x):
    return tf.random.uniform((100,),)


ds = tf.data.Dataset.range(10).map(
    map_fn, num_parallel_calls=2, deterministic=True)

tf.random.set_seed(seed)
vals0 = [el.numpy() for el in ds]
tf.random.set_seed(seed)
vals1 = [el.numpy() for el in ds]

np.testing.assert_equal(vals0, vals1)
