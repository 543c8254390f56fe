"""Run a converted TFLite flatbuffer on NumPy inputs: what the rewrites before conversion are checked
against (the converter's own output, before TVM sees it)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def run_tflite(flatbuffer: bytes, *inputs: np.ndarray) -> np.ndarray:
    """The first output of the flatbuffer's model on `inputs`, each input resized to its array's shape."""
    interpreter = tf.lite.Interpreter(model_content=flatbuffer)
    details = interpreter.get_input_details()
    for detail, value in zip(details, inputs):
        interpreter.resize_tensor_input(detail["index"], list(value.shape))
    interpreter.allocate_tensors()
    for detail, value in zip(details, inputs):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
