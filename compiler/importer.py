"""TFLite flatbuffer -> TVM Relax module, and which operators TVM's TFLite frontend can import.

The coverage report reads the frontend's own converter table, so it is exact for the installed
TVM and says, before anything is compiled, which operators (and so which TensorFlow nodes) would
stop the import.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any


@functools.cache
def supported_tflite_ops() -> frozenset[str]:
    """Names of the TFLite builtins that `tvm.relax.frontend.tflite` converts.

    The converter fills its table in `__init__` without touching the model, so an instance made
    without one exposes the table of the installed TVM.
    """
    from tvm.relax.frontend.tflite.tflite_frontend import OperatorConverter

    return frozenset(OperatorConverter(None, None, None, None).convert_map)


def unimportable(operators: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The operators of a `tflite_operators` report that TVM cannot import (custom ops included)."""
    supported = supported_tflite_ops()
    return [entry for entry in operators if entry["op"] not in supported]


def import_tflite(path: Path) -> Any:
    """Parse the flatbuffer and import it as a Relax IRModule whose `main` takes the inputs in
    signature order and returns the outputs in the concrete function's order."""
    import tflite
    from tvm.relax.frontend.tflite import from_tflite

    return from_tflite(tflite.Model.GetRootAsModel(path.read_bytes(), 0))
