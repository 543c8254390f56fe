"""keras-team/keras#15360 "how use "append" in tensorflow loop without python collections?".

A Keras layer's `call` (traced by Keras into a graph) appends to a Python list inside a
`for batch in tf.range(...)` loop, which AutoGraph turns into a graph loop.

`self.batch_size`, a tensor stored on the layer, is no finding: each trace sets it first and reads it
only within that trace, outside the graph loop (../shared/JUDGING.md: "the state is written and read
within the same trace only"; `tfcheck.engine.lifetime`, scratch attributes).
"""
import tensorflow as tf
from tensorflow.keras.layers import Layer


class WeightedLayer(Layer):
    def __init__(self, n_input, n_memb, **kwargs):
        super(WeightedLayer, self).__init__(**kwargs)
        self.n = n_input   # 16 features
        self.m = n_memb    # 3

    def build(self, batch_input_shape):
        super(WeightedLayer, self).build(batch_input_shape)

    def call(self, input_):
        CP = []
        self.batch_size = tf.shape(input_)[0]
        for batch in tf.range(self.batch_size):
            xd_shape = [self.m]
            c_shape = [1]
            cp = input_[batch, 0, :]
            for d in range(1, self.n):
                c_shape.insert(0, self.m)
                xd_shape.insert(0, 1)
                xd = tf.reshape(input_[batch, d, :], (xd_shape))
                c = tf.reshape(cp, (c_shape))
                cp = tf.matmul(c, xd)
            flat_cp = tf.reshape(cp, (1, self.m**self.n))
            CP.append(flat_cp)  # expect: TFC017
        c = tf.stack(CP)
        return tf.reshape(c, (self.batch_size, self.m**self.n))
