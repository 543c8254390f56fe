"""yingkaisha/keras-unet-collection (13e0e7e): two of its U-Nets as its user guide
(examples/user_guide_models.ipynb) builds them, for images of any size (`(None, None, 3)`):
`unet_2d` (GELU, batch norm, max pooling, nearest upsampling, softmax over 2 labels) as it is,
at any size from 32 to 256 pixels a side, and `att_unet_2d` (attention gates, strided
convolutions, bilinear upsampling) at the 128x128 its COCO example trains on. The model code is
tf.keras and Keras 3 alike; it runs on Keras 3 here."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["TFCHECK_USER_REPOS"], "keras-unet-collection"))

import tensorflow as tf  # noqa: E402 - after the repository is on the path
from keras_unet_collection import models  # noqa: E402

import tfcheck  # noqa: E402

tf.keras.utils.set_random_seed(0)
unet = models.unet_2d((None, None, 3), [64, 128, 256, 512, 1024], n_labels=2,
                      stack_num_down=2, stack_num_up=1,
                      activation='GELU', output_activation='Softmax',
                      batch_norm=True, pool='max', unpool='nearest', name='unet')
attention_unet = models.att_unet_2d((None, None, 3), [64, 128, 256, 512], n_labels=1,
                                    stack_num_down=2, stack_num_up=2,
                                    activation='ReLU', atten_activation='ReLU', attention='add', output_activation=None,
                                    batch_norm=True, pool=False, unpool='bilinear', name='attunet')


@tfcheck.aot(dims={"images_1": (32, 256), "images_2": (32, 256)})
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32)])
def segment(images):
    return unet(images, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 128, 128, 3], tf.float32)])
def segment_attention_128(images):
    return attention_unet(images, training=False)
