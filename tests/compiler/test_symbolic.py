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


def test_a_raised_minimum_is_not_the_only_size_verified() -> None:
    assert symbolic.verify_sizes({"x_1": (32, None)}) == [{"x_1": 32}, {"x_1": 49}, {"x_1": 64}]


def runner(smallest: dict[str, int], tried: list[dict[str, int]]) -> symbolic.Runner:
    """A function that runs only where each dimension is at least `smallest` says (valid
    convolutions), noting the sizes it was tried at."""
    def runs(sizes: dict[str, int]) -> str | None:
        tried.append(sizes)
        small = [name for name, size in sizes.items() if size < smallest.get(name, 1)]
        return f"InvalidArgumentError: Computed output size would be negative ({small})" if small else None
    return runs


def test_a_function_that_runs_at_its_smallest_sizes_keeps_its_bounds_after_one_run() -> None:
    tried: list[dict[str, int]] = []
    bounds = {"batch": (1, None), "x_1": (1, None)}
    assert symbolic.runnable_bounds(bounds, {}, runner({}, tried), "m.f") == (bounds, None)
    assert tried == [{"batch": 1, "x_1": 1}]


def test_only_the_dimensions_that_cannot_run_at_1_are_raised_and_the_note_names_them() -> None:
    """A U-Net of valid (3, 1) convolutions for any image size: its height needs 5 pixels, its
    width 1; the batch is never raised, nor a dimension `dims=` bounds."""
    tried: list[dict[str, int]] = []
    bounds = {"batch": (1, None), "image_1": (1, None), "image_2": (1, None)}
    raised, note = symbolic.runnable_bounds(bounds, {}, runner({"image_1": 5}, tried), "m.segment")
    assert raised == {"batch": (1, None), "image_1": (32, None), "image_2": (1, None)}
    assert note == ("image_1: TensorFlow cannot run the function with it at image_1=1 "
                    "(InvalidArgumentError: Computed output size would be negative (['image_1'])), so the "
                    "artifact takes sizes from 32, the first of 32, 64, 128, 224 that it ran at. To choose the "
                    'smallest size yourself: @tfcheck.aot(dims={"image_1": (32, None)})')
    assert all(sizes["batch"] == 1 for sizes in tried)


def test_dimensions_that_must_grow_together_are_raised_together() -> None:
    def runs(sizes: dict[str, int]) -> str | None:  # runs when either side is large (a reshape of their product)
        return None if sizes["x_1"] * sizes["x_2"] >= 64 else "ValueError: too small"
    raised, note = symbolic.runnable_bounds({"x_1": (1, None), "x_2": (1, None)}, {}, runs, "m.f")
    assert raised == {"x_1": (32, None), "x_2": (32, None)} and note.startswith("x_1 and x_2: ")


def test_no_size_that_runs_fails_with_what_was_tried_and_what_to_write() -> None:
    tried: list[dict[str, int]] = []
    with pytest.raises(StepError) as failure:
        symbolic.runnable_bounds({"batch": (1, 4), "x_1": (1, None)}, {"batch": (1, 4)},
                                 runner({"x_1": 500}, tried), "m.f")
    assert failure.value.message == (
        "TensorFlow cannot run m.f at batch=1 (its dims= lower bound) with x_1 at any of 1, 32, 64, 128, 224: "
        "InvalidArgumentError: Computed output size would be negative (['x_1']) (at batch=1, x_1=1); raise the "
        "dims= lower bound of batch if it is too small, bound x_1 to sizes the function takes, "
        '@tfcheck.aot(dims={"x_1": (MIN, MAX)}), or list concrete shapes it runs at: @tfcheck.aot(shapes=[...])')
    assert [sizes["x_1"] for sizes in tried] == [1, 32, 64, 128, 224]


def test_the_users_own_smallest_sizes_are_never_raised() -> None:
    with pytest.raises(StepError, match=r"^TensorFlow cannot run m.f at x_1=2 \(its dims= lower bound\): .* \(at "
                                        r"x_1=2\); raise the dims= lower bound of x_1 if it is too small, or list "):
        symbolic.runnable_bounds({"x_1": (2, 16)}, {"x_1": (2, 16)}, runner({"x_1": 5}, []), "m.f")


def test_a_savedmodel_is_told_the_config_spelling() -> None:
    _, note = symbolic.runnable_bounds({"x_1": (1, None)}, {}, runner({"x_1": 5}, []), "m.serving_default",
                                       decorator=False)
    assert note.endswith('in pyproject.toml, [tool.tfcheck.build] dims = { "m.serving_default" = { x_1 = [32, MAX] } }')


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

