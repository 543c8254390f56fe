"""TFLite's NON_MAX_SUPPRESSION_V4 and V5 with their padding as TFLite defines it: zeros.

Both return `max_output_size` selected indices (V5: and scores) and the number selected, `n`;
TFLite's kernel (tensorflow/lite/kernels/non_max_suppression.cc) writes zeros past the first `n`,
and TensorFlow's padded suppression (`pad_to_max_output_size=True`, what `padded_selections.py`
converts a hand-padded selection to) pads with zeros too. TVM's converter left its own padding
there: index -1 (V4 and V5), and for V4 the score of box 0 (V5, soft or hard: zero). Code that
gathers boxes at the padded indices then read the last box where TensorFlow reads box 0
(zzh8829/yolov3-tf2's `yolo_nms`: every padded box wrong). Here the entries past `n` are set to
zero after TVM's conversion.

Soft-NMS (V5 with `soft_nms_sigma > 0`): TensorFlow's kernel
(tensorflow/core/kernels/image/non_max_suppression_op.cc) only decays the scores then, and
suppresses no box outright whatever its overlap (`iou_threshold` changes nothing: the same
selection at 0.5 and 1.0); TFLite's kernel, and TVM's converter after it, also drop every box whose
overlap reaches `iou_threshold`. With more candidates than `max_output_size` they kept other boxes
than TensorFlow from the 80th on (300 random boxes). TVM's conversion is given an overlap threshold
no IoU reaches (`_NO_OVERLAP_REACHES`) for a soft suppression, which is TensorFlow's rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

# An IoU threshold above any IoU (they lie in [0, 1]): no box is suppressed outright.
_NO_OVERLAP_REACHES = float(np.nextafter(np.float32(1.0), np.float32(2.0)))


def zero_padded_suppression(converter: Any, convert: Callable[[Any], Any], op: Any) -> Any:
    """TVM's conversion of a NON_MAX_SUPPRESSION_V4/V5 `op` (`convert`), with every selection
    output (all but the last, the count) zero past the count."""
    from tvm import relax

    with _soft_without_hard_suppression(converter, op):
        converted = convert(op)
    *selections, count = converted.fields
    maximum = int(converter.get_tensor_value(converter.get_input_tensors(op)[2]))
    kept = relax.op.less(relax.op.arange(0, maximum, 1, "int32"), relax.op.astype(count, "int32"))
    zeroed = [relax.op.where(kept, selection, relax.op.zeros_like(selection)) for selection in selections]
    return relax.Tuple([*zeroed, count])


@contextmanager
def _soft_without_hard_suppression(converter: Any, op: Any) -> Iterator[None]:
    """While TVM converts `op`, a V5 soft suppression's IoU threshold reads as `_NO_OVERLAP_REACHES`.
    The converter reads its inputs with `get_input_tensors` and their values with
    `get_tensor_value`, both wrapped on the instance meanwhile: the threshold's input becomes a
    stand-in whose value is that (by position: TensorFlow's converter gives equal constants one
    tensor, and the score threshold and sigma are often the same 0.5)."""
    inputs = converter.get_input_tensors(op)
    soft = len(inputs) == 6 and float(np.asarray(converter.get_tensor_value(inputs[5])).reshape(-1)[0]) > 0.0
    if not soft:
        yield
        return
    read_inputs, read_value, stand_in = converter.get_input_tensors, converter.get_tensor_value, object()

    def input_tensors(operator: Any) -> list[Any]:
        found = read_inputs(operator)
        return [*found[:3], stand_in, *found[4:]] if operator is op else found

    def value(tensor: Any, is_sparse: bool = False) -> Any:
        return np.array(_NO_OVERLAP_REACHES, dtype=np.float32) if tensor is stand_in else read_value(tensor, is_sparse)

    converter.get_input_tensors, converter.get_tensor_value = input_tensors, value
    try:
        yield
    finally:
        del converter.get_input_tensors, converter.get_tensor_value
