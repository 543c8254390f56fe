"""hunglc007/tensorflow-yolov4-tflite (9f16748): YOLOv4-tiny as its save_model.py builds it
(`--tiny --model yolov4 --input_size 416`, the COCO classes of core/config.py): `core.yolov4.YOLO`
then `decode` per level, concatenated. `detect_for_tflite` is the `--framework tflite` export
(`decode_tflite`: boxes and class scores for every anchor); `detect` is the default `--framework tf`
one (`decode_tf`, then `filter_boxes`: a `tf.boolean_mask` of the boxes over the score threshold
0.2). Batch 1. Random weights (save_model.py loads darknet weights). tf.keras 2 code (TensorFlow
ops on Keras inputs): run with TF_USE_LEGACY_KERAS=1. core/utils.py imports OpenCV
for its drawing helpers: an empty stand-in here."""

import os
import sys
import types

ROOT = os.path.join(os.environ["TFCHECK_USER_REPOS"], "tensorflow-yolov4-tflite")
sys.path.insert(0, ROOT)
sys.modules.setdefault("cv2", types.ModuleType("cv2"))

from core.config import cfg  # noqa: E402 - after the repository is on the path

cfg.YOLO.CLASSES = os.path.join(ROOT, "data/classes/coco.names")  # config.py's is relative to the repository

import core.utils as utils  # noqa: E402 - reads the classes when imported
import tensorflow as tf  # noqa: E402
from core.yolov4 import YOLO, decode, filter_boxes  # noqa: E402

import tfcheck  # noqa: E402

FLAGS = types.SimpleNamespace(tiny=True, model="yolov4", input_size=416, score_thres=0.2)
STRIDES, ANCHORS, NUM_CLASS, XYSCALE = utils.load_config(FLAGS)
tf.keras.utils.set_random_seed(0)


def save_tf(framework):
    """save_model.py's save_tf, up to the Keras model (no weights loaded, nothing saved)."""
    input_layer = tf.keras.layers.Input([FLAGS.input_size, FLAGS.input_size, 3])
    feature_maps = YOLO(input_layer, NUM_CLASS, FLAGS.model, FLAGS.tiny)
    bbox_tensors = []
    prob_tensors = []
    for i, fm in enumerate(feature_maps):
        if i == 0:
            output_tensors = decode(fm, FLAGS.input_size // 16, NUM_CLASS, STRIDES, ANCHORS, i, XYSCALE, framework)
        else:
            output_tensors = decode(fm, FLAGS.input_size // 32, NUM_CLASS, STRIDES, ANCHORS, i, XYSCALE, framework)
        bbox_tensors.append(output_tensors[0])
        prob_tensors.append(output_tensors[1])
    pred_bbox = tf.concat(bbox_tensors, axis=1)
    pred_prob = tf.concat(prob_tensors, axis=1)
    if framework == 'tflite':
        pred = (pred_bbox, pred_prob)
    else:
        boxes, pred_conf = filter_boxes(pred_bbox, pred_prob, score_threshold=FLAGS.score_thres,
                                        input_shape=tf.constant([FLAGS.input_size, FLAGS.input_size]))
        pred = tf.concat([boxes, pred_conf], axis=-1)
    return tf.keras.Model(input_layer, pred)


model_tflite = save_tf("tflite")
model_tf = save_tf("tf")


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 416, 416, 3], tf.float32)])
def detect_for_tflite(images):
    return model_tflite(images, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 416, 416, 3], tf.float32)])
def detect(images):
    return model_tf(images, training=False)
