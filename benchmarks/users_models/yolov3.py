"""calmiLovesAI/YOLOv3_TensorFlow2 (7789280): the YOLOv3 network as the repository defines it
(subclassed Keras layers, Darknet53, `UpSampling2D` in the feature pyramid), for batches of 1 to 8,
and with the repository's box decoding (`yolo/bounding_box.py`, what `yolo/inference.py` runs
before non-max suppression). Weights are random: what is measured is the build, not the boxes."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "YOLOv3_TensorFlow2"))

import tensorflow as tf  # noqa: E402 - after the repository is on the path
from configuration import CATEGORY_NUM  # noqa: E402
from yolo.bounding_box import bounding_box_predict  # noqa: E402
from yolo.yolo_v3 import YOLOV3  # noqa: E402

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
model = YOLOV3(out_channels=3 * (CATEGORY_NUM + 5))
model(tf.zeros([1, 416, 416, 3]), training=False)


@tfcheck.aot(dims={"batch": (1, 8)})
@tf.function(input_signature=[tf.TensorSpec([None, 416, 416, 3], tf.float32)])
def detect(images):
    return model(images, training=False)


@tfcheck.aot(dims={"batch": (1, 8)})
@tf.function(input_signature=[tf.TensorSpec([None, 416, 416, 3], tf.float32)])
def detect_boxes(images):
    decoded = [bounding_box_predict(feature, scale_type=i) for i, feature in enumerate(model(images, training=False))]
    return [tf.concat([xy, wh], axis=-1) for xy, wh, _, _ in decoded], [c * p for _, _, c, p in decoded]
