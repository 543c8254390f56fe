"""tensorflow/tensorflow#31363 "tf.function changes behavior of += operator on tf.Tensors".

A method called from a tf.function stores `self.value + 1`, a tensor of the trace, on a Python
object: after the call the object holds a symbolic `Tensor("add:0")` instead of a value.
"""
import tensorflow as tf

print(tf.__version__)


class First:
    def __init__(self, initial: int):
        self.value = tf.constant(initial)

    def increment(self):
        self.value += 1  # expect: TFC009

    def __str__(self):
        return f'Object with tensor = {self.value}'


@tf.function
def increment(obj: First):
    obj.increment()


c1 = First(100)

c1.increment()
print(c1)

increment(c1)
print(c1)
