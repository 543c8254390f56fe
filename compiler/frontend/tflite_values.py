"""What the TFLite frontend's converter already knows about a tensor: a leaf that the importer and
its symbolic-shape extension both read (neither may import the other's internals)."""

from __future__ import annotations

from typing import Any

import numpy as np


def constant_value(converter: Any, tensor: Any) -> np.ndarray | None:
    """The value of a constant input tensor, or None when it is computed at run time."""
    if converter.has_expr(tensor.tensor_idx) or tensor.buffer is None or not tensor.buffer.DataLength():
        return None
    return converter.get_tensor_value(tensor)
