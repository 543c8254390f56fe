"""Forms from the users' models sweep (docs/build.md, "Users' models"; issue 42) whose builds failed
with a message that blamed the wrong thing, each written as its repository writes it: a float64
network (marload/DeepRL-TensorFlow2; it builds in float64 now), an integer clip of sampling indices
and an integer outer product (faustomorales/keras-ocr), and token type ids that index a two-row
table (kpe/bert-for-tf2). Each message is checked, and its advice followed until the function
builds and matches TensorFlow.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result

tf = pytest.importorskip("tensorflow")

from tests.compiler.tflite_run import run_tflite  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, to_tflite  # noqa: E402
from tfcheck.compiler.trace.integer_clips import clips_as_min_max  # noqa: E402
from tfcheck.compiler.trace.tracing import tflite_operators  # noqa: E402


def build(run_cli: Callable[..., Result], folder: Path, *args: str) -> dict[str, dict[str, Any]]:
    result = run_cli(folder, "build", "--no-lint", "--cache-dir", str(folder / "cache"), "--format", "json", *args)
    return {record["function"].rsplit(".", 1)[-1]: record for record in json.loads(result.stdout)["functions"]}


# marload/DeepRL-TensorFlow2 (PPO/PPO_Continuous.py at 876266d): the script's set_floatx('float64'),
# its Actor's and Critic's `create_model` as written (Pendulum: 3 state dimensions, 1 action bounded
# by 2.0), called as `get_action` and the update call them. Then what the refusal of a float64 model
# advises (still, for one that mixes float64 with float32): the same networks constructed after
# set_floatx('float32') (and the global policy, as layers exist), over float32 inputs.
DEEPRL_PPO = '''
import tensorflow as tf
from tensorflow.keras.layers import Input, Dense, Lambda

import tfcheck

tf.keras.backend.set_floatx('float64')
tf.keras.utils.set_random_seed(0)


class Actor:
    def __init__(self, state_dim, action_dim, action_bound, std_bound):
        self.state_dim = state_dim
        self.action_dim = action_dim
        self.action_bound = action_bound
        self.std_bound = std_bound
        self.model = self.create_model()

    def create_model(self):
        state_input = Input((self.state_dim,))
        dense_1 = Dense(32, activation='relu')(state_input)
        dense_2 = Dense(32, activation='relu')(dense_1)
        out_mu = Dense(self.action_dim, activation='tanh')(dense_2)
        mu_output = Lambda(lambda x: x * self.action_bound)(out_mu)
        std_output = Dense(self.action_dim, activation='softplus')(dense_2)
        return tf.keras.models.Model(state_input, [mu_output, std_output])


class Critic:
    def __init__(self, state_dim):
        self.state_dim = state_dim
        self.model = self.create_model()

    def create_model(self):
        return tf.keras.Sequential([
            Input((self.state_dim,)),
            Dense(32, activation='relu'),
            Dense(32, activation='relu'),
            Dense(16, activation='relu'),
            Dense(1, activation='linear')
        ])


actor = Actor(3, 1, 2.0, [1e-2, 1.0])
critic = Critic(3)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float64)])
def act(state):
    return actor.model(state, training=False)


@tfcheck.aot(dims={"batch": (1, 5)})
@tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float64)])
def value(states):
    return critic.model(states, training=False)


tf.keras.backend.set_floatx('float32')
tf.keras.mixed_precision.set_global_policy('float32')  # layers exist already (Keras 3 kept float64)
actor_float32 = Actor(3, 1, 2.0, [1e-2, 1.0])
critic_float32 = Critic(3)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32)])
def act_float32(state):
    return actor_float32.model(state, training=False)


@tfcheck.aot(dims={"batch": (1, 5)})
@tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
def value_float32(states):
    return critic_float32.model(states, training=False)
'''


@pytest.mark.slow
def test_a_float64_network_builds_in_float64_and_in_float32(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    """MatMul, BiasAdd and Relu are TFLite builtins in float32 only: the build refused the float64
    networks, first saying the ops could not be expressed at all, then naming float64 with advice to
    build them in float32. They build as they are now, computed in float64 (a float32 twin read back
    as float64, compiler/trace/float64_twin.py): within float64 rounding of TensorFlow, where float32
    arithmetic would be 1e-7 off; the advice's float32 networks build too."""
    records = build(run_cli, project({"ppo.py": DEEPRL_PPO}))
    for name in ("act", "value"):
        record = records[name]
        assert (record["status"], record["verified"]) == ("built", True), record["message"]
        assert record["inputs"][0]["dtype"] == "float64"
        assert record["max_rel_error"] < 1e-12, record["max_rel_error"]
    for name in ("act_float32", "value_float32"):
        assert (records[name]["status"], records[name]["verified"]) == ("built", True), records[name]["message"]


