"""compiler/trace/unrolled_rnn.py: Keras RNN layers over an unknown batch, traced unrolled (issue 42).

The forms are the users' models' (benchmarks/users_models/): mcps5601/TimeGAN-tensorflow2's embedder
(a Masking layer, then stacked LSTMs with return_sequences, over `[None, 24, 6]`) and
faustomorales/keras-ocr's recognizer (an LSTM and one with go_backwards over the same features,
written as a Bidirectional here), each over a batch of unknown size. TensorFlow's converter
refused their TensorList loops ("loops over a tf.TensorArray ..."); traced unrolled, they convert,
build with a symbolic batch and match TensorFlow.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tfcheck.compiler.trace.bridge import freeze, to_tflite  # noqa: E402
from tfcheck.compiler.trace.unrolled_rnn import concrete_unrolled, rnn_layers_unrolled  # noqa: E402

STEPS, FEATURES = 7, 5


def timegan_embedder(kind: type) -> keras.Model:
    """TimeGAN's embedder: Masking(-1), recurrent layers with return_sequences, a sigmoid Dense."""
    return keras.Sequential([keras.Input((STEPS, FEATURES)), keras.layers.Masking(mask_value=-1.0),
                             kind(8, return_sequences=True), kind(8, return_sequences=True),
                             keras.layers.Dense(8, activation="sigmoid")])


def recognizer_rnn() -> keras.Model:
    """keras-ocr's recurrent part: both directions over the same features, the backward one's
    sequence reversed back (a Bidirectional), then a softmax over the symbols."""
    return keras.Sequential([keras.Input((STEPS, FEATURES)),
                             keras.layers.Bidirectional(keras.layers.LSTM(8, return_sequences=True)),
                             keras.layers.Dense(4, activation="softmax")])


MODELS = {
    "lstm": lambda: timegan_embedder(keras.layers.LSTM),
    "gru": lambda: timegan_embedder(keras.layers.GRU),
    "simple_rnn": lambda: keras.Sequential([keras.Input((STEPS, FEATURES)), keras.layers.SimpleRNN(8)]),
    "bidirectional": recognizer_rnn,
    "backwards_gru": lambda: keras.Sequential([keras.Input((STEPS, FEATURES)), keras.layers.Masking(mask_value=-1.0),
                                               keras.layers.GRU(8, go_backwards=True)]),
}


def any_batch(model: keras.Model, shape: tuple[int | None, ...] = (None, STEPS, FEATURES)) -> tf.types.experimental.PolymorphicFunction:
    return tf.function(lambda x: model(x, training=False), input_signature=[tf.TensorSpec(shape, tf.float32)])


def op_types(graph: tf.Graph) -> set[str]:
    """Every op of the graph and of the functions it calls (a while loop's condition and body)."""
    found = {op.type for op in graph.get_operations()}
    for function in graph._functions.values():  # noqa: SLF001 - the loop bodies live only there
        found |= {node.op for node in function.definition.node_def}
    return found


def inputs(batch: int) -> np.ndarray:
    """Random steps, the last ones of the second sequence masked (-1), as TimeGAN pads."""
    x = np.random.default_rng(batch).standard_normal((batch, STEPS, FEATURES)).astype(np.float32)
    if batch > 1:
        x[1, 4:] = -1.0
    return x


def traced_both_ways(model: keras.Model) -> tuple[tf.types.experimental.ConcreteFunction, ...]:
    """The model over any batch traced as it is and unrolled, after checking that the two agree
    to the last bit."""
    looped = any_batch(model).get_concrete_function()
    unrolled = concrete_unrolled(any_batch(model))
    for batch in (1, 3):
        np.testing.assert_array_equal(unrolled(inputs(batch)).numpy(), looped(inputs(batch)).numpy())
    return looped, unrolled


@pytest.mark.parametrize("name", sorted(MODELS))
def test_unrolled_has_no_tensor_list_and_the_same_outputs(name: str) -> None:
    looped, unrolled = traced_both_ways(MODELS[name]())
    assert any(op.startswith("TensorList") for op in op_types(looped.graph))
    assert not any(op.startswith("TensorList") or "While" in op for op in op_types(unrolled.graph))


def test_a_backward_layer_zeroing_masked_outputs_keeps_its_loop() -> None:
    """Unrolled, Keras zeroes a backward layer's masked outputs by the mask in the wrong order (the
    backward half of a Bidirectional with return_sequences over a Masking layer differed by 0.3):
    that layer keeps its loop, and the result is TensorFlow's."""
    model = keras.Sequential([keras.Input((STEPS, FEATURES)), keras.layers.Masking(mask_value=-1.0),
                              keras.layers.Bidirectional(keras.layers.GRU(8, return_sequences=True))])
    _, unrolled = traced_both_ways(model)
    assert any(op.startswith("TensorList") for op in op_types(unrolled.graph))


