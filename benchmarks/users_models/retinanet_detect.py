"""srihari-humbarwadi/retinanet-tensorflow2.x (0df3de0): RetinaNet as the repository's
`ModelBuilder` builds it from its own config (configs/v3-8/mscoco-retinanet-resnet50-640x640-30x-64.json:
ResNet50, FPN, heads), with the post-processing stage its export.py adds: levels fused, boxes
decoded (`detect_decoded`), then the top 5000 per class (`detect`; `tf.nn.top_k(..., sorted=False)`).
NMS is left out. The repository is tf.keras 2 code: run with TF_USE_LEGACY_KERAS=1 (tf_keras).
pycocotools serves its evaluation only, and is stubbed here."""

import os
import sys
import types

ROOT = os.path.join(os.environ["TFCHECK_USER_REPOS"], "retinanet-tensorflow2.x")
sys.path.insert(0, ROOT)
for _name in ("pycocotools", "pycocotools.coco", "pycocotools.cocoeval", "pycocotools.mask"):
    sys.modules.setdefault(_name, types.ModuleType(_name))
sys.modules["pycocotools.coco"].COCO = sys.modules["pycocotools.cocoeval"].COCOeval = object

import tensorflow as tf  # noqa: E402 - after the repository is on the path
from retinanet.cfg import Config  # noqa: E402
from retinanet.model import ModelBuilder  # noqa: E402
from retinanet.model.layers import FilterTopKDetections, FuseDetections, TransformBoxesAndScores  # noqa: E402

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
params = Config(os.path.join(ROOT, "configs/v3-8/mscoco-retinanet-resnet50-640x640-30x-64.json")).params
params.architecture.backbone.checkpoint = ""
params.inference.batch_size = 1
network = ModelBuilder(params, run_mode="export")()
levels = (params.architecture.feature_fusion.min_level, params.architecture.feature_fusion.max_level)
decoded = TransformBoxesAndScores(params=params)(FuseDetections(*levels)(network.output))
decoded_model = tf.keras.Model(inputs=[network.input], outputs=decoded)
filtered = FilterTopKDetections(top_k=params.inference.pre_nms_top_k,
                                filter_per_class=params.inference.filter_per_class)(decoded)
model = tf.keras.Model(inputs=[network.input], outputs=filtered)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 640, 640, 3], tf.float32)])
def detect_decoded(image):
    return decoded_model(image, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 640, 640, 3], tf.float32)])
def detect(image):
    return model(image, training=False)
