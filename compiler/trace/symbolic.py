"""Unknown (None) dimensions as symbolic dimensions of one artifact: names, bounds, verified sizes.

A `None` in an input_signature becomes a named dimension of the compiled module (a `tir.Var` in
Relax, `compiler/frontend/importer.py`), so one library runs at any size. The names are fixed by position,
so that users can bound them (`@tfcheck.aot(dims={"batch": (1, 64)})`): axis 0 of every input is
`batch` (one dimension shared by all inputs, as the leading axis of a model's inputs is), any
other axis k of input `name` is `name_k`. The build verifies the library against TensorFlow at
the smallest size, a middle one and the largest (`VERIFY_MAX` when there is no upper bound). A
function that takes only some sizes (a U-Net of four poolings: multiples of 16) gets a step, found
by running TensorFlow (`size_steps`), that the artifact records and the runtime enforces.

Nothing here imports TensorFlow or TVM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tfcheck.compiler.process.child import StepError
from tfcheck.runtime.manifest import SymbolicDim

BATCH = "batch"
# The largest size verified for a dimension without an upper bound (or twice its smallest).
VERIFY_MAX = 32
# The sizes tried, in order, for the unknown dimensions (other than the batch) that `dims=` leaves
# unbounded when the function cannot run with them at 1: a U-Net of valid convolutions needs a few
# dozen pixels a side ("Computed output size would be negative ... input_size: 1", issue 42).
PROBE_SIZES = (32, 64, 128, 224)
# The largest step looked for: sizes that go in steps of 2^k up to 2^7 (seven poolings that halve).
LARGEST_STEP = 128
# Runs the function at these sizes: the error it raised, in one line, or None when it ran.
Runner = Callable[[dict[str, int]], "str | None"]
Bounds = dict[str, tuple[int, "int | None"]]


def dim_name(input_name: str, axis: int) -> str:
    """The name of an unknown dimension: `batch` for axis 0, else `<input>_<axis>`."""
    return BATCH if axis == 0 else f"{input_name}_{axis}"


def symbolic_shapes(shapes: list[list[int | None]], names: list[str]) -> list[list[int | str]]:
    """Each input's shape with its unknown dimensions named."""
    return [[dim_name(name, axis) if dim is None else dim for axis, dim in enumerate(shape)]
            for shape, name in zip(shapes, names)]


def bounds_of(shapes: list[list[int | str]], given: dict[str, Any], label: str) -> dict[str, tuple[int, int | None]]:
    """(min, max) of every named dimension in `shapes`: the user's (`dims=`, config), else
    (1, None). StepError for a bound on a name that is not an unknown dimension of the signature."""
    names = list(dict.fromkeys(dim for shape in shapes for dim in shape if isinstance(dim, str)))
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise StepError(f"dims= names {', '.join(map(repr, unknown))}, which is no unknown dimension of "
                        f"{label}'s input_signature; its unknown dimensions are {', '.join(map(repr, names))} "
                        "(axis 0 of every input is 'batch', axis k of input x is 'x_k')")
    return {name: tuple(given.get(name, (1, None))) for name in names}  # type: ignore[misc]


def verify_sizes(bounds: Bounds, steps: dict[str, int] | None = None) -> list[dict[str, int]]:
    """The sizes to verify at: every dimension at its minimum, then a middle size (odd, so that a
    tiled loop's remainder is exercised; with a step, the minimum plus an odd number of steps),
    then its maximum (when unbounded `VERIFY_MAX`, or twice the minimum where that is larger, so
    that a minimum raised by `runnable_bounds` is not the one size verified; with a step, brought
    down onto it); sizes that repeat are verified once."""
    steps = steps or {}
    verified: list[dict[str, int]] = []
    for index in range(3):
        sizes = {name: _size(low, _top(low, high, steps.get(name, 1)), index, steps.get(name, 1))
                 for name, (low, high) in bounds.items()}
        if sizes not in verified:
            verified.append(sizes)
    return verified


def _top(low: int, high: int | None, step: int = 1) -> int:
    """The largest size verified: the maximum, else `VERIFY_MAX` or twice the minimum; on the step."""
    top = high if high is not None else max(2 * low, VERIFY_MAX)
    return low + (top - low) // step * step


