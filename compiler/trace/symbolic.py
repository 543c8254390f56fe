"""Unknown (None) dimensions as symbolic dimensions of one artifact: names, bounds, verified sizes.

A `None` in an input_signature becomes a named dimension of the compiled module (a `tir.Var` in
Relax, `compiler/frontend/importer.py`), so one library runs at any size. The names are fixed by position,
so that users can bound them (`@tfcheck.aot(dims={"batch": (1, 64)})`): axis 0 of every input is
`batch` (one dimension shared by all inputs, as the leading axis of a model's inputs is), any
other axis k of input `name` is `name_k`. The build verifies the library against TensorFlow at
the smallest size, a middle one and the largest (`VERIFY_MAX` when there is no upper bound).

Nothing here imports TensorFlow or TVM.
"""

from __future__ import annotations

from typing import Any

from tfcheck.compiler.process.child import StepError
from tfcheck.runtime.manifest import SymbolicDim

BATCH = "batch"
# The largest size verified for a dimension without an upper bound.
VERIFY_MAX = 32


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


def verify_sizes(bounds: dict[str, tuple[int, int | None]]) -> list[dict[str, int]]:
    """The sizes to verify at: every dimension at its minimum, then a middle size (odd, so that a
    tiled loop's remainder is exercised), then its maximum (`VERIFY_MAX` when unbounded); sizes
    that repeat are verified once."""
    steps: list[dict[str, int]] = []
    for step in range(3):
        sizes = {name: _size(low, high if high is not None else max(low, VERIFY_MAX), step)
                 for name, (low, high) in bounds.items()}
        if sizes not in steps:
            steps.append(sizes)
    return steps


def _size(low: int, high: int, step: int) -> int:
    if step == 0:
        return low
    if step == 2:
        return high
    return min(high, ((low + high) // 2) | 1)


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
    dimensions at their `dims` bounds, else as 1 and 8 (an image of 96 to 224 pixels a side is
    not offered 1x1): the decorator's (a bare shape for a one-input function; not for a
    SavedModel, which has no decorator) and the config's (always nested)."""
    def size(dim: int | str | None, largest: bool) -> int:
        if isinstance(dim, int):
            return dim
        bounds = (dims or {}).get(dim or "", SymbolicDim())
        return (bounds.max if bounds.max else max(8, bounds.min)) if largest else bounds.min

    entries = [[[size(dim, largest) for dim in shape] for shape in shapes] for largest in (False, True)]
    decorated = ", ".join(repr(tuple(entry[0])) if len(entry) == 1 else repr(tuple(map(tuple, entry)))
                          for entry in entries)
    config = f'in pyproject.toml, [tool.tfcheck.build] shapes = {{ "{label}" = {entries} }}'
    return f"@tfcheck.aot(shapes=[{decorated}]) or, {config}" if decorator else config
