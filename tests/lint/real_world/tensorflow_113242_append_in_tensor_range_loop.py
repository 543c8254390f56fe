"""tensorflow/tensorflow#113242 "[TF] InaccessibleTensorError when accessing tensors created inside tf.while_loop after the loop".

In `call` of a Keras model, `features = tf.shape(x)[1]` is a tensor, so `for j in range(features)`
becomes a `tf.while_loop` under AutoGraph and the tensors appended to the Python list `expanded`
belong to the loop body: `tf.concat(expanded, ...)` after it raises InaccessibleTensorError. The
first loop, over `x.shape[0]`, is a Python loop (a static size) and works. (Cut after the second
loop; the rest of `call` is cut off in the thread.)
"""
import tensorflow as tf

class TestModel(tf.keras.Model):

    def __init__(self):
        super().__init__()
        self.d1 = tf.keras.layers.Dense(32)
        self.d2 = tf.keras.layers.Dense(16)
        self.d3 = tf.keras.layers.Dense(8)

    def call(self, x):
        batch_size = x.shape[0]
        outputs = []
        for i in range(batch_size):
            processed = tf.nn.relu(self.d1(x[i:i + 1]))
            outputs.append(self.d2(processed))
        result = tf.concat(outputs, axis=0)
        features = tf.shape(x)[1]
        expanded = []
        for j in range(features):  # expect: TFC021
            expanded.append(x[:, j:j + 1] * 2.0)
        expanded_tensor = tf.concat(expanded, axis=1)
