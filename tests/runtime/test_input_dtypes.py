"""One dtype rule for every input of `tfcheck.load` (issue 40, item 10): a float64 array and a
Python list of floats are refused alike with the same message, since nothing is cast
(docs/runtime.md, "Inputs"); an input of the artifact's dtype is taken, whatever carries it."""

from __future__ import annotations

import numpy as np
import pytest

import tfcheck
from tfcheck.runtime import InputError

X = np.arange(4, dtype=np.float32).reshape(1, 4)


def _message(dtype: str) -> str:
    return (f"scale(): argument 'x' has dtype {dtype}, expected x: float32[1, 4]; inputs are not cast "
            "(a cast can lose precision): pass np.asarray(value, dtype=np.float32)")


@pytest.mark.parametrize(("value", "dtype"), [
    (X.astype(np.float64), "float64"),
    (X.astype(np.float64).tolist(), "float64"),  # Python floats: float64, as np.asarray reads them
    (X.astype(np.int64), "int64"),
    ([[0, 1, 2, 3]], "int64"),
])
def test_arrays_and_lists_of_another_dtype_are_refused_alike(artifacts, value: object, dtype: str) -> None:
    scale = tfcheck.load(artifacts(("scale", (1, 4)))).scale
    with pytest.raises(InputError) as caught:
        scale(value)
    assert str(caught.value) == _message(dtype)


def test_an_input_of_the_artifacts_dtype_is_taken(artifacts) -> None:
    scale = tfcheck.load(artifacts(("scale", (1, 4)))).scale
    np.testing.assert_array_equal(scale(X), X * 2 + 1)
    np.testing.assert_array_equal(scale(np.asarray(X.tolist(), dtype=np.float32)), X * 2 + 1)
