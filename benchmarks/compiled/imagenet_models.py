"""Issue 5's ImageNet workloads: `tfcheck bench benchmarks/compiled/imagenet_models.py`.

Keras MobileNetV2 and ResNet50 at batch 1 with random weights (`weights=None`: latency does not
depend on their values, and nothing is downloaded).
"""

import keras
import tensorflow as tf

import tfcheck

keras.utils.set_random_seed(0)
mobilenet = keras.applications.MobileNetV2(weights=None)
resnet = keras.applications.ResNet50(weights=None)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 224, 224, 3], tf.float32)])
def mobilenet_v2(images):
    return mobilenet(images, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 224, 224, 3], tf.float32)])
def resnet50(images):
    return resnet(images, training=False)
