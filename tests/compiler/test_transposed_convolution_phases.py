"""compiler/frontend/transposed_convolution.py: a strided transposed convolution is one convolution
over its input per output phase, interleaved (the sub-pixel decomposition).

Built from the layers of users' models as Keras converts them to TFLite: deezer/spleeter's U-Net
(`Conv2DTranspose(n, (5, 5), strides=(2, 2), padding="same")`), LynnHo/CycleGAN-Tensorflow-2's
ResNet generator (`Conv2DTranspose(dim, 3, strides=2, padding="same", use_bias=False)`), and the
coverage sweep's `Conv2DTranspose(8, 4, strides=2)` and `Conv3DTranspose(8, 3, strides=2)`: each
must compute what TensorFlow computes, with one convolution per output phase over the input itself
whose taps are only those that reach that phase (not a convolution over the input spread out by
the stride: 4x the multiply-adds at a 2-D stride of 2), its kernel computed at build time from the
frozen weights.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import relax

tf = pytest.importorskip("tensorflow")

from tests.compiler.test_transposed_convolution import CASES, _module, _run  # noqa: E402
from tfcheck.compiler.frontend.importer import _lowerable_transposed_convolutions, import_tflite  # noqa: E402
from tfcheck.compiler.frontend import transposed_convolution  # noqa: E402
from tfcheck.compiler.frontend.transposed_convolution import as_convolutions, has_transposed_convolutions  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, to_tflite  # noqa: E402

# name -> (input shape, the layer)
LAYERS = {
    "spleeter 5x5, stride 2, same": ((1, 16, 32, 8), lambda: tf.keras.layers.Conv2DTranspose(
        4, (5, 5), strides=(2, 2), padding="same")),
    "cyclegan 3x3, stride 2, same, no bias": ((1, 12, 12, 6), lambda: tf.keras.layers.Conv2DTranspose(
        5, 3, strides=2, padding="same", use_bias=False)),
    "coverage sweep 4x4, stride 2, valid": ((1, 7, 5, 3), lambda: tf.keras.layers.Conv2DTranspose(8, 4, strides=2)),
    "coverage sweep 3-D 3x3x3, stride 2, valid": ((1, 3, 4, 4, 4), lambda: tf.keras.layers.Conv3DTranspose(
        8, 3, strides=2)),
    "strides 3 and 1, same": ((1, 5, 6, 2), lambda: tf.keras.layers.Conv2DTranspose(
        3, (4, 3), strides=(3, 1), padding="same")),
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


# How the phases become convolutions: `NARROW` decides by the output channels; both ways for each case.
GROUPINGS = {"phases apart": 0, "phases joined": 1 << 30}


@pytest.mark.parametrize("grouping", GROUPINGS)
@pytest.mark.parametrize("name", LAYERS)
def test_a_keras_transposed_convolution_is_convolutions_of_its_phases(name: str, grouping: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Apart: one convolution per output phase (s*s in 2-D), whose taps together are the kernel's
    (no multiply-add by a zero). Joined (a narrow output): one convolution, the phases' outputs
    its channels. Either way over the input's own channels and sizes, and TensorFlow's result."""
    monkeypatch.setattr(transposed_convolution, "NARROW", GROUPINGS[grouping])
    shape, make = LAYERS[name]
    tf.keras.utils.set_random_seed(0)
    layer = make()
    model = tf.keras.Sequential([tf.keras.Input(shape[1:]), layer])
    function = tf.function(lambda x: model(x), input_signature=[tf.TensorSpec(shape, tf.float32)])
    path = tmp_path / "model.tflite"
    path.write_bytes(to_tflite(freeze(function.get_concrete_function())))
    mod = import_tflite(path)
    convolutions = _convolutions(mod)
    kernels = [tuple(int(n) for n in call.args[1].ty.shape) for call in convolutions]
    phases = math.prod(layer.strides)
    if grouping == "phases apart":
        assert len(kernels) == phases and {kernel[-2:] for kernel in kernels} == {(shape[-1], layer.filters)}
        assert sum(math.prod(kernel[:-2]) for kernel in kernels) == math.prod(layer.kernel_size)
    else:
        assert [kernel[-2:] for kernel in kernels] == [(shape[-1], phases * layer.filters)]
    assert all(isinstance(call.args[1], tvm.ir.expr.Constant) for call in convolutions)
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    np.testing.assert_allclose(_run(mod, x), function(x).numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("grouping", GROUPINGS)
@pytest.mark.parametrize("frozen", [True, False], ids=["frozen weights", "weights as inputs"])
@pytest.mark.parametrize("case", CASES)
def test_every_form_computes_tvms_result(case: str, frozen: bool, grouping: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Each form of test_transposed_convolution.py (dilation, output padding, crops, 3-D), its
    kernel cut at build time (frozen) or by Relax ops (weights as inputs), phases apart or joined."""
    monkeypatch.setattr(transposed_convolution, "NARROW", GROUPINGS[grouping])
    data, kernel, attrs = CASES[case]
    attrs = {**attrs, "out_layout": attrs["data_layout"]}
    name = attrs.pop("op", "conv2d_transpose")
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(data).astype("float32"), rng.standard_normal(kernel).astype("float32")
    mod = _module(data, kernel, name, **attrs)
    expected = _run(_lowerable_transposed_convolutions(mod), x, w)
    if frozen:
        builder = relax.BlockBuilder()
        var = relax.Var("x", relax.TensorType(data, "float32"))
        with builder.function("main", [var]):
            with builder.dataflow():
                out = builder.emit_output(getattr(relax.op.nn, name)(var, relax.const(w), **attrs))
            builder.emit_func_output(out)
        rewritten = as_convolutions(builder.get())
        assert all(isinstance(call.args[1], tvm.ir.expr.Constant) for call in _convolutions(rewritten))
        np.testing.assert_allclose(_run(rewritten, x), expected, rtol=1e-5, atol=1e-5)
    else:
        rewritten = as_convolutions(mod)
        assert not has_transposed_convolutions(rewritten)
        np.testing.assert_allclose(_run(rewritten, x, w), expected, rtol=1e-5, atol=1e-5)
