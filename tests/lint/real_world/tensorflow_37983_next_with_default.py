"""tensorflow/tensorflow#37983 "Calling next with a default value on an exhausted Dataset iterator raises an OutOfRangeError in graph mode".

`next(iterator, default)` on a dataset iterator: in a tf.function the default is never returned,
the exhausted iterator raises OutOfRangeError instead.
"""
import tensorflow as tf

x = tf.convert_to_tensor([[1], [2], [3]])
ds = tf.data.Dataset.from_tensor_slices(x)
dsi = iter(ds)


@tf.function  # remove this to get the expected behaviour
def func():
    for _ in range(4):
        tf.print(next(dsi, -1))  # expect: TFC022


func()
