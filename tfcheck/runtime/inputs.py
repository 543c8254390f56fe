"""Turning call arguments into arrays and checking them against an artifact's input specs.

Arrays are taken without a copy where the memory can be used as it is (NumPy arrays, objects with
`__dlpack__` or `__array__` on the CPU); a copy is made only to get C-contiguous, 64-byte aligned
memory, which TVM's generated code may assume, or for a read-only NumPy array (which NumPy will
not export over DLPack).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tfcheck.runtime.errors import InputError
from tfcheck.runtime.manifest import SymbolicDim, TensorSpec
from tfcheck.runtime.structure import flatten_value, leaf_count

ALIGNMENT = 64


def flat_inputs(function: str, arguments: Sequence[Mapping[str, Any]], specs: Sequence[TensorSpec],
                args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    """The call's tensors in the artifact's input order: arguments bound by position and by
    name, then each flattened by its recorded structure (`runtime/structure.py`)."""
    if kwargs or len(args) != len(arguments):
        values = bind_arguments(function, [argument["name"] for argument in arguments],
                                _describe_arguments(arguments, specs), args, kwargs)
    else:  # all given by position: nothing to bind, and no message to describe them in
        values = list(args)
    return [leaf for argument, value in zip(arguments, values)
            for leaf in flatten_value(function, dict(argument), value, argument["name"])]


def _describe_arguments(arguments: Sequence[Mapping[str, Any]], specs: Sequence[TensorSpec]) -> list[str]:
    """Each argument as its tensors' specs: `x: float32[1, 4]`, or for a dict
    `features['dense']: float32[2, 4], features['ids']: int32[2, 3]`."""
    described, start = [], 0
    for argument in arguments:
        count = leaf_count(dict(argument))
        described.append(", ".join(map(str, specs[start:start + count])))
        start += count
    return described


def bind_arguments(function: str, names: Sequence[str], described: Sequence[str], args: Sequence[Any],
                   kwargs: Mapping[str, Any]) -> list[Any]:
    """Order positional and keyword arguments like the artifact's arguments; check their number."""
    expected = ", ".join(described)
    if len(args) > len(names):
        raise InputError(f"{function}() takes {len(names)} input(s) ({expected}), "
                         f"got {len(args)} positional arguments")
    bound: list[Any] = list(args)
    unknown = sorted(set(kwargs) - set(names))
    if unknown:
        raise InputError(f"{function}() got unexpected keyword argument(s) {', '.join(unknown)}; "
                         f"inputs are ({expected})")
    for name, description in list(zip(names, described))[len(args):]:
        if name not in kwargs:
            raise InputError(f"{function}() is missing input {description} (inputs are ({expected}))")
        bound.append(kwargs[name])
    duplicated = [name for name in names[:len(args)] if name in kwargs]
    if duplicated:
        raise InputError(f"{function}() got multiple values for input {duplicated[0]!r}")
    return bound


