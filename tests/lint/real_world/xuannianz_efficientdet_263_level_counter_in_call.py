"""xuannianz/EfficientDet#263 "incorrect increment of self.level".

The box head is one Keras model shared by the five feature levels; its `call` picks the batch norm of
the level it is called for with a Python counter, `self.level`, and counts it up. TF1 built the graph
once; under TF2 `fit` traces the model again (and Keras traces it to build it), the counter goes past
the last level and `self.bns[i][self.level]` raises IndexError while tracing, as the reporter's
traceback shows. Found by issue 36's corpus run (xuannianz/EfficientDet 030fb7e model.py:355),
judged right by a reader who did not write the rule. (Code as in the repository, cut down.)
"""
import tensorflow as tf
from tensorflow.keras import layers, models


class BoxNet(models.Model):
    def __init__(self, width, depth, num_anchors=9, **kwargs):
        super(BoxNet, self).__init__(**kwargs)
        self.depth = depth
        self.convs = [layers.Conv2D(filters=width, kernel_size=3, padding='same') for i in range(depth)]
        self.head = layers.Conv2D(filters=num_anchors * 4, kernel_size=3, padding='same')
        self.bns = [[layers.BatchNormalization() for j in range(3, 8)] for i in range(depth)]
        self.relu = layers.Lambda(lambda x: tf.nn.swish(x))
        self.reshape = layers.Reshape((-1, 4))
        self.level = 0

    def call(self, inputs, **kwargs):
        feature, level = inputs
        for i in range(self.depth):
            feature = self.convs[i](feature)
            feature = self.bns[i][self.level](feature)
            feature = self.relu(feature)
        outputs = self.head(feature)
        outputs = self.reshape(outputs)
        self.level += 1  # expect: TFC002
        return outputs
