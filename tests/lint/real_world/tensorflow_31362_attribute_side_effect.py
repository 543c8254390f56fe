"""tensorflow/tensorflow#31362 "Non-tensorflow code gets executed only on the first run of tf.function".

`o.value += 1` on a plain Python object inside a tf.function runs only while tracing: the counter
stops at 1 although the function is called five times.
"""
import tensorflow as tf

print(tf.__version__)


class MyObj:
    def __init__(self):
        self.value = 0


obj = MyObj()


@tf.function
def with_py_side_effect(tensorflow_stuff, o):

    # do my complex tf stuff
    ...

    o.value += 1  # expect: TFC002
    return tensorflow_stuff


for i in range(5):
    print(i, obj.value)
    a = with_py_side_effect(None, obj)
