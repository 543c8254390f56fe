"""Comparing artifact outputs with TensorFlow's: tolerances per dtype, scaled by magnitude."""

from __future__ import annotations

import numpy as np

from tfcheck.compiler.verify import compare


def test_float_outputs_within_tolerance_pass_and_report_errors() -> None:
    expected = [np.array([1.0, -2.0, 0.0], np.float32)]
    result = compare([expected[0] + np.float32(5e-5)], expected)
    assert result["passed"] is True
    assert 4e-5 < result["max_abs_error"] < 6e-5
    assert result["max_rel_error"] < 1.0


def test_a_wrong_value_fails_with_the_count_of_bad_elements() -> None:
    expected = [np.zeros(4, np.float32), np.ones(2, np.float32)]
    actual = [np.zeros(4, np.float32), np.array([1.0, 1.1], np.float32)]
    result = compare(actual, expected)
    assert result["passed"] is False
    assert result["message"] == "output 1: 1 of 2 elements beyond atol=0.0001, rtol=0.001"


def test_tolerance_grows_with_the_largest_magnitude() -> None:
    expected = [np.array([1000.0, 0.0], np.float32)]
    assert compare([np.array([1000.0, 0.05], np.float32)], expected)["passed"] is True
    assert compare([np.array([1000.0, 0.5], np.float32)], expected)["passed"] is False


def test_integers_must_match_exactly_and_shapes_and_counts_must_agree() -> None:
    assert compare([np.array([1, 2])], [np.array([1, 3])])["passed"] is False
    assert "float32[3] instead of float32[2]" in compare([np.zeros(3, np.float32)], [np.zeros(2, np.float32)])["message"]
    assert compare([], [np.zeros(1)])["message"] == "the artifact returned 0 outputs, TensorFlow 1"
