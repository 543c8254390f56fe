"""faustomorales/keras-ocr (9661d6f): the CRNN text recognizer as `keras_ocr.recognition.Recognizer`
builds it (`build_model` with DEFAULT_BUILD_PARAMS: 31x200 grey crops, seven convolutions, the
spatial transformer of bilinear sampling written in TensorFlow ops, two bidirectional LSTM pairs,
a softmax over 37 symbols), without its downloaded weights (`weights=None`): `recognize_probabilities`
is `Recognizer.model`, `recognize` is `Recognizer.prediction_model` (the same with Keras' CTC greedy
decoding), what `Recognizer.recognize` calls, for batches of 1 to 16. The package's __init__
imports its detector, data generation and evaluation (OpenCV, imgaug, efficientnet, shapely ...),
which the recognizer does not use: the package is entered without its __init__, and the imports
of recognition.py's helper module `tools` (image I/O) are empty stand-ins. tf.keras 2 code: run
with TF_USE_LEGACY_KERAS=1."""

import os
import sys
import types

ROOT = os.path.join(os.environ["TFCHECK_USER_REPOS"], "keras-ocr")
for _name in ("cv2", "imgaug", "imgaug.augmenters", "imgaug.augmenters.meta", "validators", "shapely",
              "shapely.geometry"):
    sys.modules.setdefault(_name, types.ModuleType(_name))
sys.modules["shapely"].geometry = sys.modules["shapely.geometry"]
sys.modules["imgaug"].augmenters = sys.modules["imgaug.augmenters"]
sys.modules["imgaug.augmenters"].meta = sys.modules["imgaug.augmenters.meta"]
sys.modules["imgaug.augmenters.meta"].Augmenter = object  # an annotation of tools.augment
_package = types.ModuleType("keras_ocr")
_package.__path__ = [os.path.join(ROOT, "keras_ocr")]
sys.modules.setdefault("keras_ocr", _package)

import tensorflow as tf  # noqa: E402
from keras_ocr import recognition  # noqa: E402 - after the stand-ins

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
recognizer = recognition.Recognizer(alphabet=recognition.DEFAULT_ALPHABET, weights=None)


@tfcheck.aot(dims={"batch": (1, 16)})
@tf.function(input_signature=[tf.TensorSpec([None, 31, 200, 1], tf.float32)])
def recognize_probabilities(images):
    return recognizer.model(images, training=False)


@tfcheck.aot(dims={"batch": (1, 16)})
@tf.function(input_signature=[tf.TensorSpec([None, 31, 200, 1], tf.float32)])
def recognize(images):
    return recognizer.prediction_model(images, training=False)
