"""tensorflow/tensorflow#13932 "Non-determinism from `tf.data.Dataset.map` with random ops" (the maintainer's code).

The maintainer's recipe: draw the random number with a TensorFlow op in a single-threaded `map`,
so it is a graph op evaluated per element.
"""
import numpy as np
import tensorflow as tf


def test(threads):
    np.random.seed(42)
    tf.set_random_seed(42)
    images = np.random.rand(100, 64, 64, 3).astype(np.float32)

    def get_data():
        dataset = tf.data.Dataset.from_tensor_slices(images)
        # Perform the random number generation in a single-threaded map().
        dataset = dataset.map(
            lambda image: (image, tf.random_uniform([], -0.04, 0.04, seed=42)),
            num_parallel_calls=1)