# faustomorales/keras-ocr (keras_ocr/recognition.py at 9661d6f): the spatial transformer's `_repeat`,
# `_meshgrid` and `_transform` as written, over the recognizer's feature map (50 x 7 x 512 in the
# model; 8 channels here) and its localisation net's 6 affine parameters, at a known batch as the
# `shapes=` of the recognizer's message has it. `max_x = width - 1` folds to 6, and
# `tf.clip_by_value(x0, zero, max_x)` on int32 became an int32 Relu6 in the converter.
KERAS_OCR_TRANSFORM = '''
import tensorflow as tf

import tfcheck


def _repeat(x, num_repeats):
    ones = tf.ones((1, num_repeats), dtype="int32")
    x = tf.reshape(x, shape=(-1, 1))
    x = tf.matmul(x, ones)
    return tf.reshape(x, [-1])


def _meshgrid(height, width):
    x_linspace = tf.linspace(-1.0, 1.0, width)
    y_linspace = tf.linspace(-1.0, 1.0, height)
    x_coordinates, y_coordinates = tf.meshgrid(x_linspace, y_linspace)
    x_coordinates = tf.reshape(x_coordinates, shape=(1, -1))
    y_coordinates = tf.reshape(y_coordinates, shape=(1, -1))
    ones = tf.ones_like(x_coordinates)
    indices_grid = tf.concat([x_coordinates, y_coordinates, ones], 0)
    return indices_grid


def _transform(inputs):
    locnet_x, locnet_y = inputs
    output_size = locnet_x.shape[1:]
    batch_size = tf.shape(locnet_x)[0]
    height = tf.shape(locnet_x)[1]
    width = tf.shape(locnet_x)[2]
    num_channels = tf.shape(locnet_x)[3]

    locnet_y = tf.reshape(locnet_y, shape=(batch_size, 2, 3))

    locnet_y = tf.reshape(locnet_y, (-1, 2, 3))
    locnet_y = tf.cast(locnet_y, "float32")

    output_height = output_size[0]
    output_width = output_size[1]
    indices_grid = _meshgrid(output_height, output_width)
    indices_grid = tf.expand_dims(indices_grid, 0)
    indices_grid = tf.reshape(indices_grid, [-1])  # flatten?
    indices_grid = tf.tile(indices_grid, tf.stack([batch_size]))
    indices_grid = tf.reshape(indices_grid, tf.stack([batch_size, 3, -1]))

    transformed_grid = tf.matmul(locnet_y, indices_grid)
    x_s = tf.slice(transformed_grid, [0, 0, 0], [-1, 1, -1])
    y_s = tf.slice(transformed_grid, [0, 1, 0], [-1, 1, -1])
    x = tf.reshape(x_s, [-1])
    y = tf.reshape(y_s, [-1])

    # Interpolate
    height_float = tf.cast(height, dtype="float32")
    width_float = tf.cast(width, dtype="float32")

    output_height = output_size[0]
    output_width = output_size[1]

    x = tf.cast(x, dtype="float32")
    y = tf.cast(y, dtype="float32")
    x = 0.5 * (x + 1.0) * width_float
    y = 0.5 * (y + 1.0) * height_float

    x0 = tf.cast(tf.floor(x), "int32")
    x1 = x0 + 1
    y0 = tf.cast(tf.floor(y), "int32")
    y1 = y0 + 1

    max_y = tf.cast(height - 1, dtype="int32")
    max_x = tf.cast(width - 1, dtype="int32")
    zero = tf.zeros([], dtype="int32")

    x0 = tf.clip_by_value(x0, zero, max_x)
    x1 = tf.clip_by_value(x1, zero, max_x)
    y0 = tf.clip_by_value(y0, zero, max_y)
    y1 = tf.clip_by_value(y1, zero, max_y)

    flat_image_dimensions = width * height
    pixels_batch = tf.range(batch_size) * flat_image_dimensions
    flat_output_dimensions = output_height * output_width
    base = _repeat(pixels_batch, flat_output_dimensions)
    base_y0 = base + y0 * width
    base_y1 = base + y1 * width
    indices_a = base_y0 + x0
    indices_b = base_y1 + x0
    indices_c = base_y0 + x1
    indices_d = base_y1 + x1

    flat_image = tf.reshape(locnet_x, shape=(-1, num_channels))
    flat_image = tf.cast(flat_image, dtype="float32")
    pixel_values_a = tf.gather(flat_image, indices_a)
    pixel_values_b = tf.gather(flat_image, indices_b)
    pixel_values_c = tf.gather(flat_image, indices_c)
    pixel_values_d = tf.gather(flat_image, indices_d)

    x0 = tf.cast(x0, "float32")
    x1 = tf.cast(x1, "float32")
    y0 = tf.cast(y0, "float32")
    y1 = tf.cast(y1, "float32")

    area_a = tf.expand_dims(((x1 - x) * (y1 - y)), 1)
    area_b = tf.expand_dims(((x1 - x) * (y - y0)), 1)
    area_c = tf.expand_dims(((x - x0) * (y1 - y)), 1)
    area_d = tf.expand_dims(((x - x0) * (y - y0)), 1)
    transformed_image = tf.add_n(
        [
            area_a * pixel_values_a,
            area_b * pixel_values_b,
            area_c * pixel_values_c,
            area_d * pixel_values_d,
        ]
    )
    # Finished interpolation

    transformed_image = tf.reshape(
        transformed_image, shape=(batch_size, output_height, output_width, num_channels)
    )
    return transformed_image


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 50, 7, 8], tf.float32), tf.TensorSpec([2, 6], tf.float32)])
def transform(features, theta):
    return _transform([features, theta])
'''


