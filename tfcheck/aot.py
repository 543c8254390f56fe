"""The `@tfcheck.aot` decorator: mark a tf.function for ahead-of-time compilation.

Decorating imports nothing heavy (no TensorFlow, TVM or NumPy): the decorator only records the
build options, which `tfcheck build` reads, and wraps the function in `AotFunction`. Calling the
wrapper dispatches through `tfcheck.runtime.dispatch`, imported on the first call: the compiled
artifact runs when the cache holds a fresh one for this machine and these input shapes, the
tf.function otherwise.

Forms::

    @tfcheck.aot
    @tf.function(input_signature=[...])
    def f(x): ...

    @tfcheck.aot(name="classify", targets=["llvm"], shapes=[(1, 224, 224, 3), (8, 224, 224, 3)])
    @tf.function
    def classify(x): ...

    g = tfcheck.aot(tf.function(h))
"""

from __future__ import annotations

import functools
import sys
import types
import weakref
from collections.abc import Sequence
from typing import Any

Shape = tuple[int | None, ...]
ShapeEntry = tuple[Shape, ...]
Bounds = tuple[int, int | None]  # (min, max) of a symbolic dimension; max None: unbounded


class AotFunction:
    """A tf.function marked for AOT compilation; calling it runs the artifact or TensorFlow.

    Attributes:
        tf_function: the original tf.function, unchanged.
        aot_options: {"name": str, "targets": list[str] | None, "shapes": list[ShapeEntry] | None,
            "dims": dict[str, Bounds] | None}; `shapes` is normalized to one tuple of shapes (one per
            input) per artifact, `dims` to (min, max) per symbolic dimension.
        backend: what ran on the last call: "tensorflow", or "tvm:<device>" such as "tvm:cpu";
            None before the first call.
        name_given: whether `name=` was given; a method's artifact is otherwise named
            `<instance>_<method>` by the build.

    On a method (`@tfcheck.aot` above `@tf.function` in a class body) it is a descriptor, like the
    tf.function: `model.serve` is a wrapper bound to `model` (one per instance, kept while the
    instance lives), which runs the artifact only when `model` is the module-level instance the
    artifact was built from, and TensorFlow for any other instance.
    """

    def __init__(self, tf_function: Any, options: dict[str, Any], name_given: bool = False) -> None:
        # updated=() keeps the tf.function's internal __dict__ out of the wrapper.
        functools.update_wrapper(self, tf_function, updated=())
        self.tf_function = tf_function
        self.aot_options = options
        self.name_given = name_given
        self.backend: str | None = None
        self._dispatcher: Any = None
        self._bound: weakref.WeakKeyDictionary[Any, AotFunction] = weakref.WeakKeyDictionary()

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """The wrapper bound to `instance` (the same one on every access, so that its artifact is
        looked up once); the class's own wrapper when accessed on the class."""
        if instance is None:
            return self
        # Keyed weakly by the instance, as tf.function's own per-instance cache is (so an instance
        # must be hashable and weakly referenceable, as tf.function requires too).
        bound = self._bound.get(instance)
        if bound is None:
            bound = AotFunction(self.tf_function.__get__(instance, owner), self.aot_options, self.name_given)
            bound = self._bound.setdefault(instance, bound)
        return bound

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._dispatcher is None:
            from tfcheck.runtime.dispatch import Dispatcher

            self._dispatcher = Dispatcher(self)
        return self._dispatcher(args, kwargs)

    def __repr__(self) -> str:
        return f"<tfcheck.aot {self.aot_options['name']!r} wrapping {self.tf_function!r}>"


# `@tfcheck.aot(weights=...)`: how the build hands the function's variables to the converter.
WEIGHTS_MODES = ("auto", "inputs", "constants")


def aot(
    fn: Any = None,
    *,
    name: str | None = None,
    targets: Sequence[str] | None = None,
    shapes: Sequence[Any] | None = None,
    dims: Any = None,
    weights: str = "auto",
    values: Any = None,
) -> Any:
    """Mark a tf.function for `tfcheck build`; see the module docstring for the forms.

    Args:
        fn: the tf.function (when used as `@tfcheck.aot` or `tfcheck.aot(fn)`).
        name: name of the artifact (`lib.<name>`); defaults to the function's `__name__`.
        targets: build targets (for example ["llvm", "cuda"]); None lets the build choose.
        shapes: one entry per artifact; an entry is a tuple of shapes, one per input in signature
            order, or for a single-input function a plain shape such as (1, 224, 224, 3).
        dims: bounds of the signature's unknown (None) dimensions, which the build compiles into
            one artifact that takes any size within them: {"batch": (1, 64)}. Axis 0 of every
            input is "batch"; any other axis k of input `name` is "name_k". (min, None) or a
            missing name: no upper bound. See docs/build.md, "Unknown dimensions".
        weights: "inputs" converts the function with its variables as inputs and hands their
            values to the compiler apart (the build's memory stays near the weights' size),
            "constants" freezes them into the graph first, "auto" lifts them above 64 MB. See
            docs/build.md, "Memory".
        values: the values the build's test inputs are drawn from, per input name, low included,
            high not: {"token_type_ids": (0, 2)}. By default floats are normal, ints 1 to 7, and
            ints that index a table (a tf.gather, an embedding) 0 to its rows - 1. See
            docs/build.md, "Test inputs".
    """
    if weights not in WEIGHTS_MODES:
        raise ValueError(f"weights={weights!r}: expected one of {', '.join(map(repr, WEIGHTS_MODES))}")
    options = {
        "name": name,
        "targets": _normalize_targets(targets),
        "shapes": normalize_shapes(shapes),
        "dims": normalize_dims(dims),
        "weights": weights,
        "values": normalize_values(values),
    }
    if fn is None:
        return functools.partial(_wrap, options=options)
    return _wrap(fn, options)


