"""Float32 exp, sigmoid, tanh, erf and softmax take vectorisable approximations (`fast_math.py`):
they must agree with exact references over the whole useful input range, vectorise, and leave
other dtypes to TVM's exact legalization."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

from tfcheck.compiler.schedules import apply_default_schedules

from . import reference
from .test_operators import TARGET, module

# float32 exp overflows past 88.72 and underflows (to denormals) below -87.3: beyond that the
# approximation clamps, so the exact comparison covers [-87, 88]; the others saturate long before.
WIDE = np.concatenate([np.linspace(-87.0, 88.0, 4001), [-1e-30, 0.0, 1e-30, 1e-7, -1e-7]]).astype("float32")

EXACT = {
    "exp": np.exp,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x.astype("float64"))),
    "tanh": np.tanh,
    "erf": np.vectorize(math.erf),
}
OPS = {"exp": relax.op.exp, "sigmoid": relax.op.sigmoid, "tanh": relax.op.tanh, "erf": relax.op.erf}
LIBM_CALLS = ("T.exp(", "T.sigmoid(", "T.tanh(", "T.erf(")


def _scheduled_and_output(mod: tvm.IRModule, x: np.ndarray) -> tuple[str, np.ndarray]:
    scheduled = apply_default_schedules(mod, TARGET)
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=TARGET), tvm.cpu())
    kernels = "\n".join(f.script() for _, f in scheduled.functions_items() if isinstance(f, tirx.PrimFunc))
    return kernels, vm["main"](tvm.runtime.tensor(x)).numpy()


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("values", ["wide", "normal"])
def test_float32_functions_match_the_exact_ones_and_vectorise(name: str, values: str) -> None:
    rng = np.random.default_rng(0)
    x = WIDE.reshape(1, -1) if values == "wide" else rng.standard_normal((7, 128)).astype("float32")
    kernels, actual = _scheduled_and_output(module([x.shape], lambda bb, v: OPS[name](v)), x)
    expected = EXACT[name](x.astype("float64"))
    np.testing.assert_allclose(actual, expected, rtol=2e-6, atol=1e-7)
    assert not any(call in kernels for call in LIBM_CALLS), kernels
    assert "T.vectorized" in kernels


@pytest.mark.parametrize(("shape", "axis"), [((4, 128, 128), -1), ((3, 17), 0), ((2, 5, 9), 1)])
def test_float32_softmax_matches_along_any_axis(shape: tuple[int, ...], axis: int) -> None:
    x = (np.random.default_rng(1).standard_normal(shape) * 30).astype("float32")  # large logits too
    kernels, actual = _scheduled_and_output(module([shape], lambda bb, v: relax.op.nn.softmax(v, axis=axis)), x)
    np.testing.assert_allclose(actual, reference.softmax(x.astype("float64"), axis=axis), rtol=2e-6, atol=1e-7)
    assert "T.exp(" not in kernels


def test_other_dtypes_keep_the_exact_functions() -> None:
    x = np.linspace(-5, 5, 33).reshape(3, 11)
    bb = relax.BlockBuilder()
    param = relax.Var("x", relax.TensorType(x.shape, "float64"))
    with bb.function("main", [param]):
        bb.emit_func_output(relax.op.sigmoid(relax.op.exp(param)))
    kernels, actual = _scheduled_and_output(bb.get(), x)
    np.testing.assert_allclose(actual, 1 / (1 + np.exp(-np.exp(x))), rtol=1e-12)
    assert "T.exp(" in kernels or "T.sigmoid(" in kernels
