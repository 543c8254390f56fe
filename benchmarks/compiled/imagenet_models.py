"""Issue 5's ImageNet workloads: `tfcheck bench benchmarks/compiled/imagenet_models.py`.

Keras MobileNetV2 and ResNet50 at batch 1 with random weights (`weights=None`: latency does not
depend on their values, and nothing is downloaded). As in fixtures/aot/, the functions return
logits and the batch norms are calibrated: with a softmax over untrained weights every output is
about 0.001, and the build's comparison with TensorFlow would check almost nothing.
"""

import sys
from pathlib import Path

import keras
import tensorflow as tf

import tfcheck

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures" / "aot"))
from calibration import calibrate_batch_norm  # noqa: E402

keras.utils.set_random_seed(0)
mobilenet = keras.applications.MobileNetV2(weights=None, classifier_activation=None)
calibrate_batch_norm(mobilenet, (2, 224, 224, 3))
resnet = keras.applications.ResNet50(weights=None, classifier_activation=None)
calibrate_batch_norm(resnet, (2, 224, 224, 3))


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 224, 224, 3], tf.float32)])
def mobilenet_v2(images):
    return mobilenet(images, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 224, 224, 3], tf.float32)])
def resnet50(images):
    return resnet(images, training=False)