def _wrap(fn: Any, options: dict[str, Any]) -> AotFunction:
    """Check that `fn` is a tf.function and wrap it."""
    if isinstance(fn, AotFunction):
        raise TypeError(f"{fn!r} is already decorated with @tfcheck.aot")
    if not is_tf_function(fn):
        what = getattr(fn, "__qualname__", None) or type(fn).__name__
        raise TypeError(
            f"@tfcheck.aot needs a tf.function, got {what!r} ({type(fn).__name__}): "
            "put @tfcheck.aot above @tf.function"
        )
    return AotFunction(fn, {**options, "name": options["name"] or fn.__name__}, name_given=options["name"] is not None)


def is_tf_function(fn: Any) -> bool:
    """True for a `tf.function` object, checked without importing TensorFlow."""
    module = type(fn).__module__ or ""
    return (
        module.startswith("tensorflow.")
        and hasattr(fn, "python_function")
        and hasattr(fn, "get_concrete_function")
    )


def normalize_shapes(shapes: Sequence[Any] | None) -> list[ShapeEntry] | None:
    """Turn the `shapes=` argument into a list of entries, each a tuple of per-input shapes."""
    if shapes is None:
        return None
    if isinstance(shapes, (str, bytes)) or not isinstance(shapes, Sequence):
        raise TypeError(f"shapes= must be a list of shape entries, got {shapes!r}")
    return [_normalize_entry(entry) for entry in shapes]


def _normalize_entry(entry: Any) -> ShapeEntry:
    """A plain shape becomes a one-input entry; a tuple of shapes stays as it is."""
    if _is_shape(entry):
        return (tuple(entry),)
    if isinstance(entry, Sequence) and all(_is_shape(shape) for shape in entry):
        return tuple(tuple(shape) for shape in entry)
    raise TypeError(
        f"shapes= entry {entry!r} is neither a shape like (1, 224, 224, 3) "
        "nor a tuple of shapes, one per input"
    )


def _is_shape(value: Any) -> bool:
    """A sequence of ints or None (the empty tuple is a scalar's shape)."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and all(
        dim is None or (isinstance(dim, int) and not isinstance(dim, bool) and dim >= 0)
        for dim in value
    )


def normalize_dims(dims: Any) -> dict[str, Bounds] | None:
    """`dims=` as {name: (min, max)}; ValueError saying what is wrong (the build, which reads
    the decorator's literal without importing, and the config name the file and the function)."""
    if dims is None:
        return None
    if not isinstance(dims, dict) or not all(isinstance(name, str) and name for name in dims):
        raise ValueError(f'dims= must be a dict of dimension name -> (min, max), such as {{"batch": (1, 64)}}, '
                         f"got {dims!r}")
    return {name: _bounds(name, value) for name, value in dims.items()}


def normalize_values(values: Any) -> dict[str, tuple[float, float]] | None:
    """`values=` as {input name: (low, high)} with low < high; ValueError saying what is wrong."""
    if values is None:
        return None
    if not isinstance(values, dict) or not all(isinstance(name, str) and name for name in values):
        raise ValueError(f'values= must be a dict of input name -> (low, high), such as {{"token_type_ids": (0, 2)}}, '
                         f"got {values!r}")
    normalized = {}
    for name, value in values.items():
        pair = tuple(value) if isinstance(value, (list, tuple)) else ()
        if len(pair) != 2 or not all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in pair) \
                or not pair[0] < pair[1]:
            raise ValueError(f"values= entry {name!r}: {value!r} is not (low, high) with low < high (high excluded)")
        normalized[name] = (pair[0], pair[1])
    return normalized


def _bounds(name: str, value: Any) -> Bounds:
    """(min, max) with 1 <= min <= max, or max None for no upper bound."""
    pair = tuple(value) if isinstance(value, (list, tuple)) else None
    ints = pair is not None and len(pair) == 2 and all(
        item is None or (isinstance(item, int) and not isinstance(item, bool)) for item in pair)
    if not ints or pair[0] is None or pair[0] < 1 or (pair[1] is not None and pair[1] < pair[0]):
        raise ValueError(f"dims= entry {name!r}: {value!r} is not (min, max) with 1 <= min <= max "
                         "(max None for no upper bound)")
    return (pair[0], pair[1])


def _normalize_targets(targets: Sequence[str] | None) -> list[str] | None:
    if targets is None:
        return None
    if isinstance(targets, str):
        return [targets]
    return list(targets)


class _CallableModule(types.ModuleType):
    """`import tfcheck.aot` binds the module to `tfcheck.aot`, shadowing the decorator that
    `tfcheck/__init__.py` exposes under the same name; making the module callable keeps
    `@tfcheck.aot` working whichever way it was imported first."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return aot(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

