"""zzh8829/yolov3-tf2 (2784050): `yolov3_tf2.models.YoloV3` and `YoloV3Tiny` as its detect.py and
tools/export_tflite.py build them (80 classes, `size=416`), whole: Darknet, the heads, box decoding
(`yolo_boxes`) and `yolo_nms` (`tf.image.non_max_suppression_with_scores` with soft-NMS sigma 0.5,
padded to `yolo_max_boxes`), batch 1 as detect.py feeds it. Random weights. The flags the models
read (`yolo_max_boxes`, thresholds) keep their defaults; detect.py parses them with absl's
`app.run`, here `FLAGS.mark_as_parsed()`. yolov3_tf2/utils.py imports OpenCV for its drawing
helpers: an empty stand-in here."""

import os
import sys
import types

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "yolov3-tf2"))
sys.modules.setdefault("cv2", types.ModuleType("cv2"))

import tensorflow as tf  # noqa: E402
from absl import flags  # noqa: E402
from yolov3_tf2.models import YoloV3, YoloV3Tiny  # noqa: E402 - after the repository is on the path

import tfcheck  # noqa: E402

flags.FLAGS.mark_as_parsed()
tf.keras.utils.set_random_seed(0)
yolo = YoloV3(size=416, classes=80)
yolo_tiny = YoloV3Tiny(size=416, classes=80)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 416, 416, 3], tf.float32)])
def detect(img):
    return yolo(img, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 416, 416, 3], tf.float32)])
def detect_tiny(img):
    return yolo_tiny(img, training=False)
