"""A U-Net for images of any size that takes only multiples of 16 (issue 42), built, verified and
called: the form of keras-unet-collection's `unet_2d` (13e0e7e, "same" convolutions, four
poolings, nearest upsampling, skip connections concatenated), small. TensorFlow cannot run it at
the odd size the build verifies at (145: "ConcatOp : Dimension 1 in both shapes must be equal"),
so the build finds the step, verifies on it, imports the sizes as multiples of 16 (TVM could not
prove the concatenated shapes equal over a plain size) and records it; the runtime refuses other
sizes naming the step. Floor poolings ("valid", Keras' default) and ceiling ones ("same") both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

import tfcheck
from tests.compiler.test_build import build, by_function
from tests.compiler.test_symbolic_build import reference_module
from tfcheck.runtime.errors import InputError

pytestmark = pytest.mark.slow

SMALL_UNET = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)


def unet(pool_padding):
    inputs = keras.Input((None, None, 1))
    x, skips = inputs, []
    for filters in (4, 8, 8, 8):
        x = keras.layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
        skips.append(x)
        x = keras.layers.MaxPooling2D(2, padding=pool_padding)(x)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    for filters, skip in zip((8, 8, 8, 4), reversed(skips)):
        x = keras.layers.UpSampling2D(2)(x)
        x = keras.layers.Concatenate()([x, skip])
        x = keras.layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
    return keras.Model(inputs, keras.layers.Conv2D(2, 1, activation="softmax")(x))


floor_pools, ceil_pools = unet("valid"), unet("same")


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 1], tf.float32, name="image")])
def segment(image):
    return floor_pools(image, training=False)


@tfcheck.aot(dims={"image_1": (16, 100)})
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 1], tf.float32, name="image")])
def segment_bounded(image):
    return ceil_pools(image, training=False)
'''


def test_a_unet_that_takes_multiples_of_16_builds_for_them(project: Callable[..., Path],
                                                           run_cli: Callable[..., Result]) -> None:
    folder = project({"small_unet.py": SMALL_UNET})
    code, report = build(run_cli, folder, "--out", str(folder / "out"))
    assert code == 0, report
    records = by_function(report)
    segment, bounded = records["segment"], records["segment_bounded"]
    assert segment["verified"] and bounded["verified"], report
    assert segment["dims"]["image_1"] == {"min": 32, "max": None, "verified": [32, 48, 64], "step": 16}
    assert bounded["dims"]["image_1"] == {"min": 16, "max": 96, "verified": [16, 64, 96], "step": 16}
    assert ("TensorFlow cannot run the function at image_1=49, image_2=49 (InvalidArgumentError: ConcatOp : "
            "Dimension 1 in both shapes must be equal") in segment["message"]
    assert ("but runs at image_1=48, image_2=48, so the artifact takes image_1: multiples of 16, at least 32; "
            "image_2: multiples of 16, at least 32, and refuses other sizes") in segment["message"]
    assert "image_1: multiples of 16, 16 to 96; image_2: multiples of 16, at least 32" in bounded["message"]

    library, reference = tfcheck.load(folder / "out"), reference_module(folder / "small_unet.py")
    image = np.random.default_rng(4).standard_normal((1, 80, 112, 1)).astype(np.float32)
    for function, model in ((library.segment, reference.floor_pools), (library.segment_bounded, reference.ceil_pools)):
        np.testing.assert_allclose(function(image), model(image, training=False).numpy(), atol=1e-5, rtol=1e-4)
    with pytest.raises(InputError, match=r"dimension 1 \(image_1\) is 70, the artifact takes multiples of 16, "
                                         r"16 to 96 \(the nearest: 64, 80\)$"):
        library.segment_bounded(np.zeros((1, 70, 48, 1), np.float32))
    with pytest.raises(InputError, match=r"dimension 2 \(image_2\) is 50, .* \(the nearest: 48, 64\)$"):
        library.segment(np.zeros((1, 48, 50, 1), np.float32))
