"""tensorflow/tensorflow#57756 "Problem with @tf.function decoration: tensor out of scope".

A tf.function method stores TensorArrays built during the trace on `self`; a later call (and the
reporter's `ghat[j] = ghat[j] + ghat_update[j]`) then reads tensors of a graph that is out of scope.
The thread's method goes on after these lines; trimmed to the stores.
"""
import tensorflow as tf


class Outer(tf.keras.Model):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.mem = None
        self.loss_mem = None

    def loss(self, x):
        return 2*x-1

    @tf.function
    def gradient(self, x):
        self.mem = tf.TensorArray(tf.float32, size=10)  # expect: TFC009
        self.loss_mem = tf.TensorArray(tf.float32, size=10)  # expect: TFC009
        for i in tf.range(10):
            out_i = self.model.call(x)
            loss_i = self.loss(out_i)
            self.mem = self.mem.write(i, out_i)  # expect: TFC009
