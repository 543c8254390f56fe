"""Run a converted TFLite flatbuffer on NumPy inputs: in TFLite's interpreter, what the rewrites before
conversion are checked against (the converter's own output, before TVM sees it), and through tfcheck's
importer and TVM, what the importer fixes are checked with."""

from __future__ import annotations

import tempfile
from pathlib import Path

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


def run_tvm(flatbuffer: bytes, *inputs: np.ndarray) -> list[np.ndarray]:
    """Every output of the flatbuffer imported by tfcheck's importer, compiled for the CPU and run on `inputs`."""
    import tvm
    from tvm import relax

    from tfcheck.compiler.frontend.importer import import_tflite

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.tflite"
        path.write_bytes(flatbuffer)
        executable = tvm.compile(import_tflite(path), target="llvm")
    outputs = relax.VirtualMachine(executable, tvm.cpu())["main"](*[tvm.runtime.tensor(value) for value in inputs])
    return [output.numpy() for output in outputs]