def _size(low: int, high: int, index: int, step: int = 1) -> int:
    if index == 0:
        return low
    if index == 2:
        return high
    if step > 1:
        return _on_step(low, high, (low + high) // 2, step) or low
    return min(high, ((low + high) // 2) | 1)


def _on_step(low: int, top: int, target: int, step: int) -> int | None:
    """`low` plus an odd number of `step`s, the nearest to `target` that is at most `top` (a size
    that takes this step and no larger one); None when `low + step` is above `top`."""
    if low + step > top:
        return None
    odd = max(0, round(((target - low) / step - 1) / 2))
    return low + step * (2 * min(odd, (top - low - step) // (2 * step)) + 1)


@dataclass(frozen=True)
class Stepped:
    """What `size_steps` found: the bounds with each maximum brought down onto its dimension's
    step, the steps above 1 by dimension, and a note for the build's report (None: no steps)."""

    bounds: Bounds
    steps: dict[str, int]
    note: str | None = None


def size_steps(bounds: Bounds, runs: Runner, label: str, decorator: bool = True) -> Stepped:
    """The steps of the dimensions whose sizes the function takes only in steps (a U-Net whose
    skip connections meet after four poolings: multiples of 16), found by running TensorFlow.

    The build verifies at an odd size between the bounds; a function that runs at the smallest
    sizes (`runnable_bounds`) but not there is run at the smallest plus an odd number of 2, 4,
    8, ... `LARGEST_STEP`, all the dimensions together: the first that runs is the step, and each
    dimension then gets its own (the largest smaller one it does not run at, the others on their
    step, doubled). Nothing is found when none runs: verification then fails saying which sizes
    TensorFlow cannot run (`unverifiable`). A step is assumed, not proven, beyond the sizes run:
    the verification at the smallest, middle and largest sizes on it checks three more.
    """
    lows = {name: low for name, (low, _) in bounds.items()}
    tops = {name: _top(low, high) for name, (low, high) in bounds.items()}
    middle = {name: _size(low, tops[name], 1) for name, low in lows.items()}
    probed = [name for name in bounds if middle[name] != lows[name]]
    error = runs(middle) if probed else None
    if error is None:
        return Stepped(bounds, {})
    found = _joint_step(lows, tops, middle, runs)
    if found is None:
        return Stepped(bounds, {})
    step, sizes = found
    owns = {name: step if len(probed) == 1 else _own_step(name, lows, tops, middle, sizes, step, runs) for name in probed}
    steps = {name: own for name, own in owns.items() if own > 1}
    if not steps:  # each runs off the step while the others are on theirs (an even product of sizes)
        return Stepped(bounds, {})
    stepped = {name: (low, None if high is None else low + (high - low) // steps[name] * steps[name])
               if name in steps else (low, high) for name, (low, high) in bounds.items()}
    return Stepped(stepped, steps, _step_note(label, middle, error, sizes, stepped, steps, decorator))


def _joint_step(lows: dict[str, int], tops: dict[str, int], middle: dict[str, int],
                runs: Runner) -> tuple[int, dict[str, int]] | None:
    """The smallest power of two from 2 to `LARGEST_STEP` whose odd multiples, added to every
    dimension's minimum near its middle size, the function runs at, with those sizes; None when
    none does (or the bounds leave no room for the next)."""
    step = 2
    while step <= LARGEST_STEP:
        sizes = {name: _on_step(lows[name], tops[name], middle[name], step) or lows[name] for name in lows}
        if sizes == lows:
            return None
        if runs(sizes) is None:
            return step, sizes
        step *= 2
    return None


def _own_step(name: str, lows: dict[str, int], tops: dict[str, int], middle: dict[str, int],
              sizes: dict[str, int], step: int, runs: Runner) -> int:
    """One dimension's step, the others at `sizes` (which run): twice the largest power of two
    below `step` whose odd multiples (from its minimum) it does not run at; 1 when it runs at all."""
    own = step // 2
    while own >= 1:
        size = _on_step(lows[name], tops[name], middle[name], own)
        if size is not None and runs({**sizes, name: size}) is not None:
            return 2 * own
        own //= 2
    return 1


def _step_note(label: str, middle: dict[str, int], error: str, sizes: dict[str, int], bounds: Bounds,
               steps: dict[str, int], decorator: bool) -> str:
    """The report's note on the steps found: the sizes TensorFlow could not run and could, and
    what the artifact takes."""
    names = list(steps)
    takes = "; ".join(f"{name}: {SymbolicDim(low, high, step=steps[name]).describe()}"
                      for name, (low, high) in bounds.items() if name in steps)
    return (f"{_names(names)}: TensorFlow cannot run the function at {_sizes_text(middle, list(middle))} ({error}) "
            f"but runs at {_sizes_text(sizes, list(sizes))}, so the artifact takes {takes}, and refuses other "
            f"sizes. To build for sizes off {'this step' if len(set(steps.values())) == 1 else 'these steps'}, "
            f"list them: {_shapes_hint(label, decorator)}")


def runnable_bounds(bounds: dict[str, tuple[int, int | None]], given: dict[str, Any], runs: Runner, label: str,
                    decorator: bool = True) -> tuple[dict[str, tuple[int, int | None]], str | None]:
    """The bounds, with the smallest size of the dimensions the function cannot run at raised to
    the first of `PROBE_SIZES` it runs at, and a note that says so (None when nothing was raised).

    The build runs the function at each dimension's smallest size: 1 unless `dims=` gives one, and
    a model of valid convolutions cannot run at 1. Only dimensions without the user's bounds, and
    not the batch, are raised: all of them together until the function runs, then each that runs
    at its smallest with the others raised goes back to it. StepError when no size works, or the
    user's own smallest sizes do not, saying which dimensions, what was tried and what to write.
    """
    lows = {name: low for name, (low, _) in bounds.items()}
    error = runs(lows)
    if error is None:
        return bounds, None
    free = [name for name in bounds if name not in given and name != BATCH]
    found = next((size for size in PROBE_SIZES if free and runs({**lows, **dict.fromkeys(free, size)}) is None), None)
    if found is None:
        raise StepError(_unrunnable(label, lows, free, given, error, decorator))
    raised = _needing(lows, free, found, runs)
    note = (f"{_names(raised)}: TensorFlow cannot run the function with {_them(raised)} at "
            f"{_sizes_text(lows, raised)} ({error}), so the artifact takes sizes from {found}, the first of "
            f"{', '.join(map(str, PROBE_SIZES))} that it ran at. To choose the smallest size yourself: "
            + dims_example({name: (found, None) for name in raised}, label, decorator))
    return {**bounds, **{name: (found, bounds[name][1]) for name in raised}}, note


def _needing(lows: dict[str, int], free: list[str], size: int, runs: Runner) -> list[str]:
    """Which of `free` must be at `size` for the function to run: each that runs at its smallest
    while the others are at `size` need not, unless those left cannot do it alone."""
    if len(free) == 1:
        return free
    needing = [name for name in free if runs({**lows, **{other: size for other in free if other != name}}) is not None]
    if needing and (needing == free or runs({**lows, **dict.fromkeys(needing, size)}) is None):
        return needing
    return free


def _unrunnable(label: str, lows: dict[str, int], free: list[str], given: dict[str, Any], error: str,
                decorator: bool) -> str:
    """The message when no size tried runs: at which sizes, TensorFlow's error, and what to write
    for the dimensions the user bounded and for those the build probed."""
    fixed = [f"{name}={size}" + (" (its dims= lower bound)" if name in given else "")
             for name, size in lows.items() if name not in free]
    tried = ", ".join(map(str, (lows[free[0]], *PROBE_SIZES))) if free else ""
    bounded = [name for name in lows if name in given]
    advice = [f"raise the dims= lower bound of {_names(bounded)} if it is too small"] if bounded else []
    if free:
        advice.append(f"bound {_names(free)} to sizes the function takes, "
                      + dims_example(dict.fromkeys(free, ("MIN", "MAX")), label, decorator))
    return (f"TensorFlow cannot run {label}" + (f" at {', '.join(fixed)}" if fixed else "")
            + (f" with {_names(free)} at any of {tried}" if free else "")
            + f": {error} (at {_sizes_text(lows, list(lows))}); " + ", ".join(advice)
            + ("," if advice else "") + f" or list concrete shapes it runs at: {_shapes_hint(label, decorator)}")


def unverifiable(label: str, sizes: dict[str, int], steps: list[dict[str, int]], error: str,
                 decorator: bool = True) -> str:
    """The message when TensorFlow cannot run the function at one of the sizes verified (within
    the bounds and on the step `size_steps` found, so the artifact would take it): a model that
    takes only sizes no step describes."""
    verified = "; ".join(", ".join(f"{name}={size}" for name, size in step.items()) for step in steps)
    return (f"TensorFlow cannot run {label} at {', '.join(f'{name}={size}' for name, size in sizes.items())} "
            f"({error}), one of the sizes the build verifies the artifact at ({verified}), all of which its bounds "
            "allow: bound the dimensions to sizes the function takes, "
            + dims_example(dict.fromkeys(sizes, ("MIN", "MAX")), label, decorator)
            + ", or, if it takes only some sizes that no step from its smallest size describes (the build finds steps "
            + f"of 2 to {LARGEST_STEP}: even sizes, multiples of 16), list them: {_shapes_hint(label, decorator)}")


def _shapes_hint(label: str, decorator: bool) -> str:
    return "@tfcheck.aot(shapes=[...])" if decorator else f'in pyproject.toml, [tool.tfcheck.build] shapes = {{ "{label}" = [...] }}'


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"


def _them(names: list[str]) -> str:
    return "it" if len(names) == 1 else "them"


def _sizes_text(sizes: dict[str, int], names: list[str]) -> str:
    return ", ".join(f"{name}={sizes[name]}" for name in names)


def dims_example(bounds: dict[str, tuple[int | str, int | str | None]], label: str, decorator: bool = True) -> str:
    """`dims=` for these bounds as the decorator writes it, or for a SavedModel as the config does
    (which has no unbounded maximum: `MAX` there)."""
    if decorator:
        return "@tfcheck.aot(dims={" + ", ".join(f'"{name}": ({low}, {high})' for name, (low, high) in bounds.items()) + "})"
    table = ", ".join(f"{name} = [{low}, {'MAX' if high is None else high}]" for name, (low, high) in bounds.items())
    return f'in pyproject.toml, [tool.tfcheck.build] dims = {{ "{label}" = {{ {table} }} }}'


def concrete(shapes: list[list[int | str]], sizes: dict[str, int]) -> list[list[int]]:
    """The shapes at these sizes."""
    return [[sizes[dim] if isinstance(dim, str) else dim for dim in shape] for shape in shapes]


def output_dims(static: list[list[int | None]], observed: list[list[list[int]]],
                steps: list[dict[str, int]]) -> list[list[int | str | None]]:
    """Each output's shape in terms of the input dimensions: a known size, the name of the one
    dimension whose size it had at every verified step, or None (an expression of several, such
    as `batch * 2`: shown as `?`; the library computes it)."""
    shapes = []
    for index, shape in enumerate(static):
        named: list[int | str | None] = []
        for axis, dim in enumerate(shape):
            sizes = [outputs[index][axis] for outputs in observed]
            matches = [name for name in steps[0] if all(step[name] == size for step, size in zip(steps, sizes))]
            if dim is not None:
                named.append(dim)
            elif matches:
                named.append(matches[0])
            else:
                named.append(sizes[0] if len(set(sizes)) == 1 else None)
        shapes.append(named)
    return shapes


def entries_example(shapes: list[list[int | str | None]], label: str, decorator: bool = True,
                    dims: dict[str, SymbolicDim] | None = None) -> str:
    """Both spellings of shape entries for these signature shapes, unknown (None or named)
    dimensions at their `dims` bounds (without a maximum, 8 or twice the minimum: a minimum of 32
    that `runnable_bounds` found is not offered twice; on the dimension's step), else as 1 and 8
    (an image of 96 to 224 pixels a side is not offered 1x1): the decorator's (a bare shape for a
    one-input function; not for a SavedModel, which has no decorator) and the config's (always nested)."""
    def size(dim: int | str | None, largest: bool) -> int:
        if isinstance(dim, int):
            return dim
        bounds = (dims or {}).get(dim or "", SymbolicDim())
        if not largest:
            return bounds.min
        if bounds.max:
            return bounds.max
        return bounds.min + -(-(max(8, 2 * bounds.min) - bounds.min) // bounds.step) * bounds.step

    entries = [[[size(dim, largest) for dim in shape] for shape in shapes] for largest in (False, True)]
    decorated = ", ".join(repr(tuple(entry[0])) if len(entry) == 1 else repr(tuple(map(tuple, entry)))
                          for entry in entries)
    config = f'in pyproject.toml, [tool.tfcheck.build] shapes = {{ "{label}" = {entries} }}'
    return f"@tfcheck.aot(shapes=[{decorated}]) or, {config}" if decorator else config
