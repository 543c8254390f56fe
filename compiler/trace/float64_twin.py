"""Functions computed in float64, converted as their float32 twin (docs/build.md, "Float64 functions").

TFLite's builtins have no float64 kernels, so TensorFlow's converter refuses a model made after
`tf.keras.backend.set_floatx('float64')` (marload/DeepRL-TensorFlow2's PPO), although TVM computes
float64 as well as float32. A function whose every floating-point tensor is float64
(`computes_in_float64`) is converted as its twin with every float64 made float32 (`twin_graph`),
with its weights as inputs; the importer reads the twin's float32 tensors as float64
(`importer.import_tflite(float64=True)`) and binds the weights' float64 values, so nothing of the
function is computed or stored in float32. A constant that float32 cannot hold exactly (`0.1`,
an epsilon) becomes an input of the twin as well, and its float64 value is bound like a weight's.

A function that mixes float64 with float32 (or float16) is not twinned: which of the twin's float32
tensors stood for which dtype would be lost, so the converter's refusal stands, with its advice.
The TensorFlow module comes in as `tf` (only `bridge.py` imports it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

# Floating-point dtypes besides float64 whose presence rules a twin out.
_OTHER_FLOATS = ("float32", "float16", "bfloat16", "complex64", "complex128")


def computes_in_float64(tf: Any, graph_def: Any) -> bool:
    """Whether the graph (and its library's functions) has float64 tensors and no other
    floating-point dtype: the functions a float32 twin converts exactly."""
    names = {tf.as_dtype(dtype).name for dtype in _dtypes(graph_def)}
    return "float64" in names and not names.intersection(_OTHER_FLOATS)


def _dtypes(graph_def: Any) -> Iterator[int]:
    """Every dtype the graph's nodes and functions name: attributes, constants, signatures."""
    for node in _all_nodes(graph_def):
        for attr in node.attr.values():
            yield from ([attr.type] if attr.type else [])
            yield from attr.list.type
            yield from ([attr.tensor.dtype] if attr.HasField("tensor") else [])
    for function in graph_def.library.function:
        yield from (arg.type for arg in [*function.signature.input_arg, *function.signature.output_arg] if arg.type)


def _all_nodes(graph_def: Any) -> Iterator[Any]:
    yield from graph_def.node
    for function in graph_def.library.function:
        yield from function.node_def


def twin_graph(tf: Any, graph_def: Any) -> tuple[Any, list[tuple[str, np.ndarray]]]:
    """A copy of `graph_def` with every float64 made float32, and the top-level float64 constants
    that float32 cannot hold exactly, by node name, with their values: the caller makes each an
    input (an Identity of a new placeholder). Such a constant inside a library function cannot be
    lifted, and is refused by name."""
    twin = type(graph_def)()
    twin.CopyFrom(graph_def)
    inexact = [(node.name, value) for node in twin.node if (value := _inexact_constant(tf, node)) is not None]
    for function in twin.library.function:
        for node in function.node_def:
            if _inexact_constant(tf, node) is not None:
                raise TwinRefused(f"constant {node.name!r} of function {function.signature.name!r} is a float64 "
                                  "value that float32 cannot hold exactly, and a constant inside a function cannot "
                                  "become an input")
    lifted = {name for name, _ in inexact}
    del twin.node[:]
    twin.node.extend(node for node in graph_def.node if node.name not in lifted)
    for node in _all_nodes(twin):
        _retype_attributes(tf, node)
    for function in twin.library.function:
        for arg in [*function.signature.input_arg, *function.signature.output_arg]:
            arg.type = _float32_for_float64(tf, arg.type)
    return twin, inexact


class TwinRefused(Exception):
    """The function computes in float64 but cannot be converted as a float32 twin."""


def _inexact_constant(tf: Any, node: Any) -> np.ndarray | None:
    """A float64 Const's value, when float32 rounds any of its elements; else None."""
    if node.op != "Const" or node.attr["dtype"].type != tf.float64.as_datatype_enum:
        return None
    value = tf.make_ndarray(node.attr["value"].tensor)
    with np.errstate(over="ignore"):
        exact = np.array_equal(value.astype(np.float32).astype(np.float64), value, equal_nan=True)
    return None if exact else value


def _retype_attributes(tf: Any, node: Any) -> None:
    """The node's float64 dtypes (its own, in lists, of its constant's value) as float32."""
    for attr in node.attr.values():
        if attr.type:
            attr.type = _float32_for_float64(tf, attr.type)
        if attr.list.type:
            attr.list.type[:] = [_float32_for_float64(tf, dtype) for dtype in attr.list.type]
        if attr.HasField("tensor") and attr.tensor.dtype == tf.float64.as_datatype_enum:
            attr.tensor.CopyFrom(tf.make_tensor_proto(tf.make_ndarray(attr.tensor).astype(np.float32)))


def _float32_for_float64(tf: Any, dtype: int) -> int:
    return tf.float32.as_datatype_enum if dtype == tf.float64.as_datatype_enum else dtype
