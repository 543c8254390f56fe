"""calmiLovesAI/Basic_CNNs_TensorFlow2#13 "[DenseBlock] ValueError: tf.function-decorated function tried to create variables on non-first call."

The reporter quotes the repository's `DenseBlock._make_layer`, which constructs a `BottleNeck` layer
(two convolutions, two batch normalisations) on every call of the block, from `call`: under `fit` (and
any tf.function) each trace makes new weights, which raises on the second trace. `call` around it is
the repository's (models/densenet.py at 59d5cdb); `self.features_list` is filled and cleared within
each trace, so it is no finding. The fix, in the `_ok` file, builds the bottlenecks in `__init__`.
"""
import tensorflow as tf


class BottleNeck(tf.keras.layers.Layer):
    def __init__(self, growth_rate, drop_rate):
        super(BottleNeck, self).__init__()
        self.bn1 = tf.keras.layers.BatchNormalization()
        self.conv1 = tf.keras.layers.Conv2D(filters=4 * growth_rate, kernel_size=(1, 1), strides=1, padding="same")
        self.bn2 = tf.keras.layers.BatchNormalization()
        self.conv2 = tf.keras.layers.Conv2D(filters=growth_rate, kernel_size=(3, 3), strides=1, padding="same")
        self.dropout = tf.keras.layers.Dropout(rate=drop_rate)

    def call(self, inputs, training=None, **kwargs):
        x = self.bn1(inputs, training=training)
        x = tf.nn.relu(x)
        x = self.conv1(x)
        x = self.bn2(x, training=training)
        x = tf.nn.relu(x)
        x = self.conv2(x)
        x = self.dropout(x, training=training)
        return x


class DenseBlock(tf.keras.layers.Layer):
    def __init__(self, num_layers, growth_rate, drop_rate):
        super(DenseBlock, self).__init__()
        self.num_layers = num_layers
        self.growth_rate = growth_rate
        self.drop_rate = drop_rate
        self.features_list = []

    def _make_layer(self, x, training):
        y = BottleNeck(growth_rate=self.growth_rate, drop_rate=self.drop_rate)(x, training=training)  # expect: TFC004
        self.features_list.append(y)
        y = tf.concat(self.features_list, axis=-1)
        return y

    def call(self, inputs, training=None, **kwargs):
        self.features_list.append(inputs)
        x = inputs
        for i in range(self.num_layers):
            x = self._make_layer(x, training=training)
        self.features_list.clear()
        return x
