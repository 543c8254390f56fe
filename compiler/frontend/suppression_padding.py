"""TFLite's NON_MAX_SUPPRESSION_V4 and V5 with their padding as TFLite defines it: zeros.

Both return `max_output_size` selected indices (V5: and scores) and the number selected, `n`;
TFLite's kernel (tensorflow/lite/kernels/non_max_suppression.cc) writes zeros past the first `n`,
and TensorFlow's padded suppression (`pad_to_max_output_size=True`, what `padded_selections.py`
converts a hand-padded selection to) pads with zeros too. TVM's converter left its own padding
there: index -1 (V4 and V5), and for V4 the score of box 0 (V5, soft or hard: zero). Code that
gathers boxes at the padded indices then read the last box where TensorFlow reads box 0
(zzh8829/yolov3-tf2's `yolo_nms`: every padded box wrong). Here the entries past `n` are set to
zero after TVM's conversion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def zero_padded_suppression(converter: Any, convert: Callable[[Any], Any], op: Any) -> Any:
    """TVM's conversion of a NON_MAX_SUPPRESSION_V4/V5 `op` (`convert`), with every selection
    output (all but the last, the count) zero past the count."""
    from tvm import relax

    converted = convert(op)
    *selections, count = converted.fields
    maximum = int(converter.get_tensor_value(converter.get_input_tensors(op)[2]))
    kept = relax.op.less(relax.op.arange(0, maximum, 1, "int32"), relax.op.astype(count, "int32"))
    zeroed = [relax.op.where(kept, selection, relax.op.zeros_like(selection)) for selection in selections]
    return relax.Tuple([*zeroed, count])
