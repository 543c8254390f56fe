"""Dimensions the function takes only in steps, found by running it (`symbolic.size_steps`), and
the sizes verified on them, without TensorFlow: a stand-in for the function that runs where each
size is its smallest plus a multiple of a step, as keras-unet-collection's `unet_2d` does (four
poolings whose skip connections meet again: multiples of 16; issue 42)."""

from tfcheck.compiler.trace import symbolic

UNET_ERROR = "InvalidArgumentError: ConcatOp : Dimension 1 in both shapes must be equal"


def runner(steps: dict[str, int], tried: list[dict[str, int]], offsets: dict[str, int] | None = None) -> symbolic.Runner:
    """A function that runs where each dimension of `steps` is `offset` (0 by default) plus a
    multiple of its step, noting the sizes it was tried at."""
    def runs(sizes: dict[str, int]) -> str | None:
        tried.append(sizes)
        off = [name for name, step in steps.items() if (sizes[name] - (offsets or {}).get(name, 0)) % step]
        return f"{UNET_ERROR} ({off})" if off else None
    return runs


def test_a_unet_for_any_size_takes_multiples_of_16_and_is_verified_on_them() -> None:
    tried: list[dict[str, int]] = []
    bounds = {"images_1": (32, 256), "images_2": (32, 256)}
    found = symbolic.size_steps(bounds, runner({"images_1": 16, "images_2": 16}, tried), "m.segment")
    assert found.steps == {"images_1": 16, "images_2": 16} and found.bounds == bounds
    assert symbolic.verify_sizes(found.bounds, found.steps) == [
        {"images_1": 32, "images_2": 32}, {"images_1": 144, "images_2": 144}, {"images_1": 256, "images_2": 256}]
    # the odd middle, then 2, 4, 8 and 16 steps together, then each alone at 8 steps
    assert [sizes["images_1"] for sizes in tried] == [145, 146, 148, 152, 144, 152, 144]
    assert found.note == (
        "images_1 and images_2: TensorFlow cannot run the function at images_1=145, images_2=145 "
        f"({UNET_ERROR} (['images_1', 'images_2'])) but runs at images_1=144, images_2=144, so the artifact takes "
        "images_1: multiples of 16, 32 to 256; images_2: multiples of 16, 32 to 256, and refuses other sizes. "
        "To build for sizes off this step, list them: @tfcheck.aot(shapes=[...])")


def test_each_dimension_gets_its_own_step_and_the_batch_none() -> None:
    bounds = {"batch": (1, 8), "images_1": (32, 256), "images_2": (32, None)}
    found = symbolic.size_steps(bounds, runner({"images_1": 16, "images_2": 4}, []), "m.segment")
    assert found.steps == {"images_1": 16, "images_2": 4}
    assert found.note is not None and found.note.startswith("images_1 and images_2: ")
    assert symbolic.verify_sizes(found.bounds, found.steps) == [
        {"batch": 1, "images_1": 32, "images_2": 32}, {"batch": 5, "images_1": 144, "images_2": 52},
        {"batch": 8, "images_1": 256, "images_2": 64}]


def test_a_step_from_a_minimum_off_its_multiples_brings_the_maximum_onto_it() -> None:
    """Valid convolutions before the poolings: sizes 4 above a multiple of 8, from 36."""
    found = symbolic.size_steps({"x_1": (36, 100)}, runner({"x_1": 8}, [], {"x_1": 4}), "m.f")
    assert found.steps == {"x_1": 8} and found.bounds == {"x_1": (36, 100)}
    assert symbolic.verify_sizes(found.bounds, found.steps) == [{"x_1": 36}, {"x_1": 76}, {"x_1": 100}]
    assert symbolic.size_steps({"x_1": (36, 99)}, runner({"x_1": 8}, [], {"x_1": 4}), "m.f").bounds == {"x_1": (36, 92)}
    assert "x_1: 36 to 100 in steps of 8" in (found.note or "")


def test_a_function_that_runs_at_the_middle_size_is_run_once_and_keeps_its_bounds() -> None:
    tried: list[dict[str, int]] = []
    bounds = {"batch": (1, 64), "tokens_1": (1, None), "fixed_2": (3, 3)}
    assert symbolic.size_steps(bounds, runner({}, tried), "m.f") == symbolic.Stepped(bounds, {})
    assert tried == [{"batch": 33, "tokens_1": 17, "fixed_2": 3}]
    assert symbolic.size_steps({"fixed_2": (3, 3)}, runner({"fixed_2": 2}, tried), "m.f").steps == {}
    assert len(tried) == 1  # nothing between the bounds to run at


def test_no_step_is_made_up_for_a_function_no_step_makes_run() -> None:
    """One that runs only up to 100 (the verification then says TensorFlow cannot run the middle
    size, `unverifiable`)."""
    def small(sizes: dict[str, int]) -> str | None:
        return None if sizes["x_1"] <= 100 else "ResourceExhaustedError: too large"
    assert symbolic.size_steps({"x_1": (1, 400)}, small, "m.f") == symbolic.Stepped({"x_1": (1, 400)}, {})


def test_a_size_verified_that_tensorflow_cannot_run_is_named_with_what_to_write() -> None:
    message = symbolic.unverifiable("m.f", {"x_1": 49}, [{"x_1": 32}, {"x_1": 49}, {"x_1": 64}],
                                    "InvalidArgumentError: too small", decorator=True)
    assert message == (
        "TensorFlow cannot run m.f at x_1=49 (InvalidArgumentError: too small), one of the sizes the build verifies "
        "the artifact at (x_1=32; x_1=49; x_1=64), all of which its bounds allow: bound the dimensions to sizes the "
        'function takes, @tfcheck.aot(dims={"x_1": (MIN, MAX)}), or, if it takes only some sizes that no step from '
        "its smallest size describes (the build finds steps of 2 to 128: even sizes, multiples of 16), list them: "
        "@tfcheck.aot(shapes=[...])")


def test_sizes_that_run_unless_all_are_odd_get_no_step() -> None:
    """A reshape of the product of two sizes into pairs: each runs at any size while the other is
    even, so neither dimension has a step of its own, and none is recorded."""
    def pairs(sizes: dict[str, int]) -> str | None:
        return None if sizes["x_1"] * sizes["x_2"] % 2 == 0 else "InvalidArgumentError: Input to reshape"
    bounds = {"x_1": (2, 40), "x_2": (2, 40)}
    assert symbolic.size_steps(bounds, pairs, "m.f") == symbolic.Stepped(bounds, {})


def test_the_shape_entries_offered_are_on_the_step() -> None:
    """A U-Net of valid convolutions first (sizes 4 above a multiple of 16, from 36): the entries
    a failed symbolic build offers are sizes it takes, not twice the smallest (72)."""
    dims = {"image_1": symbolic.SymbolicDim(36, None, (36, 52, 68), 16), "image_2": symbolic.SymbolicDim(36, 100, (), 16)}
    assert symbolic.entries_example([[1, "image_1", "image_2", 1]], "m.segment", dims=dims).startswith(
        "@tfcheck.aot(shapes=[(1, 36, 36, 1), (1, 84, 100, 1)])")
