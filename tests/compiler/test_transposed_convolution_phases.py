"""compiler/frontend/transposed_convolution.py: a strided transposed convolution is one convolution
over its input whose output channels are its output phases (the sub-pixel decomposition).

Built from the layers of users' models as Keras converts them to TFLite: deezer/spleeter's U-Net
(`Conv2DTranspose(n, (5, 5), strides=(2, 2), padding="same")`), LynnHo/CycleGAN-Tensorflow-2's
ResNet generator (`Conv2DTranspose(dim, 3, strides=2, padding="same", use_bias=False)`), and the
coverage sweep's `Conv2DTranspose(8, 4, strides=2)` and `Conv3DTranspose(8, 3, strides=2)`: each
must compute what TensorFlow computes, with a convolution of `ceil(k / s)` (or one more) taps per
axis over the input itself (not over the input spread out by the stride, 4x the multiply-adds of
a 2-D stride of 2), its kernel computed at build time from the frozen weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import relax

tf = pytest.importorskip("tensorflow")

from tests.compiler.test_transposed_convolution import CASES, _module, _run  # noqa: E402
from tfcheck.compiler.frontend.importer import _lowerable_transposed_convolutions, import_tflite  # noqa: E402
from tfcheck.compiler.frontend.transposed_convolution import as_convolutions  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, to_tflite  # noqa: E402

# name -> (input shape, the layer, the convolution's kernel shape expected: taps..., I, phases * O)
LAYERS = {
    "spleeter 5x5, stride 2, same": ((1, 16, 32, 8), lambda: tf.keras.layers.Conv2DTranspose(
        4, (5, 5), strides=(2, 2), padding="same"), (3, 3, 8, 16)),
    "cyclegan 3x3, stride 2, same, no bias": ((1, 12, 12, 6), lambda: tf.keras.layers.Conv2DTranspose(
        5, 3, strides=2, padding="same", use_bias=False), (2, 2, 6, 20)),
    "coverage sweep 4x4, stride 2, valid": ((1, 7, 5, 3), lambda: tf.keras.layers.Conv2DTranspose(
        8, 4, strides=2), (2, 2, 3, 32)),
    "coverage sweep 3-D 3x3x3, stride 2, valid": ((1, 3, 4, 4, 4), lambda: tf.keras.layers.Conv3DTranspose(
        8, 3, strides=2), (2, 2, 2, 4, 64)),
    "strides 3 and 1, same": ((1, 5, 6, 2), lambda: tf.keras.layers.Conv2DTranspose(
        3, (4, 3), strides=(3, 1), padding="same"), (2, 3, 2, 9)),
}


def _convolutions(mod: tvm.IRModule) -> list[relax.Call]:
    """The convolution calls of `mod`'s `main`."""
    found: list[relax.Call] = []

    @relax.expr_functor.visitor
    class _Finder(relax.PyExprVisitor):
        def visit_call_(self, call: relax.Call) -> None:  # noqa: N802 - TVM's visitor name
            super().visit_call_(call)
            if isinstance(call.op, tvm.ir.Op) and call.op.name in ("relax.nn.conv2d", "relax.nn.conv3d"):
                found.append(call)

    _Finder().visit_expr(mod["main"])
    return found


@pytest.mark.parametrize("name", LAYERS)
def test_a_keras_transposed_convolution_is_one_convolution_of_its_phases(name: str, tmp_path: Path) -> None:
    shape, layer, kernel = LAYERS[name]
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input(shape[1:]), layer()])
    function = tf.function(lambda x: model(x), input_signature=[tf.TensorSpec(shape, tf.float32)])
    path = tmp_path / "model.tflite"
    path.write_bytes(to_tflite(freeze(function.get_concrete_function())))
    mod = import_tflite(path)
    (convolution,) = _convolutions(mod)
    assert isinstance(convolution.args[1], tvm.ir.expr.Constant)
    assert tuple(int(n) for n in convolution.args[1].ty.shape) == kernel
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    np.testing.assert_allclose(_run(mod, x), function(x).numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", CASES)
def test_constant_kernels_are_rearranged_at_build_time_with_the_same_result(case: str) -> None:
    """The NumPy route (frozen weights) of every form the Relax route takes."""
    data, kernel, attrs = CASES[case]
    attrs = {**attrs, "out_layout": attrs["data_layout"]}
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(data).astype("float32"), rng.standard_normal(kernel).astype("float32")
    builder = relax.BlockBuilder()
    var = relax.Var("x", relax.TensorType(data, "float32"))
    name = attrs.pop("op", "conv2d_transpose")
    with builder.function("main", [var]):
        with builder.dataflow():
            out = builder.emit_output(getattr(relax.op.nn, name)(var, relax.const(w), **attrs))
        builder.emit_func_output(out)
    mod = builder.get()
    rewritten = as_convolutions(mod)
    assert all(isinstance(call.args[1], tvm.ir.expr.Constant) for call in _convolutions(rewritten))
    expected = _run(_lowerable_transposed_convolutions(_module(data, kernel, name, **attrs)), x, w)
    np.testing.assert_allclose(_run(rewritten, x), expected, rtol=1e-5, atol=1e-5)
