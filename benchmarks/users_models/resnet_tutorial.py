"""calmisential/TensorFlow2.0_ResNet (6136d57): the tutorial's subclassed ResNet-50
(`models.resnet.resnet_50`: `ResNetTypeII` of bottleneck blocks made by `make_bottleneck_layer`,
NUM_CLASSES=5 from its config.py) as train.py's `get_model` builds it (`model.build(input_shape=(None,
224, 224, 3))`), and its prediction step (`model(images, training=False)`) for batches of 1 to 8
(config.BATCH_SIZE). Random weights."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "TensorFlow2.0_ResNet"))

import config  # noqa: E402 - after the repository is on the path
import tensorflow as tf  # noqa: E402
from models.resnet import resnet_50  # noqa: E402

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
model = resnet_50()
model.build(input_shape=(None, config.image_height, config.image_width, config.channels))


@tfcheck.aot(dims={"batch": (1, config.BATCH_SIZE)})
@tf.function(input_signature=[tf.TensorSpec([None, config.image_height, config.image_width, config.channels],
                                            tf.float32)])
def predict(images):
    return model(images, training=False)
