"""compiler/frontend/transposed_convolution.py: transposed convolutions rewritten as convolutions.

Each case is a Relax module holding one transposed convolution in the TFLite frontend's form; the
rewritten module must compute what TVM's own lowering of the original computes (the layout route
of `importer._lowerable_transposed_convolutions`), and must no longer call a transposed one.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

from tfcheck.compiler.frontend.importer import _lowerable_transposed_convolutions
from tfcheck.compiler.frontend.transposed_convolution import as_convolutions, has_transposed_convolutions


def _module(data: tuple, kernel: tuple, op: str = "conv2d_transpose", **attrs: object) -> tvm.IRModule:
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(data, "float32"))
    w = relax.Var("w", relax.TensorType(kernel, "float32"))
    with builder.function("main", [x, w]):
        with builder.dataflow():
            out = builder.emit_output(getattr(relax.op.nn, op)(x, w, **attrs))
        builder.emit_func_output(out)
    return builder.get()


def _run(mod: tvm.IRModule, *arrays: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](*(tvm.runtime.tensor(a) for a in arrays)).numpy()


TWO_D = dict(data_layout="NHWC", kernel_layout="IOHW")
CASES = {
    "stride 2, same": ((1, 5, 6, 3), (3, 4, 3, 3), dict(strides=2, padding=[0, 0, 1, 1], **TWO_D)),
    "stride 2, kernel 4, valid": ((2, 4, 4, 5), (5, 2, 4, 4), dict(strides=2, **TWO_D)),
    "strides 3 and 1, output padding": ((1, 3, 4, 2), (2, 3, 3, 2),
                                        dict(strides=[3, 1], padding=[1, 0, 0, 1], output_padding=[1, 0], **TWO_D)),
    "dilated kernel": ((1, 4, 4, 2), (2, 3, 3, 3), dict(strides=2, dilation=2, **TWO_D)),
    "padding past the kernel (a crop)": ((1, 6, 6, 2), (2, 2, 1, 1), dict(strides=2, padding=[1, 1, 1, 0], **TWO_D)),
    "stride 1": ((1, 4, 4, 2), (2, 3, 3, 3), dict(padding=[1, 1, 1, 1], **TWO_D)),
    "3-D, DHWOI": ((1, 2, 3, 3, 2), (3, 3, 3, 4, 2), dict(op="conv3d_transpose", strides=2, data_layout="NDHWC",
                                                            kernel_layout="DHWOI")),
}


@pytest.mark.parametrize("case", CASES)
def test_a_transposed_convolution_becomes_a_convolution_with_the_same_result(case: str) -> None:
    data, kernel, attrs = CASES[case]
    attrs = {**attrs, "out_layout": attrs["data_layout"]}
    mod = _module(data, kernel, **attrs)
    rewritten = as_convolutions(mod)
    assert has_transposed_convolutions(mod) and not has_transposed_convolutions(rewritten)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(data).astype("float32"), rng.standard_normal(kernel).astype("float32")
    expected = _run(_lowerable_transposed_convolutions(mod), x, w)
    np.testing.assert_allclose(_run(rewritten, x, w), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    dict(strides=2, groups=2, data_layout="NHWC", kernel_layout="IOHW", out_layout="NHWC"),  # grouped
    dict(strides=2, data_layout="NCHW", kernel_layout="IOHW", out_layout="NCHW"),  # TVM lowers it as it is
])
def test_other_forms_keep_tvms_lowering(attrs: dict) -> None:
    mod = _module((1, 4, 4, 4), (4, 2, 3, 3), **attrs)
    assert has_transposed_convolutions(as_convolutions(mod))


@pytest.mark.parametrize("symbolic", ["batch", "height and width"])
def test_symbolic_sizes_become_a_convolution_with_the_same_result_at_each_size(symbolic: str) -> None:
    """A Keras `Conv2DTranspose` over an unknown batch, or over an image of any size (a U-Net's
    up-convolution): the importer gives it symbolic sizes."""
    n, h, w = (tvm.tirx.Var(name, "int64") for name in "nhw")
    data = (n, 5, 6, 3) if symbolic == "batch" else (1, h, w, 3)
    for case in ("stride 2, same", "padding past the kernel (a crop)"):
        _, kernel, attrs = CASES[case]
        mod = _module(data[:3] + (kernel[0],), kernel, **attrs, out_layout="NHWC")
        rewritten = as_convolutions(mod)
        assert not has_transposed_convolutions(rewritten)
        rng = np.random.default_rng(1)
        w_value = rng.standard_normal(kernel).astype("float32")
        for sizes in ((1, 5, 6), (3, 4, 7)):
            shape = (sizes[0], 5, 6, kernel[0]) if symbolic == "batch" else (1, *sizes[1:], kernel[0])
            x = rng.standard_normal(shape).astype("float32")
            expected = _run(_lowerable_transposed_convolutions(mod), x, w_value)
            np.testing.assert_allclose(_run(rewritten, x, w_value), expected, rtol=1e-5, atol=1e-5)


def test_symbolic_channels_keep_tvms_lowering() -> None:
    mod = _module((1, 4, 4, tvm.tirx.Var("c", "int64")), (2, 3, 3, 3), strides=2, **TWO_D, out_layout="NHWC")
    assert has_transposed_convolutions(as_convolutions(mod))
