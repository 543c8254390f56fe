"""What a function's top k does to the order of its results, read from the flatbuffer, for the
message of a build whose verification failed.

TensorFlow's CPU kernel for `tf.math.top_k` (tensorflow/core/kernels/topk_op.cc, TensorFlow 2.21)
returns the k largest sorted, largest first, ties to the lower index, whenever `sorted=True`, and
also with `sorted=False` when k is 1 or the whole last axis (it sorts the axis then). Only with
`sorted=False` and k below the axis' size does it return them in the order its heap leaves them:
neither sorted nor in the input's order, and nothing any other kernel reproduces. TFLite's TOPK_V2,
and TVM's import of it, always sort, ties to the lower index: the artifact equals TensorFlow
wherever TensorFlow defines the order (tests/compiler/test_top_k_order.py), and the message blames
`sorted=False` only where it can be the cause. TFLite keeps no `sorted` flag, so a top k of fewer
than the axis is named with both cases. srihari-humbarwadi/retinanet-tensorflow2.x's per-class
filter takes the top 5000 of 76725 anchors with `sorted=False`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TopK:
    """One TOPK_V2: the TensorFlow node it came from, k, and the size of the axis it takes them
    from (None where unknown until run time)."""

    node: str
    k: int | None
    size: int | None

    @property
    def order_defined(self) -> bool:
        """Whether TensorFlow returns these k in one order whatever `sorted` says (k of 1 or all)."""
        return self.k is not None and (self.k == 1 or self.k == self.size)


def top_ks(model: Path) -> list[TopK]:
    """Every TOPK_V2 of the flatbuffer at `model`, in every subgraph."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    flatbuffer = tflite.Model.GetRootAsModel(model.read_bytes(), 0)
    found = []
    for s in range(flatbuffer.SubgraphsLength()):
        subgraph = flatbuffer.Subgraphs(s)
        for o in range(subgraph.OperatorsLength()):
            operator = subgraph.Operators(o)
            code = flatbuffer.OperatorCodes(operator.OpcodeIndex())
            if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == BuiltinOperator.TOPK_V2:
                found.append(_top_k(flatbuffer, subgraph, operator))
    return found


def _top_k(flatbuffer: Any, subgraph: Any, operator: Any) -> TopK:
    values, k = (subgraph.Tensors(int(index)) for index in operator.InputsAsNumpy()[:2])
    output = subgraph.Tensors(int(operator.OutputsAsNumpy()[0]))
    shape = values.ShapeSignatureAsNumpy() if values.ShapeSignatureLength() else values.ShapeAsNumpy()
    size = int(shape[-1]) if len(shape) and shape[-1] >= 0 else None
    data = flatbuffer.Buffers(k.Buffer()).DataAsNumpy() if k.Buffer() else 0
    counts = np.frombuffer(data.tobytes(), dtype="<i4") if isinstance(data, np.ndarray) and data.size == 4 else None
    return TopK(output.Name().decode().split(";")[0], int(counts[0]) if counts is not None else None, size)


def order_hint(found: list[TopK]) -> str:
    """The words on a failed verification of a function with these top ks; `` without any."""
    if not found:
        return ""
    unsorted = next((top for top in found if not top.order_defined), None)
    if unsorted is None:
        top = found[0]
        return (f" (the function takes the top {top.k} of {top.size} (TensorFlow node '{top.node}'), in an order "
                "TensorFlow defines, largest first with ties to the lower index, and the artifact keeps: not the "
                "cause; values within rounding of each other may trade places, and what is gathered at them with them)")
    of = f"the top {unsorted.k if unsorted.k is not None else 'k'} of {unsorted.size if unsorted.size else 'the last axis'}"
    return (f" (the function takes {of} (TensorFlow node '{unsorted.node}'): the artifact returns them sorted, "
            "largest first, ties to the lower index, as tf.math.top_k does with sorted=True; with sorted=False "
            "TensorFlow's kernel returns fewer than the whole axis in the order its heap leaves them, neither "
            "sorted nor in the input's order, which no compiled kernel reproduces, so pass sorted=True; values "
            "within rounding of each other may still trade places, and what is gathered at them with them)")