def test_the_layers_and_classes_are_as_they_were_after_the_trace() -> None:
    model = recognizer_rnn()
    concrete_unrolled(any_batch(model))
    bidirectional = model.layers[0]
    assert not bidirectional.forward_layer.unroll and not bidirectional.backward_layer.unroll
    assert "__call__" not in keras.layers.RNN.__dict__


def test_a_function_traced_already_is_traced_again_unrolled() -> None:
    """A module that called its tf.function at import has a looped trace cached: a clone is traced."""
    function = any_batch(MODELS["lstm"]())
    function(inputs(2))
    assert not any(op.startswith("TensorList") for op in op_types(concrete_unrolled(function).graph))


@pytest.mark.parametrize(("shape", "max_steps"), [((None, None, FEATURES), 256), ((None, STEPS, FEATURES), STEPS - 1)],
                         ids=["time unknown", "longer than the bound"])
def test_the_loop_stays_where_the_time_dimension_does_not_allow(shape: tuple[int | None, ...], max_steps: int) -> None:
    """Unknown steps cannot be unrolled, and too many would make the graph grow with them: the
    loop stays, and the conversion's message names it (`bridge._UNSIZED_TENSOR_LIST_MESSAGE`)."""
    model = keras.Sequential([keras.layers.LSTM(8)])
    with rnn_layers_unrolled(max_steps):
        concrete = any_batch(model, shape).get_concrete_function()
    assert any(op.startswith("TensorList") for op in op_types(concrete.graph))
    with pytest.raises(Exception, match="loops over a tf.TensorArray"):
        to_tflite(freeze(concrete))


def test_unrolled_converts_over_an_unknown_batch() -> None:
    """The looped function fails the conversion over an unknown batch; the unrolled one converts."""
    model = recognizer_rnn()
    with pytest.raises(Exception, match="loops over a tf.TensorArray"):
        to_tflite(freeze(any_batch(model).get_concrete_function()))
    assert to_tflite(freeze(concrete_unrolled(any_batch(model))))


# tf_keras (Keras 2, TF_USE_LEGACY_KERAS=1: keras-ocr, Mask2Former): its LSTM and GRU choose, in
# their constructor, a fused implementation that ignores `unroll`; checked in a process of its own.
LEGACY = '''
import json

import numpy as np
import tensorflow as tf
from tfcheck.compiler.trace.unrolled_rnn import concrete_unrolled

layers = tf.keras.layers
x = np.random.default_rng(0).standard_normal((3, 7, 5)).astype(np.float32)
x[1, 4:] = -1.0
found = {}
for name, masking in (("plain", []), ("masked", [layers.Masking(-1.0)])):
    model = tf.keras.Sequential([*masking, layers.Bidirectional(layers.LSTM(8, return_sequences=True)),
                                 layers.GRU(8, go_backwards=True)])
    model(tf.zeros([2, 7, 5]))
    make = lambda: tf.function(lambda x: model(x), input_signature=[tf.TensorSpec([None, 7, 5], tf.float32)])
    looped, unrolled = make().get_concrete_function(), concrete_unrolled(make())
    ops = {op.type for op in unrolled.graph.get_operations()}
    for function in unrolled.graph._functions.values():
        ops |= {node.op for node in function.definition.node_def}
    found[name] = {"tensor_lists": any(op.startswith("TensorList") for op in ops),
                   "equal": bool(np.array_equal(looped(x).numpy(), unrolled(x).numpy())),
                   "gpu_kernel": model.layers[-1]._could_use_gpu_kernel}
print(json.dumps({"keras": tf.keras.__name__, **found}))
'''


def test_tf_keras_layers_are_unrolled_too(tmp_path: Path) -> None:
    pytest.importorskip("tf_keras")
    script = tmp_path / "legacy.py"
    script.write_text(LEGACY)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True,
                          env={**os.environ, "TF_USE_LEGACY_KERAS": "1"})
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["plain"] == {"tensor_lists": False, "equal": True, "gpu_kernel": True}
    assert result["masked"] == {"tensor_lists": True, "equal": True, "gpu_kernel": True}  # the backward LSTM's loop
    assert result["keras"].startswith("tf_keras")


