"""Batch norm after a convolution or dense layer, with the weights as inputs: the compile child folds
it into the weights (`compiler/frontend/channel_fold.py`), as TensorFlow's converter does for frozen weights,
so both routes build the same kernels; and it folds nothing it cannot fold exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
tvm = pytest.importorskip("tvm")

from tvm import relax, tirx  # noqa: E402

from tfcheck.compiler.frontend.importer import import_variant  # noqa: E402
from tfcheck.compiler.schedules import apply_default_schedules, compile_cpu  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, lift_weights, to_tflite, weight_values  # noqa: E402
from tfcheck.compiler.process.weights_file import WEIGHTS_FILE, save_weights  # noqa: E402

from ..isa import host_target  # noqa: E402

TARGET = host_target()  # under benchmarks/avx2_only/run.py, the AVX2 build an AVX2 host makes
pytestmark = pytest.mark.slow  # each test compiles one or two small models


def _variant(concrete: Any, folder: Path, lifted: bool) -> Any:
    """The Relax module the compile child imports for `concrete`, weights frozen or as inputs."""
    folder.mkdir()
    if not lifted:
        (folder / "model.tflite").write_bytes(to_tflite(freeze(concrete)))
        return import_variant(folder)
    weights = lift_weights(concrete)
    (folder / "model.tflite").write_bytes(to_tflite(weights.function))
    return import_variant(folder, weights=save_weights(weight_values(weights), folder / WEIGHTS_FILE))


def _ops(mod: Any) -> list[str]:
    """The Relax operators `main` calls, in order."""
    return [str(binding.value.op.name) for block in mod["main"].body.blocks for binding in block.bindings
            if isinstance(binding.value, relax.Call) and isinstance(binding.value.op, tvm.ir.Op)]


def _kernels(scheduled: Any) -> list[str]:
    return sorted(gvar.name_hint for gvar, func in scheduled.functions_items() if isinstance(func, tirx.PrimFunc))


def _run(mod: Any, x: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The module built as `tfcheck build` builds it: its output for `x`, and its kernels."""
    scheduled = apply_default_schedules(mod, TARGET)
    vm = relax.VirtualMachine(compile_cpu(scheduled, TARGET), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy(), _kernels(scheduled)


def _normalised(model: Any) -> Any:
    """`model` with batch-norm statistics and scales far from the identity, so a lost or misplaced
    step shows in the outputs."""
    rng = np.random.default_rng(3)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            size = layer.gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 2.0, size).astype("float32"), rng.standard_normal(size).astype("float32"),
                               rng.standard_normal(size).astype("float32"), rng.uniform(0.5, 2.0, size).astype("float32")])
    return model


def _concrete(function: Any, shape: list[int]) -> Any:
    return tf.function(function, input_signature=[tf.TensorSpec(shape, tf.float32)]).get_concrete_function()


def test_lifted_batch_norm_builds_the_frozen_routes_kernels(tmp_path: Path) -> None:
    """Conv2D, DepthwiseConv2D and Dense, each followed by batch norm: with the weights as inputs,
    no multiply is left after the binding, the kernels are the frozen route's, and the outputs
    match TensorFlow's."""
    keras.utils.set_random_seed(0)
    model = _normalised(keras.Sequential([
        keras.Input((8, 8, 4)),
        keras.layers.Conv2D(8, 3, padding="same", use_bias=False), keras.layers.BatchNormalization(), keras.layers.ReLU(),
        keras.layers.DepthwiseConv2D(3, padding="same"), keras.layers.BatchNormalization(), keras.layers.ReLU(),
        keras.layers.Flatten(), keras.layers.Dense(4), keras.layers.BatchNormalization(),
    ]))
    concrete = _concrete(lambda x: model(x, training=False), [1, 8, 8, 4])
    x = np.random.default_rng(1).standard_normal([1, 8, 8, 4]).astype("float32")
    expected = concrete(tf.constant(x)).numpy()
    lifted = _variant(concrete, tmp_path / "lifted", lifted=True)
    assert "relax.multiply" not in _ops(lifted)
    assert _ops(lifted).count("relax.add") == 3  # one bias per layer
    lifted_out, lifted_kernels = _run(lifted, x)
    frozen_out, frozen_kernels = _run(_variant(concrete, tmp_path / "frozen", lifted=False), x)
    assert lifted_kernels == frozen_kernels
    np.testing.assert_allclose(lifted_out, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(frozen_out, expected, rtol=1e-4, atol=1e-4)


class Scaled(tf.Module):
    """`conv2d(x, w) * scale + shift`, then `relu`; `reuse` also adds the unscaled convolution to
    the result, so the convolution's output has a second user."""

    def __init__(self, scale_shape: list[int], reuse: bool = False) -> None:
        rng = np.random.default_rng(2)
        self.w = tf.Variable(rng.standard_normal([3, 3, 4, 6]).astype("float32"))
        self.scale = tf.Variable(rng.uniform(0.5, 2.0, scale_shape).astype("float32"))
        self.shift = tf.Variable(rng.standard_normal([6]).astype("float32"))
        self.reuse = reuse

    def __call__(self, x: Any) -> Any:
        y = tf.nn.conv2d(x, self.w, 1, "SAME")
        z = tf.nn.relu(y * self.scale + self.shift)
        return z + y if self.reuse else z


@pytest.mark.parametrize(("scale_shape", "reuse", "folds"), [
    ([6], False, True),  # per output channel: folded
    ([], False, True),  # one scale for every channel: folded
    ([8, 8, 6], False, False),  # varies over the image: not a per-channel scale
    ([6], True, False),  # the convolution's output is used again: folding would run it twice
], ids=["per-channel", "scalar", "spatial", "second-user"])
def test_only_exact_single_use_per_channel_chains_fold(tmp_path: Path, scale_shape: list[int], reuse: bool,
                                                       folds: bool) -> None:
    module = Scaled(scale_shape, reuse)
    concrete = _concrete(module.__call__, [1, 8, 8, 4])
    lifted = _variant(concrete, tmp_path / "lifted", lifted=True)
    assert ("relax.multiply" not in _ops(lifted)) is folds
    assert _ops(lifted).count("relax.nn.conv2d") == 1
    x = np.random.default_rng(1).standard_normal([1, 8, 8, 4]).astype("float32")
    np.testing.assert_allclose(_run(lifted, x)[0], concrete(tf.constant(x)).numpy(), rtol=1e-4, atol=1e-4)
