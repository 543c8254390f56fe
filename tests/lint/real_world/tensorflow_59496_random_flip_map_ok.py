"""tensorflow/tensorflow#59496 "tf.data: random operation inside map function leads to unexpected results on multi-CPU machines" (correct code).

A Keras `RandomFlip` layer mapped over a dataset: the augmentation is a graph op, drawn per
element. The multi-CPU behaviour reported is TensorFlow's; the code must stay silent.
"""
import tensorflow as tf

x = tf.constant([0, 1])
x = tf.reshape(x, [1, 2, 1, 1])

augmenter = tf.keras.layers.RandomFlip('vertical')
dataset = tf.data.Dataset.from_tensor_slices(x)
dataset = dataset.repeat()
dataset = dataset.map(augmenter)
