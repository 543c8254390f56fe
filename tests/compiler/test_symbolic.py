"""Symbolic dimensions, without TensorFlow: names, bounds, verified sizes, and where `dims=` is
checked (decorator, discovery, config), each error naming what is wrong."""

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

from tfcheck.compiler.trace import symbolic
from tfcheck.compiler.process.child import StepError
from tfcheck.compiler.trace.discover import discover
from tfcheck.config import ConfigError, parse_table

import tfcheck.aot  # noqa: E402 - the module, not the decorator tfcheck exposes

aot_module = sys.modules["tfcheck.aot"]


def test_unknown_dimensions_are_named_by_position() -> None:
    assert symbolic.symbolic_shapes([[None, None], [None, 4]], ["tokens", "mask"]) == \
        [["batch", "tokens_1"], ["batch", 4]]


def test_verified_sizes_are_the_minimum_an_odd_middle_and_the_maximum() -> None:
    steps = symbolic.verify_sizes({"batch": (1, 64), "tokens_1": (2, None)})
    assert steps == [{"batch": 1, "tokens_1": 2}, {"batch": 33, "tokens_1": 17},
                     {"batch": 64, "tokens_1": symbolic.VERIFY_MAX}]
    assert symbolic.verify_sizes({"batch": (4, 4)}) == [{"batch": 4}]


def test_a_bound_on_a_dimension_the_signature_lacks_is_refused() -> None:
    with pytest.raises(StepError, match=r"dims= names 'length'.*its unknown dimensions are 'batch', 'x_1'"):
        symbolic.bounds_of([["batch", "x_1"]], {"length": (1, 8)}, "m.f")
    assert symbolic.bounds_of([["batch", 3]], {}, "m.f") == {"batch": (1, None)}


def test_output_dimensions_are_named_after_the_input_dimension_they_follow() -> None:
    steps = [{"batch": 1, "x_1": 1}, {"batch": 5, "x_1": 9}]
    observed = [[[1, 8], [1, 2]], [[5, 8], [5, 18]]]
    assert symbolic.output_dims([[None, 8], [None, None]], observed, steps) == [["batch", 8], ["batch", None]]


@pytest.mark.parametrize("dims, message", [
    ({"batch": (0, 4)}, r"dims= entry 'batch': \(0, 4\) is not \(min, max\)"),
    ({"batch": (8, 4)}, r"dims= entry 'batch'"),
    ([1, 64], r"dims= must be a dict"),
    ({"batch": 64}, r"dims= entry 'batch': 64"),
])
def test_the_decorator_refuses_bad_bounds(dims: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        aot_module.aot(dims=dims)


def test_discovery_names_the_function_and_line_of_bad_bounds(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import tensorflow as tf\nimport tfcheck\n\n"
                                   "@tfcheck.aot(dims={'batch': (4, 1)})\n@tf.function\ndef f(x):\n    return x\n")
    [found] = discover([tmp_path / "m.py"]).functions
    assert found.problem is not None and found.problem.startswith("m.f: line 4: dims= entry 'batch'")


def test_the_config_names_the_file_key_and_function_of_bad_bounds() -> None:
    table = tomllib.loads('[tool.tfcheck.build]\ndims = { "m.f" = { batch = [0, 8] } }\n')["tool"]["tfcheck"]
    with pytest.raises(ConfigError, match=r"pyproject\.toml: \[tool\.tfcheck\]\.build\.dims\.m\.f: dims= entry 'batch'"):
        parse_table(table, Path("pyproject.toml"))

