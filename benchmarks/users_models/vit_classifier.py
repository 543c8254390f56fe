"""emla2805/vision-transformer (9e6e782): `model.VisionTransformer` as its train.py builds it (32x32
images of imagenet_resized, patches of 4, 4 layers, d_model 64, 4 heads, MLP 128, 1000 classes):
the patches come from `tf.image.extract_patches`, the MLPs use tensorflow-addons' gelu. For
batches of 1 to 64. tf.keras 2 code (`add_weight` with a positional name, the experimental
Rescaling): run with TF_USE_LEGACY_KERAS=1. tensorflow-addons 0.23 imports
`keras.src.engine.keras_tensor`, which Keras 3 no longer has: tf_keras's module stands in for it."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "vision-transformer"))

import tf_keras.src.engine  # noqa: E402
import tf_keras.src.engine.keras_tensor  # noqa: E402

sys.modules.setdefault("keras.src.engine", tf_keras.src.engine)  # for tensorflow_addons/utils/types.py
sys.modules.setdefault("keras.src.engine.keras_tensor", tf_keras.src.engine.keras_tensor)

import tensorflow as tf  # noqa: E402
from model import VisionTransformer  # noqa: E402 - after the repository is on the path

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
model = VisionTransformer(image_size=32, patch_size=4, num_layers=4, num_classes=1000, d_model=64, num_heads=4,
                          mlp_dim=128, channels=3, dropout=0.1)
model(tf.zeros([1, 32, 32, 3]), training=False)


@tfcheck.aot(dims={"batch": (1, 64)})
@tf.function(input_signature=[tf.TensorSpec([None, 32, 32, 3], tf.float32)])
def classify(images):
    return model(images, training=False)
