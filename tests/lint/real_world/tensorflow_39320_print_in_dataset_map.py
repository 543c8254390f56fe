"""tensorflow/tensorflow#39320 "Breakpoints do not stop inside tf.function".

A function passed to `Dataset.map` is traced once into a graph: the reporter's breakpoint on its
`print` never stops, and the `print` itself runs only while the map function is traced, not once
per element.
"""
import tensorflow as tf

def read_tfrecord(x):
    print('Dummy function')  # expect: TFC001
    return x

dataset = tf.data.Dataset.from_tensor_slices([1, 2, 3])
print(dataset)
dataset = dataset.map(lambda x: read_tfrecord(x))
