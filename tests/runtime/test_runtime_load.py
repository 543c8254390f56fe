"""`tfcheck.load` on artifacts made with TVM: results, structures, input conversion and checks."""

from __future__ import annotations

import numpy as np
import pytest

import tfcheck
from tfcheck.runtime import InputError

X = np.arange(6, dtype=np.float32).reshape(2, 3)
Y = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)


def test_dict_output_matches_numpy_and_names_resolve(artifacts):
    lib = tfcheck.load(artifacts(("addmul", (2, 3))))
    result = lib.addmul(X, Y)
    assert set(result) == {"prod", "sum"}
    np.testing.assert_array_equal(result["sum"], X + Y)
    np.testing.assert_array_equal(result["prod"], (X + Y) * X)
    assert lib["addmul"] is lib.addmul is lib["demo.models.addmul"]
    assert "addmul" in lib and list(lib) == ["demo.models.addmul"]


def test_single_artifact_folder_and_tuple_and_tensor_outputs(compiled):
    pair = tfcheck.load(compiled("pair", (2, 3))).pair(np.array([[1, 2, 3], [4, 5, 6]], np.int32))
    assert isinstance(pair, tuple) and len(pair) == 2
    np.testing.assert_array_equal(pair[1], [[1, 4, 9], [16, 25, 36]])
    scaled = tfcheck.load(compiled("scale", (1, 4))).scale(np.ones((1, 4), np.float32))
    assert isinstance(scaled, np.ndarray) and scaled.dtype == np.float32
    np.testing.assert_array_equal(scaled, np.full((1, 4), 3.0))


def test_keyword_arguments_bind_by_input_name(artifacts):
    lib = tfcheck.load(artifacts(("addmul", (2, 3))))
    np.testing.assert_array_equal(lib.addmul(y=Y, x=X)["sum"], X + Y)


class ArrayLike:
    """Only `__array__`, like many tensor types."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array


class DLPackOnly:
    """Only the DLPack protocol, like a torch or JAX tensor on the CPU."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


@pytest.mark.parametrize("wrap", [ArrayLike, DLPackOnly, lambda a: np.asfortranarray(a),
                                  lambda a: np.repeat(a, 2, 1)[:, ::2]])
def test_inputs_by_array_protocols_and_odd_layouts(artifacts, wrap):
    """Lists follow the arrays' dtype rule: tests/runtime/test_input_dtypes.py."""
    lib = tfcheck.load(artifacts(("addmul", (2, 3))))
    np.testing.assert_array_equal(lib.addmul(wrap(X), wrap(Y))["sum"], X + Y)


def test_dlpack_input_is_not_copied():
    from tfcheck.runtime.inputs import as_array, for_tvm

    buffer = np.empty(64 + 6 * 4, np.uint8)
    start = -buffer.ctypes.data % 64
    source = buffer[start:start + 24].view(np.float32).reshape(2, 3)
    producer = DLPackOnly(source)
    assert np.shares_memory(for_tvm(producer, as_array(producer)), source)
    source.flags.writeable = False  # NumPy cannot export a read-only array: copied
    prepared = for_tvm(source, source)
    assert not np.shares_memory(prepared, source) and prepared.flags.writeable


def test_misaligned_input_is_copied_to_aligned_memory():
    from tfcheck.runtime.inputs import ALIGNMENT, for_tvm

    buffer = np.arange(32, dtype=np.float32)
    start = (-buffer.ctypes.data % ALIGNMENT) // 4 + 1  # one element past a 64-byte boundary
    misaligned = buffer[start:start + 6]
    assert misaligned.ctypes.data % ALIGNMENT != 0
    fixed = for_tvm(misaligned, misaligned)
    assert fixed.ctypes.data % ALIGNMENT == 0
    np.testing.assert_array_equal(fixed, misaligned)


@pytest.mark.parametrize("args, kwargs, message", [
    ((X,), {}, "missing input y: float32[2, 3]"),
    ((X, Y, X), {}, "takes 2 input(s)"),
    ((X, Y.astype(np.float64)), {}, "argument 'y' has dtype float64, expected y: float32[2, 3]"),
    ((X[:1], Y), {}, "argument 'x' has shape (1, 3), expected x: float32[2, 3]"),
    ((X,), {"z": Y}, "unexpected keyword argument(s) z"),
    ((X, Y), {"x": X}, "multiple values for input 'x'"),
])
def test_bad_inputs_name_the_argument_and_the_spec(artifacts, args, kwargs, message):
    lib = tfcheck.load(artifacts(("addmul", (2, 3))))
    with pytest.raises(InputError) as caught:
        lib.addmul(*args, **kwargs)
    assert message in str(caught.value)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)


def test_per_shape_artifacts_are_chosen_by_input_shape(artifacts):
    lib = tfcheck.load(artifacts(("scale", (1, 4)), ("scale", (3, 4))))
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        np.testing.assert_allclose(lib.scale(x), x * 2 + 1, rtol=1e-6)
    with pytest.raises(InputError, match=r"no artifact for input shapes \(x: \(2, 4\)\).*"
                                         r"scale\(x: float32\[1, 4\]\).*scale\(x: float32\[3, 4\]\)"):
        lib.scale(np.zeros((2, 4), np.float32))


def test_unknown_function_lists_the_available_ones(artifacts):
    lib = tfcheck.load(artifacts(("scale", (1, 4)), ("addmul", (2, 3))))
    with pytest.raises(AttributeError, match="available: addmul, scale"):
        lib.classify
    with pytest.raises(KeyError, match="no compiled function 'classify'"):
        lib["classify"]


def test_a_signature_checked_once_skips_the_checks_but_not_the_memory_checks(artifacts, monkeypatch):
    """After a call with NumPy arrays, arrays of the same dtypes and shapes go straight to the
    library, only their memory checked again (a misaligned or a read-only array, which need a
    copy, still give the right result); another dtype or shape is checked, and refused, as before."""
    from tfcheck.runtime.library import CompiledFunction

    addmul = tfcheck.load(artifacts(("addmul", (2, 3)))).addmul
    np.testing.assert_array_equal(addmul(X, Y)["sum"], X + Y)

    def no_checks(*_):
        raise AssertionError("checked again")

    monkeypatch.setattr(CompiledFunction, "select", no_checks)
    misaligned = np.empty(7, np.float32)[1:].reshape(2, 3)
    misaligned[...] = Y
    read_only = X.copy()
    read_only.flags.writeable = False
    np.testing.assert_array_equal(addmul(read_only, misaligned)["prod"], (X + Y) * X)
    with pytest.raises(AssertionError, match="checked again"):
        addmul(X.astype(np.float64), Y)
    monkeypatch.undo()
    with pytest.raises(InputError, match="dtype float64"):
        addmul(X.astype(np.float64), Y)
    with pytest.raises(InputError, match=r"shape \(3, 2\)"):
        addmul(X.reshape(3, 2), Y.reshape(3, 2))