# keras-ocr's recognizer drops its first two steps after the LSTMs (`Lambda(lambda x:
# x[:, rnn_steps_to_discard:])`), which TensorFlow's converter wrote as a SLICE of size -1 over the
# unknown batch: TVM's converter failed on `int()` of the batch.
SIZED_SLICES = {
    "steps dropped": lambda x: tf.slice(x, [0, 2, 0], [-1, -1, -1]),
    "a window": lambda x: tf.slice(x, [0, 1, 2], [-1, 3, 2]),
    "whole": lambda x: tf.slice(x, [0, 0, 0], [-1, STEPS, FEATURES]),
}


@pytest.mark.parametrize("name", sorted(SIZED_SLICES))
def test_a_sized_slice_of_a_tensor_with_an_unknown_batch_is_tensorflows(tmp_path: Path, name: str) -> None:
    """SLICE by a constant begin and size of a tensor whose batch is symbolic
    (compiler/frontend/symbolic_import.py, `_sized_slice`): exact at batches 1 and 4."""
    import tvm
    from tvm import relax

    from tfcheck.compiler.frontend.importer import import_tflite
    from tfcheck.runtime.manifest import TensorSpec

    function = tf.function(lambda x: SIZED_SLICES[name](x * 2.0),
                           input_signature=[tf.TensorSpec([None, STEPS, FEATURES], tf.float32)])
    (tmp_path / "model.tflite").write_bytes(to_tflite(freeze(function.get_concrete_function())))
    module = import_tflite(tmp_path / "model.tflite", [TensorSpec("x", ("batch", STEPS, FEATURES), "float32")])
    machine = relax.VirtualMachine(relax.build(module, "llvm"), tvm.cpu())
    for batch in (1, 4):
        np.testing.assert_array_equal(machine["main"](tvm.runtime.tensor(inputs(batch))).numpy(),
                                      function(inputs(batch)).numpy())


# The users' forms built with `tfcheck build`, each over a batch of 1 to 6.
ANY_BATCH = '''
import keras
import tensorflow as tf

import tfcheck

keras.utils.set_random_seed(0)
embedder = keras.Sequential([keras.Input((24, 6)), keras.layers.Masking(mask_value=-1.0),
                             *[keras.layers.LSTM(12, return_sequences=True) for _ in range(2)],
                             keras.layers.Dense(12, activation="sigmoid")])
recognizer = keras.Sequential([keras.Input((12, 16)), keras.layers.Dense(16, activation="relu"),
                               keras.layers.Bidirectional(keras.layers.LSTM(16, return_sequences=True)),
                               keras.layers.Dense(5, activation="softmax")])


@tfcheck.aot(dims={"batch": (1, 6)})
@tf.function(input_signature=[tf.TensorSpec([None, 24, 6], tf.float32)])
def embed(x):
    return embedder(x)


@tfcheck.aot(dims={"batch": (1, 6)})
@tf.function(input_signature=[tf.TensorSpec([None, 12, 16], tf.float32)])
def recognize(features):
    return recognizer(features, training=False)
'''


@pytest.mark.slow
def test_rnn_layers_over_an_unknown_batch_build_symbolic(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    import tfcheck

    (tmp_path / "any_batch.py").write_text(ANY_BATCH)
    result = run_cli(tmp_path, "build", "--no-lint", "--cache-dir", str(tmp_path / "cache"), "--format", "json",
                     "--out", str(tmp_path / "out"))
    records = {record["name"]: record for record in json.loads(result.stdout)["functions"]}
    assert result.exit_code == 0, records
    for record in records.values():
        assert record["status"] == "built" and record["verified"], record
        assert record["dims"]["batch"]["min"] == 1 and record["dims"]["batch"]["max"] == 6
        assert not any(op["op"] == "WHILE" for op in record["operators"])
    library = tfcheck.load(tmp_path / "out")
    spec = importlib.util.spec_from_file_location("any_batch_reference", tmp_path / "any_batch.py")
    any_batch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(any_batch)  # the same seeded weights as the build's child
    rng = np.random.default_rng(0)
    for batch in (2, 5):
        x = rng.standard_normal((batch, 24, 6)).astype(np.float32)
        x[0, 20:] = -1.0
        features = rng.standard_normal((batch, 12, 16)).astype(np.float32)
        np.testing.assert_allclose(library.embed(x), any_batch.embed(x).numpy(), atol=1e-5, rtol=1e-4)
        np.testing.assert_allclose(library.recognize(features), any_batch.recognize(features).numpy(),
                                   atol=1e-5, rtol=1e-4)
