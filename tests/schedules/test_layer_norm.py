"""compiler/schedules/rewrites/layer_norm.py: TFLite's layer norm, imported op by op, runs as one kernel.

The pattern is built here as `compiler/frontend/importer.py` writes it for Keras' `LayerNormalization`
(the encoder block of benchmarks/compiled/small_models.py has two): mean, squared difference,
mean, epsilon, rsqrt, scale. The last test takes it from Keras itself, through TFLite's converter
and the importer, with a gamma and a beta that are not the defaults, and compares with TensorFlow.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from tvm import relax

from tfcheck.compiler.schedules.rewrites.layer_norm import fuse_layer_norms

from .test_operators import TARGET, check, module, run

GAMMA = np.random.default_rng(2).standard_normal(32).astype(np.float32)


def imported_layer_norm(bb: relax.BlockBuilder, x: relax.Expr, axis: int = -1, exponent: float = 2.0) -> relax.Expr:
    """The importer's layer norm over ``axis`` with ``GAMMA`` and epsilon 1e-3, no beta."""
    mean = bb.emit(relax.op.mean(x, axis=[axis], keepdims=True))
    squared = bb.emit(relax.op.power(bb.emit(relax.op.subtract(x, mean)), relax.const(np.float32(exponent))))
    variance = bb.emit(relax.op.mean(squared, axis=[axis], keepdims=True))
    inverse = bb.emit(relax.op.rsqrt(bb.emit(relax.op.add(variance, relax.const(np.float32(1e-3))))))
    scale = bb.emit(relax.op.multiply(inverse, relax.const(GAMMA)))
    return relax.op.add(bb.emit(relax.op.multiply(x, scale)),
                        bb.emit(relax.op.multiply(bb.emit(relax.op.negative(mean)), scale)))


def numpy_layer_norm(x: np.ndarray) -> np.ndarray:
    centred = x - x.mean(-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(-1, keepdims=True) + 1e-3) * GAMMA


@pytest.mark.parametrize("offset", [0.0, 100.0])
def test_an_imported_layer_norm_is_one_kernel(offset: float) -> None:
    """One `layer_norm` call, scheduled by the rows rule, as accurate as the pattern far from zero."""
    mod = module([(2, 16, 32)], imported_layer_norm)
    assert fuse_layer_norms(mod)["main"].script().count("R.nn.layer_norm") == 1
    x = (np.random.default_rng(0).standard_normal((2, 16, 32)) + offset).astype(np.float32)
    actual, rules = run(mod, x, target=TARGET)
    assert rules == ["schedule_rows"]
    check(actual, numpy_layer_norm(x.astype(np.float64)))


@pytest.mark.parametrize(("axis", "exponent"), [(1, 2.0), (-1, 3.0)], ids=["another axis", "cubes"])
def test_what_is_not_a_layer_norm_over_the_last_axis_stays(axis: int, exponent: float) -> None:
    shape = (2, 32, 32)
    mod = module([shape], lambda bb, x: imported_layer_norm(bb, x, axis, exponent))
    assert "layer_norm" not in fuse_layer_norms(mod)["main"].script()


def test_statistics_of_another_tensor_are_not_a_layer_norm() -> None:
    """`y * scale + (-mean(x)) * scale` uses x's statistics on y: not a layer norm of either."""
    def emit(bb: relax.BlockBuilder, x: relax.Expr, y: relax.Expr) -> relax.Expr:
        mean = bb.emit(relax.op.mean(x, axis=[-1], keepdims=True))
        squared = bb.emit(relax.op.power(bb.emit(relax.op.subtract(x, mean)), relax.const(np.float32(2.0))))
        variance = bb.emit(relax.op.mean(squared, axis=[-1], keepdims=True))
        scale = bb.emit(relax.op.multiply(bb.emit(relax.op.rsqrt(bb.emit(relax.op.add(
            variance, relax.const(np.float32(1e-3)))))), relax.const(GAMMA)))
        return relax.op.add(bb.emit(relax.op.multiply(y, scale)),
                            bb.emit(relax.op.multiply(bb.emit(relax.op.negative(mean)), scale)))

    mod = module([(2, 16, 32), (2, 16, 32)], emit)
    assert "layer_norm" not in fuse_layer_norms(mod)["main"].script()


def through_tflite(concrete: object) -> object:
    """`concrete` frozen, converted by TFLite and imported by tfcheck's importer: the Relax module a build sees."""
    from tfcheck.compiler.frontend.importer import import_tflite
    from tfcheck.compiler.trace.bridge import freeze, to_tflite

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.tflite"
        path.write_bytes(to_tflite(freeze(concrete)))
        return import_tflite(path)


def test_keras_layer_normalization_through_tflite_matches_tensorflow() -> None:
    """With a beta, as Keras' layer has one: TFLite's converter folds it into the shift."""
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")

    layer = keras.layers.LayerNormalization(epsilon=1e-3)
    layer.build((1, 8, 48))
    rng = np.random.default_rng(3)
    layer.set_weights([rng.standard_normal(48).astype(np.float32), rng.standard_normal(48).astype(np.float32)])
    function = tf.function(lambda x: layer(x), input_signature=[tf.TensorSpec([1, 8, 48], tf.float32)])
    concrete = function.get_concrete_function()
    mod = through_tflite(concrete)
    assert fuse_layer_norms(mod)["main"].script().count("R.nn.layer_norm") == 1
    x = (rng.standard_normal((1, 8, 48)) * 3 + 5).astype(np.float32)
    actual, rules = run(mod, x, target=TARGET)
    check(actual, concrete(tf.constant(x)).numpy())
    assert "schedule_rows" in rules


def test_tf_nn_batch_normalization_over_the_last_axis_through_tflite_is_one_kernel() -> None:
    """`x * inv + (beta - mean * inv)`, inv = gamma * rsqrt(var + eps): `tf.nn.batch_normalization`
    over `tf.nn.moments` of the last axis, as params_flow's `LayerNormalization` writes it
    (kpe/bert-for-tf2's BERT: 25 in BERT base, four kernels each before)."""
    tf = pytest.importorskip("tensorflow")

    rng = np.random.default_rng(4)
    gamma, beta = (tf.constant(rng.standard_normal(48).astype(np.float32)) for _ in range(2))

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 48], tf.float32)])
    def normalise(x):
        mean, variance = tf.nn.moments(x, axes=-1, keepdims=True)
        return tf.nn.batch_normalization(x, mean, variance, offset=beta, scale=gamma, variance_epsilon=1e-12)

    concrete = normalise.get_concrete_function()
    mod = through_tflite(concrete)
    assert fuse_layer_norms(mod)["main"].script().count("R.nn.layer_norm") == 1
    x = (rng.standard_normal((1, 8, 48)) * 3 + 5).astype(np.float32)
    actual, rules = run(mod, x, target=TARGET)
    check(actual, concrete(tf.constant(x)).numpy())
    assert rules == ["schedule_rows"]
