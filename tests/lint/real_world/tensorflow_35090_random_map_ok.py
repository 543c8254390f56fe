"""tensorflow/tensorflow#35090 "Subsequent calls to tf.data.Dataset.map() with seeded random operation give same random sequences." (correct code).

Random values drawn with `tf.random.uniform` inside `Dataset.map` lambdas: graph ops, evaluated per
element. The repeated sequences come from the seeding semantics, not from a pitfall in this code.
"""
import numpy as np
import tensorflow as tf
tf.compat.v1.enable_eager_execution()

SEED = 88
tf.compat.v1.random.set_random_seed(SEED)

ds_train = tf.data.Dataset.range(0, 4)
ds_val = tf.data.Dataset.range(0, 4)
ds_train = ds_train.map(
    lambda x: tf.random.uniform([1], 0.2, 5.0)
)
ds_val = ds_val.map(
    lambda x: tf.random.uniform([1], 0.2, 5.0)
)
for el in ds_train:
    print(el.numpy())