def _module(tmp_path: Path, name: str, text: str) -> Any:
    import importlib.util
    import sys

    path = tmp_path / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_keras_ocrs_integer_clips_convert_as_minimum_and_maximum_and_match_tensorflow(tmp_path: Path) -> None:
    """The converter's int32 Relu6 (no TFLite builtin) becomes MINIMUM and MAXIMUM again, and
    TFLite samples the feature map as TensorFlow does, out-of-map coordinates clipped included."""
    transform = _module(tmp_path, "keras_ocr_transform", KERAS_OCR_TRANSFORM).transform.tf_function
    flatbuffer = to_tflite(freeze(transform.get_concrete_function()))
    ops = {operator.op for operator in tflite_operators(flatbuffer)}
    assert {"MINIMUM", "MAXIMUM", "GATHER"} <= ops and "RELU6" not in ops
    rng = np.random.default_rng(0)
    features = rng.standard_normal((2, 50, 7, 8)).astype(np.float32)
    theta = (rng.standard_normal((2, 6)) * 2).astype(np.float32)  # samples far outside the map: clipped
    np.testing.assert_allclose(run_tflite(flatbuffer, features, theta), transform(features, theta).numpy(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("clip, dtype", [
    (lambda x: tf.clip_by_value(x, 0, 6), tf.int32),
    (lambda x: tf.minimum(tf.maximum(x, 0), 6), tf.int32),
    (lambda x: tf.maximum(0, tf.minimum(x, 6)), tf.int32),  # already the other way round: unchanged
    (lambda x: tf.clip_by_value(x, tf.constant(0, tf.int64), tf.constant(6, tf.int64)), tf.int64),
], ids=["clip_by_value", "minimum_of_maximum", "constant_first", "int64"])
def test_integer_clips_to_zero_and_six_convert_without_relu6(clip: Callable[[Any], Any], dtype: Any) -> None:
    function = tf.function(clip, input_signature=[tf.TensorSpec([9], dtype)])
    flatbuffer = to_tflite(freeze(function.get_concrete_function()))
    assert {operator.op for operator in tflite_operators(flatbuffer)} == {"MINIMUM", "MAXIMUM"}


def test_an_integer_relu6_left_is_refused_naming_its_dtype() -> None:
    """What no rewrite takes (tf.nn.relu6 itself on int32) is refused with the dtype and the cast."""
    from tfcheck.compiler.process.child import StepError

    function = tf.function(tf.nn.relu6, input_signature=[tf.TensorSpec([9], tf.int32)])
    with pytest.raises(StepError) as refused:
        to_tflite(freeze(function.get_concrete_function()))
    message = refused.value.message
    assert "Relu6 on int32 tensors" in message and "only for float32 tensors (RELU6)" in message, message
    assert "tf.cast(x, tf.float32)" in message, message


@pytest.mark.parametrize("product", [
    lambda x: _repeat(x, 5),  # keras-ocr's, over indices of a length known only at run time
    lambda x: tf.matmul(tf.reshape(x, (1, -1)), tf.ones((1, 4), tf.int32), transpose_a=True),
    lambda x: tf.matmul(tf.reshape(x, (-1, 1)), tf.ones((4, 1), tf.int32), transpose_b=True),
], ids=["repeat", "transpose_a", "transpose_b"])
def test_integer_outer_products_convert_as_multiplies_and_match_tensorflow(product: Callable[[Any], Any]) -> None:
    """keras-ocr's recognizer at the shapes its message offered next met "uses TensorFlow op MatMul
    on int32 tensors" (`_repeat`'s product with a row of ones): TFLite has no int32 matrix product."""
    function = tf.function(product, input_signature=[tf.TensorSpec([None], tf.int32)])
    flatbuffer = to_tflite(freeze(function.get_concrete_function()))
    assert {operator.op for operator in tflite_operators(flatbuffer)} <= {"MUL", "RESHAPE"}
    x = np.array([3, -7, 11], np.int32)
    np.testing.assert_array_equal(run_tflite(flatbuffer, x), function(x).numpy())


def _repeat(x: Any, num_repeats: int) -> Any:
    """keras_ocr/recognition.py's `_repeat`, as written."""
    ones = tf.ones((1, num_repeats), dtype="int32")
    x = tf.reshape(x, shape=(-1, 1))
    x = tf.matmul(x, ones)
    return tf.reshape(x, [-1])


def test_an_integer_product_over_a_longer_contraction_is_refused_naming_int32() -> None:
    from tfcheck.compiler.process.child import StepError

    function = tf.function(lambda x: tf.matmul(x, tf.ones((3, 2), tf.int32)),
                           input_signature=[tf.TensorSpec([None, 3], tf.int32)])
    with pytest.raises(StepError, match="uses TensorFlow op MatMul on int32 tensors"):
        to_tflite(freeze(function.get_concrete_function()))


def test_float_clips_are_left_to_the_converter() -> None:
    function = tf.function(lambda x: tf.clip_by_value(x, 0.0, 6.0), input_signature=[tf.TensorSpec([9])])
    frozen = freeze(function.get_concrete_function())
    graph_def = frozen.graph.as_graph_def()
    assert clips_as_min_max(graph_def) is graph_def
    assert [operator.op for operator in tflite_operators(to_tflite(frozen))] == ["RELU6"]


@pytest.mark.slow
def test_keras_ocrs_spatial_transformer_builds_at_known_sizes(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    """The keras-ocr recognizer's `shapes=` advice met "uses TensorFlow op Relu6" next (issue 42)."""
    record = build(run_cli, project({"keras_ocr_transform.py": KERAS_OCR_TRANSFORM}))["transform"]
    assert (record["status"], record["verified"]) == ("built", True), record["message"]


# kpe/bert-for-tf2 (bert/embeddings.py at 55f6a6f): `BertEmbeddingsLayer.call` as written for BERT
# (word, token type and position embeddings, layer norm; Keras 3's spelling of the layers and
# weights, and the position layer's `call` called directly: Keras 3 takes no int input), a token
# type vocabulary of 2 as the README's parameters, over 16 tokens for a batch of 1 to 4. The
# build's ints of 1 to 7 for the token type ids made TensorFlow fail ("indices[0,3] = 5 is not in
# [0, 2)"), and the message said to raise the batch's dims= lower bound. `shifted` reaches its
# table through arithmetic the build does not follow: the message says the values are at fault,
# and `shifted_with_values` follows its advice with the values `segment_ids - 1` takes.
BERT_EMBEDDINGS = '''
import keras
import tensorflow as tf

import tfcheck

keras.utils.set_random_seed(0)


class PositionEmbeddingLayer(keras.layers.Layer):
    def __init__(self, max_position_embeddings=512, hidden_size=32):
        super().__init__()
        self.embedding_table = self.add_weight(name="embeddings", shape=[max_position_embeddings, hidden_size])

    def call(self, inputs):
        seq_len = inputs
        full_position_embeddings = tf.slice(self.embedding_table, [0, 0], [seq_len, -1])
        return full_position_embeddings


class BertEmbeddingsLayer(keras.layers.Layer):
    def __init__(self, vocab_size=1000, token_type_vocab_size=2, hidden_size=32):
        super().__init__()
        self.word_embeddings_layer = keras.layers.Embedding(input_dim=vocab_size, output_dim=hidden_size,
                                                            name="word_embeddings")
        self.token_type_embeddings_layer = keras.layers.Embedding(input_dim=token_type_vocab_size,
                                                                  output_dim=hidden_size, name="token_type_embeddings")
        self.position_embeddings_layer = PositionEmbeddingLayer(hidden_size=hidden_size)
        self.layer_norm_layer = keras.layers.LayerNormalization(name="LayerNorm")

    def call(self, inputs):
        input_ids, token_type_ids = inputs
        embedding_output = self.word_embeddings_layer(input_ids)
        if token_type_ids is not None:
            token_type_ids = tf.cast(token_type_ids, dtype=tf.int32)
            embedding_output += self.token_type_embeddings_layer(token_type_ids)
        if self.position_embeddings_layer is not None:
            seq_len = input_ids.shape.as_list()[1]
            emb_size = embedding_output.shape[-1]
            pos_embeddings = self.position_embeddings_layer.call(seq_len)  # Keras 3 takes no int input
            broadcast_shape = [1] * (embedding_output.shape.ndims - 2) + [seq_len, emb_size]
            embedding_output += tf.reshape(pos_embeddings, broadcast_shape)
        return self.layer_norm_layer(embedding_output)


embeddings = BertEmbeddingsLayer()


@tfcheck.aot(dims={"batch": (1, 4)})
@tf.function(input_signature=[tf.TensorSpec([None, 16], tf.int32), tf.TensorSpec([None, 16], tf.int32)])
def encode(input_ids, token_type_ids):
    return embeddings([input_ids, token_type_ids])


@tfcheck.aot(dims={"batch": (1, 4)})
@tf.function(input_signature=[tf.TensorSpec([None, 16], tf.int32), tf.TensorSpec([None, 16], tf.int32)])
def shifted(input_ids, segment_ids):
    return embeddings([input_ids, segment_ids - 1])


@tfcheck.aot(dims={"batch": (1, 4)}, values={"segment_ids": (1, 3)})
@tf.function(input_signature=[tf.TensorSpec([None, 16], tf.int32), tf.TensorSpec([None, 16], tf.int32)])
def shifted_with_values(input_ids, segment_ids):
    return embeddings([input_ids, segment_ids - 1])


@tfcheck.aot(shapes=[((2, 16), (2, 16))])
@tf.function(input_signature=[tf.TensorSpec([None, 16], tf.int32), tf.TensorSpec([None, 16], tf.int32)])
def shifted_static(input_ids, segment_ids):
    return embeddings([input_ids, segment_ids - 1])
'''


def test_ids_get_values_from_the_tables_they_index(tmp_path: Path) -> None:
    """Token type ids index 2 rows, word ids 1000, through Keras' cast and negative-id select;
    ids that reach the table through arithmetic keep the default values."""
    from tfcheck.compiler.trace.bridge import index_tables

    module = _module(tmp_path, "bert_embeddings", BERT_EMBEDDINGS)
    assert index_tables(module.encode.tf_function.get_concrete_function(), 2) == [1000, 2]
    assert index_tables(module.shifted.tf_function.get_concrete_function(), 2) == [1000, None]


def test_an_index_out_of_range_is_reported_as_the_values_fault() -> None:
    from tfcheck.compiler.trace.tracing import values_failure
    from tfcheck.runtime.manifest import TensorSpec

    inputs = [TensorSpec("input_ids", ("batch", 16), "int32"), TensorSpec("segment_ids", ("batch", 16), "int32")]
    error = "InvalidArgumentError: indices[0,3] = 5 is not in [0, 2)"
    message = values_failure("m.shifted", error, inputs, [(0, 1000), None])
    assert message is not None and "the values are at fault, not the sizes" in message
    assert "input_ids in [0, 1000)" in message and "from 1 to 7 otherwise (segment_ids)" in message
    assert message.endswith('@tfcheck.aot(values={"segment_ids": (0, 2)})')
    assert values_failure("m.f", "InvalidArgumentError: Incompatible shapes: [2] vs. [3]", inputs, None) is None


@pytest.mark.slow
def test_bert_embeddings_build_over_valid_ids_and_the_values_advice_builds(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    folder = project({"bert_embeddings.py": BERT_EMBEDDINGS})
    records = build(run_cli, folder, "--out", str(folder / "out"))
    for name in ("encode", "shifted_with_values"):
        assert (records[name]["status"], records[name]["verified"]) == ("built", True), records[name]["message"]
    manifest = json.loads((folder / "out" / "encode" / "manifest.json").read_text())
    assert manifest["input_values"] == [[0, 1000], [0, 2]]
    for name in ("shifted", "shifted_static"):
        message = records[name]["message"]
        assert records[name]["status"] == "failed", message
        assert "the values are at fault, not the sizes" in message and "dims= lower bound" not in message, message
        assert '@tfcheck.aot(values={"segment_ids": (0, 2)})' in message, message
    # tfcheck bench draws the same values: TensorFlow runs, and the artifact matches it
    bench = json.loads(run_cli(folder, "bench", str(folder / "out" / "encode"), "--backends", "tf.function,tvm",
                               "--seconds", "0.2", "--min-runs", "2", "--format", "json").stdout)
    measurements = {m["backend"]: m for m in bench[0]["measurements"]}
    assert not measurements["tf.function"].get("error") and measurements["tvm"]["max_abs_diff"] < 1e-4, bench