def as_array(value: Any) -> np.ndarray:
    """A NumPy view of `value` without a copy where possible (DLPack first, then __array__)."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (BufferError, TypeError, RuntimeError, ValueError):
            pass  # on another device or an unsupported dtype: __array__ below copies
    return np.asarray(value)


def shape_problem(function: str, specs: Sequence[TensorSpec], dims: Mapping[str, SymbolicDim],
                  shapes: Sequence[tuple[int, ...]]) -> str | None:
    """Why the call's input shapes do not fit an artifact's specs, or None when they do.

    A named (symbolic) dimension takes any size within its bounds, the same size wherever it
    appears (`batch` of two inputs); the library itself would refuse other sizes less clearly.
    """
    bound: dict[str, tuple[int, str]] = {}
    for spec, shape in zip(specs, shapes):
        if shape == spec.shape:  # static and equal: nothing more to check
            continue
        if len(shape) != len(spec.shape) or any(isinstance(want, int) and want != got
                                                for want, got in zip(spec.shape, shape)):
            return _wrong_shape(function, spec, shape)
        for axis, (want, got) in enumerate(zip(spec.shape, shape)):
            if not isinstance(want, str):
                continue
            if not dims[want].accepts(got):
                return (f"{_wrong_shape(function, spec, shape)}: dimension {axis} ({want}) is {got}, "
                        f"the artifact takes {dims[want].describe()}{_nearest(dims[want], got)}")
            size, where = bound.setdefault(want, (got, _quoted(spec.name)))
            if size != got:
                return (f"{_wrong_shape(function, spec, shape)}: dimension {axis} ({want}) is {got}, "
                        f"but {want} of {where} is {size}")
    return None


def _nearest(dim: SymbolicDim, size: int) -> str:
    """`(the nearest: 144, 160)` for a size between two of a stepped dimension's (the build found
    that TensorFlow runs the function only at those); nothing otherwise."""
    inside = dim.step > 1 and dim.min < size and (dim.max is None or size < dim.max)
    nearest = dim.nearest(size) if inside else []
    return f" (the nearest: {', '.join(map(str, nearest))})" if nearest else ""


def _wrong_shape(function: str, spec: TensorSpec, shape: tuple[int, ...]) -> str:
    return f"{function}(): argument {_quoted(spec.name)} has shape {tuple(shape)}, expected {spec}"


def check_array(function: str, spec: TensorSpec, value: Any, array: np.ndarray) -> Any:
    """Check the dtype against `spec` (the shape is `shape_problem`'s); return what to hand TVM
    (see `for_tvm`).

    One rule for every input, arrays and Python numbers and lists alike (read as `np.asarray`
    reads them: floats as float64, integers as int64): its dtype must be the spec's. Nothing is
    cast, since a silent cast can lose precision (docs/runtime.md, "Inputs").
    """
    if array.dtype != _dtype(spec.dtype):
        raise InputError(f"{function}(): argument {_quoted(spec.name)} has dtype {array.dtype}, "
                         f"expected {spec}; inputs are not cast (a cast can lose precision): "
                         f"pass np.asarray(value, dtype=np.{spec.dtype})")
    return for_tvm(value, array)


@functools.cache
def _dtype(name: str) -> np.dtype:
    return np.dtype(name)


def _quoted(name: str) -> str:
    """`'images'` for a plain name; a nested path such as `features['ids']` as it is."""
    return name if "[" in name or "." in name else repr(name)


def for_tvm(value: Any, array: np.ndarray) -> Any:
    """The input as TVM will take it over DLPack, without a copy when its memory is C-contiguous
    and 64-byte aligned: `array` itself, or for a read-only view of a CPU DLPack producer (such
    as a TensorFlow tensor, which NumPy cannot export again) the producer. Else an aligned copy."""
    if array.flags.c_contiguous and data_address(array) % ALIGNMENT == 0:
        if array.flags.writeable:
            return array
        if not isinstance(value, np.ndarray) and _on_cpu(value):
            return value
    return aligned(array)


def data_address(array: np.ndarray) -> int:
    """The address of an array's memory: a ctypes view of the buffer of a writable C-contiguous
    array costs half of `array.ctypes.data`, which other arrays (and empty ones) take."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):
        return array.ctypes.data


def lendable(array: np.ndarray) -> tuple[np.ndarray, int]:
    """`array` and the address of its memory when the generated code may read (and write) it in
    place: C-contiguous, writable, native byte order, 64-byte aligned; else a copy that is, and
    its address. One ctypes view answers the first two and gives the address (it refuses other
    memory), where the flags and `for_tvm` cost a NumPy call each (docs/runtime.md, "Per-call
    overhead")."""
    if array.dtype.isnative:
        try:
            address = ctypes.addressof(ctypes.c_char.from_buffer(array))
        except (TypeError, ValueError):  # read-only, not C-contiguous, or empty
            address = -1
        if address % ALIGNMENT == 0:
            return array, address
    copy = aligned(array.astype(array.dtype.newbyteorder("="), copy=False))
    return copy, data_address(copy)


def aligned(array: np.ndarray) -> np.ndarray:
    """A writable, C-contiguous, 64-byte aligned copy of `array`."""
    buffer = np.empty(array.nbytes + ALIGNMENT, dtype=np.uint8)
    offset = -buffer.ctypes.data % ALIGNMENT
    copy = buffer[offset:offset + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def _on_cpu(value: Any) -> bool:
    """Whether `value` exports CPU memory over DLPack (device type 1 is kDLCPU)."""
    try:
        return hasattr(value, "__dlpack__") and value.__dlpack_device__()[0] == 1
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return False
