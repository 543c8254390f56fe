"""compiler/trace/image_patches.py: `tf.image.extract_patches` converted to TFLite as builtins, and built.

The conversion cases convert a function with one `tf.image.extract_patches` the way `tfcheck build`
does (`freeze`, `to_tflite`), run the flatbuffer in TFLite's interpreter and compare with
TensorFlow's own result, which both routes (blocks, identity-kernel convolution) give exactly. The
build test builds a vision transformer's patch embedding as its authors wrote it, over an unknown
batch, and an overlapping form, and calls the artifacts against TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

tf = pytest.importorskip("tensorflow")

import tfcheck  # noqa: E402
from tests.compiler.test_build import build, by_function  # noqa: E402
from tests.compiler.test_symbolic_build import reference_module  # noqa: E402
from tests.compiler.tflite_run import run_tflite  # noqa: E402
from tfcheck.compiler.process.child import StepError  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, to_tflite  # noqa: E402
from tfcheck.compiler.trace.image_patches import patches_as_builtins  # noqa: E402

# (input signature, sizes, strides, rates, padding, dtype): odd sizes, 'SAME' padding split unevenly,
# rates as dilations, unknown height and width (the convolution's route), integer blocks with a crop.
CASES = {
    "blocks": ([None, 8, 8, 3], (4, 4), (4, 4), (1, 1), "VALID", tf.float32),
    "blocks_cropped_int": ([None, 10, 9, 3], (4, 4), (4, 4), (1, 1), "VALID", tf.int32),
    "overlapping_same": ([None, 9, 11, 3], (3, 2), (2, 3), (1, 1), "SAME", tf.float32),
    "dilated_same": ([None, 10, 10, 2], (3, 3), (2, 2), (2, 1), "SAME", tf.float32),
    "any_size_valid": ([2, None, None, 2], (3, 3), (1, 2), (2, 2), "VALID", tf.float32),
}


def _patches(spec: list[int | None], sizes: tuple[int, int], strides: tuple[int, int], rates: tuple[int, int],
             padding: str, dtype: tf.DType) -> tf.types.experimental.PolymorphicFunction:
    return tf.function(lambda x: tf.image.extract_patches(x, [1, *sizes, 1], [1, *strides, 1], [1, *rates, 1], padding),
                       input_signature=[tf.TensorSpec(spec, dtype)])


@pytest.mark.parametrize("name", sorted(CASES))
def test_converted_patches_are_tensorflows(name: str) -> None:
    spec, *form, dtype = CASES[name]
    function = _patches(spec, *form, dtype)
    shape = [2 if size is None else size for size in spec[:1]] + [13 if size is None else size for size in spec[1:]]
    x = (np.random.default_rng(0).standard_normal(shape) * 10).astype(dtype.as_numpy_dtype)
    got, expected = run_tflite(to_tflite(freeze(function.get_concrete_function())), x), function(x).numpy()
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_only_the_patches_node_changes_and_consumers_keep_their_input() -> None:
    function = tf.function(lambda x: tf.image.extract_patches(x, [1, 2, 2, 1], [1, 2, 2, 1], [1, 1, 1, 1], "VALID") + 1.0,
                           input_signature=[tf.TensorSpec([None, 4, 4, 3])])
    graph = freeze(function.get_concrete_function()).graph
    before = graph.as_graph_def()
    after = patches_as_builtins(before, graph)
    ops = {node.name: node.op for node in after.node}
    (patches,) = [node.name for node in before.node if node.op == "ExtractImagePatches"]
    assert ops[patches] == "Reshape" and "ExtractImagePatches" not in ops.values()
    assert sorted(op for op in ops.values() if op in ("Reshape", "Transpose")) == ["Reshape", "Reshape", "Transpose"]
    unchanged = {node.name: node for node in before.node if node.name != patches}
    assert all(node == unchanged[node.name] for node in after.node if node.name in unchanged)


@pytest.mark.parametrize("spec, dtype", [([1, 9, 9, None], tf.float32), ([1, 9, 9, 3], tf.int32)],
                         ids=["unknown_channels", "overlapping_integers"])
def test_forms_the_rewrite_cannot_take_are_named_with_what_it_takes(spec: list[int | None], dtype: tf.DType) -> None:
    frozen = freeze(_patches(spec, (3, 3), (2, 2), (1, 1), "VALID", dtype).get_concrete_function())
    graph_def = frozen.graph.as_graph_def()
    assert patches_as_builtins(graph_def, frozen.graph) is graph_def
    with pytest.raises(StepError, match="ExtractImagePatches") as raised:
        to_tflite(frozen)
    assert "give the channels a size in the input_signature" in raised.value.message
    assert "tf.image.extract_patches(tf.cast(images, tf.float32), ...)" in raised.value.message


# emla2805/vision-transformer (model.py at 9e6e782): VisionTransformer's patch embedding as its authors
# wrote it (`extract_patches`, then the start of `call`), with train.py's defaults (32x32 images,
# patches of 4, d_model 64) and Keras 3's spelling of `add_weight` and `Rescaling`. An overlapping,
# dilated form; an integer one the rewrite refuses, and the same with the cast its message advises.
VISION_TRANSFORMER = '''
import keras
import tensorflow as tf
import tfcheck
from keras.layers import Dense, Rescaling

keras.utils.set_random_seed(0)


class PatchEmbedding(keras.layers.Layer):
    def __init__(self, image_size, patch_size, d_model, channels=3):
        super().__init__()
        num_patches = (image_size // patch_size) ** 2
        self.patch_dim = channels * patch_size ** 2
        self.patch_size = patch_size
        self.d_model = d_model
        self.rescale = Rescaling(1.0 / 255)
        self.pos_emb = self.add_weight(name="pos_emb", shape=(1, num_patches + 1, d_model))
        self.class_emb = self.add_weight(name="class_emb", shape=(1, 1, d_model))
        self.patch_proj = Dense(d_model)

    def extract_patches(self, images):
        batch_size = tf.shape(images)[0]
        patches = tf.image.extract_patches(
            images=images,
            sizes=[1, self.patch_size, self.patch_size, 1],
            strides=[1, self.patch_size, self.patch_size, 1],
            rates=[1, 1, 1, 1],
            padding="VALID",
        )
        patches = tf.reshape(patches, [batch_size, -1, self.patch_dim])
        return patches

    def call(self, x):
        batch_size = tf.shape(x)[0]
        x = self.rescale(x)
        patches = self.extract_patches(x)
        x = self.patch_proj(patches)
        class_emb = tf.broadcast_to(self.class_emb, [batch_size, 1, self.d_model])
        x = tf.concat([class_emb, x], axis=1)
        return x + self.pos_emb


embed = PatchEmbedding(image_size=32, patch_size=4, d_model=64)
project = Dense(16)


@tfcheck.aot(dims={"batch": (1, 8)})
@tf.function(input_signature=[tf.TensorSpec([None, 32, 32, 3], tf.float32, name="images")])
def embed_patches(images):
    return embed(images)


@tfcheck.aot(dims={"batch": (1, 8)})
@tf.function(input_signature=[tf.TensorSpec([None, 15, 15, 3], tf.float32, name="images")])
def overlapping_patches(images):
    patches = tf.image.extract_patches(images, sizes=[1, 3, 3, 1], strides=[1, 2, 2, 1], rates=[1, 2, 2, 1],
                                       padding="SAME")
    return project(patches)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 15, 15, 3], tf.int32, name="labels")])
def integer_patches(labels):
    return tf.image.extract_patches(labels, sizes=[1, 3, 3, 1], strides=[1, 2, 2, 1], rates=[1, 1, 1, 1],
                                    padding="SAME")


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 15, 15, 3], tf.int32, name="labels")])
def integer_patches_cast(labels):
    return tf.image.extract_patches(tf.cast(labels, tf.float32), sizes=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                                    rates=[1, 1, 1, 1], padding="SAME")
'''


@pytest.mark.slow
def test_a_vision_transformers_patch_embedding_builds_and_matches_tensorflow(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    folder = project({"vit.py": VISION_TRANSFORMER})
    code, report = build(run_cli, folder, "--out", str(folder / "out"))
    assert code == 1, report
    records = by_function(report)
    refused = records.pop("integer_patches")
    assert refused["status"] == "failed" and "uses TensorFlow op ExtractImagePatches" in refused["message"]
    assert "tf.image.extract_patches(tf.cast(images, tf.float32), ...)" in refused["message"]
    for name, record in records.items():
        assert record["status"] == "built" and record["verified"], (name, record["message"])
    assert records["embed_patches"]["dims"]["batch"]["verified"] == [1, 5, 8]

    reference, library, rng = reference_module(folder / "vit.py"), tfcheck.load(folder / "out"), np.random.default_rng(4)
    for batch in (2, 7):
        images = (rng.random((batch, 32, 32, 3)) * 255).astype(np.float32)
        embedded = library.embed_patches(images)
        assert embedded.shape == (batch, 65, 64)
        np.testing.assert_allclose(embedded, reference.embed_patches(images).numpy(), atol=1e-5, rtol=1e-5)
        small = rng.standard_normal((batch, 15, 15, 3)).astype(np.float32)
        np.testing.assert_allclose(library.overlapping_patches(small), reference.overlapping_patches(small).numpy(),
                                   atol=1e-5, rtol=1e-5)
