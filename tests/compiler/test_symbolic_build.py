"""One artifact for unknown dimensions (issue 16), built, verified and called at several sizes
through `tfcheck.load`, against TensorFlow; bounds enforced; the per-shape fallback when an
operator takes no symbolic size, with the operator named (without shape entries:
test_build.py's FAILURES)."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

import tfcheck
from tfcheck.runtime.errors import InputError
from tests.compiler.test_build import build, by_function

FIXTURE = Path(__file__).parents[2] / "fixtures" / "aot" / "symbolic.py"

FALLBACKS = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)
gru = keras.layers.GRU(8, return_sequences=True)


@tfcheck.aot(dims={"batch": (1, 8)}, shapes=[(2, 4), (3, 4)])
@tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
def clipped(x):
    return x[:, :tf.shape(x)[0]]  # min(batch, 4) columns: the clipping decides the result's size


@tfcheck.aot(dims={"batch": (1, 8), "x_1": (1, 8)}, shapes=[(2, 5, 3)])
@tf.function(input_signature=[tf.TensorSpec([None, None, 3], tf.float32, name="x")])
def recurrent(x):
    return gru(x)  # steps of unknown number: a loop, whose TensorList of [batch, 8] items TensorFlow's converter refuses


@tfcheck.aot(dims={"batch": (1, 8), "x_1": (1, 8)})
@tf.function(input_signature=[tf.TensorSpec([None, None, 3], tf.float32, name="x")])
def recurrent_without_entries(x):
    return gru(x)

'''

# Forms from users' models that failed the symbolic import before (benchmarks/users_models/):
# Keras `UpSampling2D` on an unknown batch (YOLOv3_TensorFlow2's feature pyramid: `tf.repeat`, an
# EXPAND_DIMS), `tf.expand_dims` at a negative axis (Transformer-With-TensorFlow2's attention mask),
# zeros sized from the batch (`tf.zeros([tf.shape(x)[0], n])`: a STRIDED_SLICE to a scalar, a PACK
# and a FILL, as an RNN's first state is made), a slice of a tensor with an unknown dimension
# (`mask[:, :3]`), YOLOv3's anchors tiled to 8112 rows (a TILE of a constant, too big for the
# converter to fold), and AdaIN's decoder on an image of unknown height and width (reflection
# padding, a resize to twice the input's size, the channels reversed; Keras 3's `UpSampling2D`),
# 'SAME' convolutions at stride 2 over such an image (MobileNetV2's first layer: the padding
# depends on the size's parity) and 'SAME' max and average poolings at stride 2 (on negative values,
# where a zero padding would win the max, and counted in the mean, a mistake shows), and attention over a sequence of unknown length (Keras 3's `Dense` on a rank-3 input reshapes to
# the product of the leading sizes: REDUCE_PROD; the second matmul reduces over the length).
USERS_FORMS = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)
upsample = keras.Sequential([keras.layers.Conv2D(4, 1), keras.layers.UpSampling2D(2)])
ANCHORS = tf.constant([[116.0, 90.0], [156.0, 198.0], [373.0, 326.0]]) / 416.0
repeat_twice = keras.layers.UpSampling2D(2)


@tfcheck.aot(dims={"batch": (1, 9)})
@tf.function(input_signature=[tf.TensorSpec([None, 6, 6, 3], tf.float32, name="image"),
                              tf.TensorSpec([None, 7], tf.float32, name="mask")])
def users_forms(image, mask):
    state = tf.zeros([tf.shape(mask)[0], 3]) + tf.fill(tf.shape(mask[:, :3]), 0.5)
    return upsample(image, training=False), tf.expand_dims(mask, axis=-2) * 2.0, state


@tfcheck.aot(dims={"batch": (1, 3)})
@tf.function(input_signature=[tf.TensorSpec([None, 8112, 2], tf.float32, name="sizes")])
def scaled_anchors(sizes):
    return tf.exp(sizes) * tf.tile(ANCHORS, [52 * 52, 1])


@tfcheck.aot(dims={"image_1": (5, 12), "image_2": (5, 12)})
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32, name="image")])
def stretched(image):
    padded = tf.pad(image[..., ::-1], [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
    return tf.image.resize(padded, tf.shape(padded)[1:3] * 2, method="nearest"), repeat_twice(padded)


stem = keras.Sequential([keras.layers.Conv2D(4, 3, strides=2, padding="same"),
                         keras.layers.DepthwiseConv2D(3, strides=2, padding="same", activation="relu6"),
                         keras.layers.Conv2D(4, 3, padding="same")])
project = keras.layers.Dense(8)
project(tf.zeros([1, 2, 6]))


@tfcheck.aot(dims={"picture_1": (5, 12), "picture_2": (5, 12)})
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32, name="picture")])
def strided(picture):
    return stem(picture)


pools = keras.Sequential([keras.layers.MaxPooling2D(3, strides=2, padding="same"),
                         keras.layers.AveragePooling2D(3, strides=2, padding="same")])


@tfcheck.aot(dims={"photo_1": (5, 12), "photo_2": (5, 12)})
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32, name="photo")])
def pooled(photo):
    return pools(photo - 1.0)


@tfcheck.aot(dims={"tokens_1": (3, 20)})
@tf.function(input_signature=[tf.TensorSpec([1, None, 6], tf.float32, name="tokens")])
def attend(tokens):
    keys = project(tokens)
    weights = tf.nn.softmax(tf.matmul(keys, keys, transpose_b=True))
    return tf.matmul(weights, keys)

'''

# Transposed convolutions over unknown sizes (issue 42): TFLite's TRANSPOSE_CONV takes its output
# shape as a tensor, which Keras' Conv2DTranspose packs from `tf.shape(x)[0]` and its static height,
# width and channels, or `h * stride` over an image of unknown size. A U-Net's decoder step (keras.io's
# "Image segmentation with a U-Net-like architecture"; the original U-Net's 2x2 up-convolution)
# concatenates its output with the skip connection. A kernel smaller than its stride needs output
# padding (TVM's converter passed none). An output size that is not a multiple of the stride
# (`tf.nn.conv2d_transpose` to `2h - 1`) has a 'SAME' padding that depends on the size: refused,
# named, and its shape entries built instead.
TRANSPOSED = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)
up = keras.layers.Conv2DTranspose(8, 3, strides=2, padding="same")
narrow = keras.layers.Conv2DTranspose(4, 1, strides=2)
KERNEL = tf.random.stateless_normal([3, 3, 4, 3], seed=[3, 4])

inputs = keras.Input((16, 16, 3))
skip = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
down = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(keras.layers.MaxPooling2D(2)(skip))
upped = keras.layers.Conv2DTranspose(8, 2, strides=2, padding="same")(down)
decoded = keras.layers.Conv2D(2, 3, padding="same")(keras.layers.concatenate([upped, skip]))
unet = keras.Model(inputs, decoded)


@tfcheck.aot(dims={"batch": (1, 8)})
@tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32, name="image")])
def upsample(image):
    return up(image)


@tfcheck.aot(dims={"batch": (1, 8)})
@tf.function(input_signature=[tf.TensorSpec([None, 16, 16, 3], tf.float32, name="image")])
def decode(image):
    return unet(image, training=False)


@tfcheck.aot(dims={"image_1": (4, 16), "image_2": (4, 16)})
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32, name="image")])
def upsample_any_size(image):
    return up(image), narrow(image)


@tfcheck.aot(dims={"image_1": (4, 16), "image_2": (4, 16)}, shapes=[(1, 8, 8, 3)])
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 3], tf.float32, name="image")])
def upsample_to_odd_sizes(image):
    size = tf.shape(image)[1:3] * 2 - 1
    return tf.nn.conv2d_transpose(image, KERNEL, tf.stack([1, size[0], size[1], 4]), strides=2, padding="SAME")

'''

# fixtures/aot/symbolic.py's MLP alone, its batch bounded so that the build verifies at 1, 9 and 17.
MLP = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)
model = keras.Sequential([
    keras.Input((128,)),
    keras.layers.Dense(256, activation="relu"),
    keras.layers.Dense(10, activation="softmax"),
])


@tfcheck.aot(dims={"batch": (1, 17)})
@tf.function(input_signature=[tf.TensorSpec([None, 128], tf.float32, name="x")])
def any_batch_mlp(x):
    return model(x, training=False)

'''


def reference_module(path: Path):  # noqa: ANN202 - the fixture module, imported as the build's child imports it
    spec = importlib.util.spec_from_file_location("symbolic_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_one_artifact_takes_any_batch_and_length(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    shutil.copy(FIXTURE, tmp_path / "symbolic.py")
    code, report = build(run_cli, tmp_path, "--out", str(tmp_path / "out"))
    assert code == 0, report
    records = by_function(report)
    assert len(report["functions"]) == 2
    assert records["any_batch_mlp"]["dims"] == {"batch": {"min": 1, "max": 64, "verified": [1, 33, 64], "step": 1}}
    assert records["classify_tokens"]["dims"]["tokens_1"] == {"min": 1, "max": 48, "verified": [1, 25, 48], "step": 1}
    assert all(record["verified"] for record in records.values())

    reference = reference_module(tmp_path / "symbolic.py")
    library = tfcheck.load(tmp_path / "out")
    rng = np.random.default_rng(1)
    for batch in (1, 6, 64):
        x = rng.standard_normal((batch, 128)).astype(np.float32)
        np.testing.assert_allclose(library.any_batch_mlp(x), reference.any_batch_mlp(x).numpy(), atol=1e-5, rtol=1e-4)
    for batch, length in ((1, 3), (7, 1), (2, 48)):
        tokens = rng.integers(0, 1000, (batch, length)).astype(np.int32)
        np.testing.assert_allclose(library.classify_tokens(tokens), reference.classify_tokens(tokens).numpy(),
                                   atol=1e-4, rtol=1e-3)
    with pytest.raises(InputError, match=r"dimension 0 \(batch\) is 65, the artifact takes 1 to 64"):
        library.any_batch_mlp(np.zeros((65, 128), np.float32))
    with pytest.raises(InputError, match=r"dimension 1 \(tokens_1\) is 49, the artifact takes 1 to 48"):
        library.classify_tokens(np.zeros((2, 49), np.int32))


@pytest.mark.slow
def test_an_operator_without_symbolic_sizes_falls_back_to_the_shape_entries(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    """Whether the importer (a slice whose bound it cannot prove inside the axis) or TensorFlow's
    converter (a GRU's TensorList, over steps of unknown number: over a known number the GRU is
    unrolled, tests/compiler/test_unrolled_rnn.py) refuses the unknown sizes, the shape entries are
    built instead, and the message says why."""
    folder = project({"fallbacks.py": FALLBACKS})
    code, report = build(run_cli, folder)
    assert code == 1, report  # recurrent_without_entries: nothing to fall back to
    clipped = [record for record in report["functions"] if record["function"] == "fallbacks.clipped"]
    assert [record["status"] for record in clipped] == ["built", "built"]
    assert [record["inputs"][0]["shape"] for record in clipped] == [[2, 4], [3, 4]]
    assert all("no symbolic artifact" in record["message"] and "TFLite operator STRIDED_SLICE" in record["message"]
               and "built one artifact per shape entry instead" in record["message"] for record in clipped)
    [recurrent] = [record for record in report["functions"] if record["function"] == "fallbacks.recurrent"]
    assert recurrent["status"] == "built" and recurrent["verified"] and recurrent["inputs"][0]["shape"] == [2, 5, 3]
    assert "no symbolic artifact" in recurrent["message"] and "loops over a tf.TensorArray" in recurrent["message"]
    assert "Keras RNN layer" in recurrent["message"] and "built one artifact per shape entry instead" in recurrent["message"]
    [alone] = [record for record in report["functions"] if record["function"] == "fallbacks.recurrent_without_entries"]
    assert alone["status"] == "failed" and "loops over a tf.TensorArray" in alone["message"]
    assert "list the concrete shapes: @tfcheck.aot(shapes=[(1, 1, 3), (8, 8, 3)])" in alone["message"]
    assert "a Keras RNN layer over a known number of time steps (up to 256) is traced unrolled" in alone["message"]


@pytest.mark.slow
def test_forms_from_users_models_build_with_unknown_dimensions(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    (tmp_path / "forms.py").write_text(USERS_FORMS)
    code, report = build(run_cli, tmp_path, "--out", str(tmp_path / "out"))
    assert code == 0, report
    records = by_function(report)
    assert records["users_forms"]["dims"] == {"batch": {"min": 1, "max": 9, "verified": [1, 5, 9], "step": 1}}
    assert records["stretched"]["dims"]["image_2"] == {"min": 5, "max": 12, "verified": [5, 9, 12], "step": 1}
    assert records["strided"]["dims"]["picture_1"]["verified"] == [5, 9, 12]  # odd and even
    assert records["pooled"]["dims"]["photo_2"]["verified"] == [5, 9, 12]
    assert all(record["verified"] for record in records.values())
    reference, library = reference_module(tmp_path / "forms.py"), tfcheck.load(tmp_path / "out")
    rng = np.random.default_rng(2)
    image, mask = rng.standard_normal((4, 6, 6, 3)).astype(np.float32), rng.standard_normal((4, 7)).astype(np.float32)
    sizes, picture = rng.standard_normal((2, 8112, 2)).astype(np.float32), rng.random((1, 7, 10, 3)).astype(np.float32)
    tokens = rng.standard_normal((1, 13, 6)).astype(np.float32)
    calls = [("users_forms", (image, mask), [(4, 12, 12, 4), (4, 1, 7), (4, 3)]),
             ("scaled_anchors", (sizes,), [(2, 8112, 2)]), ("stretched", (picture,), [(1, 18, 24, 3), (1, 18, 24, 3)]),
             ("attend", (tokens,), [(1, 13, 8)]), ("strided", (picture,), [(1, 2, 3, 4)]),
             ("pooled", (picture,), [(1, 2, 3, 3)])]
    for name, arguments, shapes in calls:
        got, expected = getattr(library, name)(*arguments), getattr(reference, name)(*arguments)
        got, expected = (got, expected) if isinstance(expected, tuple) else ((got,), (expected,))
        assert [g.shape for g in got] == shapes, name
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e.numpy(), atol=1e-5, rtol=1e-4)


@pytest.mark.slow
def test_transposed_convolutions_build_over_unknown_sizes(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    (tmp_path / "transposed.py").write_text(TRANSPOSED)
    code, report = build(run_cli, tmp_path, "--out", str(tmp_path / "out"))
    assert code == 0, report
    records = by_function(report)
    for name in ("upsample", "decode"):
        assert records[name]["verified"] and records[name]["dims"]["batch"]["verified"] == [1, 5, 8], records[name]
    assert records["upsample_any_size"]["verified"], records["upsample_any_size"]["message"]
    assert records["upsample_any_size"]["dims"]["image_1"]["verified"] == [4, 11, 16]  # odd and even
    per_shape = records["upsample_to_odd_sizes"]
    assert per_shape["verified"] and per_shape["inputs"][0]["shape"] == [1, 8, 8, 3]
    assert "no symbolic artifact (transposed.upsample_to_odd_sizes: TVM cannot import TFLite operator TRANSPOSE_CONV" \
        in per_shape["message"]
    assert "is not a multiple of its stride 2: its 'SAME' padding would depend on the size" in per_shape["message"]
    reference, library = reference_module(tmp_path / "transposed.py"), tfcheck.load(tmp_path / "out")
    rng = np.random.default_rng(5)
    for batch, height, width in ((2, 5, 7), (7, 12, 9)):
        image, picture = (rng.standard_normal((batch, size, size, 3)).astype(np.float32) for size in (8, 16))
        np.testing.assert_allclose(library.upsample(image), reference.up(image).numpy(), atol=1e-5, rtol=1e-4)
        np.testing.assert_allclose(library.decode(picture), reference.unet(picture, training=False).numpy(),
                                   atol=1e-5, rtol=1e-4)
        one = rng.standard_normal((1, height, width, 3)).astype(np.float32)
        for got, expected in zip(library.upsample_any_size(one), (reference.up(one), reference.narrow(one))):
            np.testing.assert_allclose(got, expected.numpy(), atol=1e-5, rtol=1e-4)


@pytest.mark.slow
def test_a_symbolic_mlp_is_exact_at_every_batch_around_its_register_tile(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    """The contraction rule tiles a symbolic batch 8 rows at a time: full tiles without bound
    checks, the last partial tile row by row (compiler/schedules/lowering/unswitch.py). Each batch size
    around the tile matches TensorFlow, and every row comes out bit for bit as when computed alone."""
    folder = project({"dense.py": MLP})
    code, report = build(run_cli, folder, "--out", str(folder / "out"))
    assert code == 0, report
    [record] = report["functions"]
    assert record["verified"] is True
    assert record["dims"]["batch"]["min"] == 1 and record["dims"]["batch"]["max"] == 17
    reference = reference_module(folder / "dense.py")
    library = tfcheck.load(folder / "out")
    x = np.random.default_rng(2).standard_normal((17, 128)).astype(np.float32)
    alone = np.concatenate([library.any_batch_mlp(x[row:row + 1]) for row in range(17)])
    for batch in (1, 7, 8, 9, 17):
        out = library.any_batch_mlp(x[:batch])
        np.testing.assert_allclose(out, reference.model(x[:batch], training=False).numpy(), atol=1e-6, rtol=1e-5)
        np.testing.assert_array_equal(out, alone[:batch])


SLICES = {
    "columns": lambda x: x[:, :3],
    "channels_reversed": lambda x: x[..., ::-1],
    "one_column": lambda x: x[:, 2] + x[:, -1],
    "every_other_column": lambda x: x[:, 1::2] - x[:, -3:],
    "neighbours": lambda x: x[:, :-1] * x[:, 1:],
    "backwards_by_two": lambda x: x[:, 5:1:-2],
    "rows_from_the_second": lambda x: x[1:, 2:5],
    "every_other_row": lambda x: x[::2, 1:],
    "rows_reversed": lambda x: x[::-1, 2],
    "first_three_rows": lambda x: x[:3],
    "last_two_rows": lambda x: x[-2:, :2],
}

# New axes (tf.newaxis is None) in a tensor of two unknown sizes, which TensorFlow's converter
# leaves a STRIDED_SLICE with a new-axis mask (with one, it makes a RESHAPE): `scores[:, tf.newaxis]`
# over attention scores of a sequence of unknown length. TVM's converter calls int() on the shape.
NEW_AXES = {
    "after_the_first": lambda x: x[:, None],
    "first": lambda x: x[None] * 2.0,
    "after_a_slice": lambda x: x[1:, None],
    "after_a_reversal": lambda x: x[::-1, None],
    "first_and_a_row": lambda x: x[None, 0],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLICES))
def test_a_slice_of_a_tensor_with_an_unknown_batch_is_tensorflows(tmp_path: Path, name: str) -> None:
    """STRIDED_SLICE of a tensor whose batch is symbolic (compiler/frontend/symbolic_import.py, `_sliced`):
    exact against TensorFlow at batches 1, 4 and 5, where `x[:3]` and `x[-2:]` are clipped."""
    import tensorflow as tf
    import tvm
    from tvm import relax

    from tfcheck.compiler.frontend.importer import import_tflite
    from tfcheck.compiler.trace.bridge import freeze, to_tflite
    from tfcheck.runtime.manifest import TensorSpec

    function = tf.function(SLICES[name], input_signature=[tf.TensorSpec([None, 7], tf.float32, name="x")])
    (tmp_path / "model.tflite").write_bytes(to_tflite(freeze(function.get_concrete_function())))
    module = import_tflite(tmp_path / "model.tflite", [TensorSpec("x", ("batch", 7), "float32")])
    machine = relax.VirtualMachine(relax.build(module, "llvm"), tvm.cpu())
    for batch in (1, 4, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 7)).astype(np.float32)
        np.testing.assert_array_equal(machine["main"](tvm.runtime.tensor(x)).numpy(), function(x).numpy())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NEW_AXES))
def test_new_axes_in_a_tensor_of_unknown_sizes_are_tensorflows(tmp_path: Path, name: str) -> None:
    """`_sliced` inserts the new axes after the slice, at 1 to 4 rows and columns."""
    import tensorflow as tf
    import tvm
    from tvm import relax

    from tfcheck.compiler.frontend.importer import import_tflite
    from tfcheck.compiler.trace.bridge import freeze, to_tflite
    from tfcheck.runtime.manifest import TensorSpec

    function = tf.function(NEW_AXES[name], input_signature=[tf.TensorSpec([None, None], tf.float32, name="x")])
    (tmp_path / "model.tflite").write_bytes(to_tflite(freeze(function.get_concrete_function())))
    module = import_tflite(tmp_path / "model.tflite", [TensorSpec("x", ("rows", "columns"), "float32")])
    machine = relax.VirtualMachine(relax.build(module, "llvm"), tvm.cpu())
    for shape in ((1, 1), (4, 2), (3, 4)):
        x = np.random.default_rng(shape[0]).standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(machine["main"](tvm.runtime.tensor(x)).numpy(), function(x).numpy())


# Functions for images or sequences of any size that cannot run at size 1 (issue 42): a stack of
# valid convolutions (a U-Net's: 5 rows at least, any width), the same with the user's own
# smallest height too small, a reshape that takes only multiples of 5 (no size tried runs), one that
# takes only even sizes (the probe's 32 runs, the odd size verified does not: built on a step of 2)
# and its sizes listed, and a function that cannot be traced without its size.
ANY_SIZE = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)
tall = keras.Sequential([keras.layers.Conv2D(4, (3, 1), activation="relu"), keras.layers.Conv2D(1, (3, 1))])


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 1], tf.float32, name="image")])
def segment(image):
    return tall(image, training=False)


@tfcheck.aot(dims={"image_1": (2, 16)})
@tf.function(input_signature=[tf.TensorSpec([1, None, None, 1], tf.float32, name="image")])
def bounded(image):
    return tall(image, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, None], tf.float32, name="x")])
def fives(x):
    return tf.reshape(x, [1, 5, -1]) * 2.0


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, None], tf.float32, name="x")])
def pairs(x):
    return tf.reduce_sum(tf.reshape(x, [1, -1, 2]), axis=2)


@tfcheck.aot(shapes=[(1, 32), (1, 64)])
@tf.function(input_signature=[tf.TensorSpec([1, None], tf.float32, name="x")])
def pairs_listed(x):
    return tf.reduce_sum(tf.reshape(x, [1, -1, 2]), axis=2)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, None], tf.float32, name="x")])
def padded(x):
    return tf.concat([x, tf.zeros([1, x.shape[1]])], axis=0)

'''


@pytest.mark.slow
def test_any_size_inputs_are_probed_at_sizes_the_function_runs_at(tmp_path: Path,
                                                                  run_cli: Callable[..., Result]) -> None:
    (tmp_path / "any_size.py").write_text(ANY_SIZE)
    code, report = build(run_cli, tmp_path, "--out", str(tmp_path / "out"))
    assert code == 1, report
    records = by_function(report)
    segment = records["segment"]
    assert segment["status"] == "built" and segment["verified"], segment
    assert segment["dims"]["image_1"] == {"min": 32, "max": None, "verified": [32, 49, 64], "step": 1}
    assert segment["dims"]["image_2"]["min"] == 1
    assert segment["message"].startswith(
        "any_size.segment: image_1: TensorFlow cannot run the function with it at image_1=1 (InvalidArgumentError: "
        "Computed output size would be negative")
    assert segment["message"].endswith('To choose the smallest size yourself: @tfcheck.aot(dims={"image_1": (32, None)})')
    library, reference = tfcheck.load(tmp_path / "out"), reference_module(tmp_path / "any_size.py")
    image = np.random.default_rng(3).standard_normal((1, 40, 7, 1)).astype(np.float32)
    np.testing.assert_allclose(library.segment(image), reference.segment(image).numpy(), atol=1e-5, rtol=1e-4)
    with pytest.raises(InputError, match=r"dimension 1 \(image_1\) is 16"):
        library.segment(np.zeros((1, 16, 7, 1), np.float32))

    failed = {name: record["message"] for name, record in records.items() if record["status"] == "failed"}
    assert set(failed) == {"bounded", "fives", "padded"}
    assert failed["bounded"].startswith(
        "any_size.bounded: TensorFlow cannot run any_size.bounded at image_1=2 (its dims= lower bound) with image_2 "
        "at any of 1, 32, 64, 128, 224: InvalidArgumentError: Computed output size would be negative")
    assert "raise the dims= lower bound of image_1 if it is too small" in failed["bounded"]
    assert failed["fives"].startswith(
        "any_size.fives: TensorFlow cannot run any_size.fives with x_1 at any of 1, 32, 64, 128, 224: "
        "InvalidArgumentError: ")
    assert 'bound x_1 to sizes the function takes, @tfcheck.aot(dims={"x_1": (MIN, MAX)})' in failed["fives"]
    pairs = records["pairs"]  # even sizes only: built on a step of 2 (docs/build.md, "Unknown dimensions")
    assert pairs["verified"] and pairs["dims"]["x_1"] == {"min": 32, "max": None, "verified": [32, 50, 64], "step": 2}
    assert pairs["message"].startswith(
        "any_size.pairs: x_1: TensorFlow cannot run the function with it at x_1=1 (InvalidArgumentError: ")
    assert ("TensorFlow cannot run the function at x_1=49 (InvalidArgumentError: Input to reshape is a tensor with "
            "49 values") in pairs["message"] and "the artifact takes x_1: multiples of 2, at least 32" in pairs["message"]
    assert [record["status"] for record in report["functions"] if record["function"] == "any_size.pairs_listed"] \
        == ["built", "built"]  # the sizes listed, as the message says
    assert failed["padded"].startswith(
        "any_size.padded: tracing any_size.padded for inputs x: float32[1, x_1] (x_1 of unknown size) failed: "
        "TypeError: Expected int32, but got None")
    assert "to build one artifact per size instead, list the concrete shapes: @tfcheck.aot(shapes=[(1, 1), (1, 8)])" \
        in failed["padded"]
