"""A traced variant's reference inputs and outputs, the file the tracing child leaves for the compile child.

`io.npz` (and `io-<i>.npz`, one per verified size of a symbolic build) holds the generated inputs
(`input_<j>`), TensorFlow's outputs for them (`output_<k>`), TFLite's (`tflite_output_<k>`, when its
interpreter ran the model), which tell verification how far float32 rounding moves them, and for a
symbolic build the sizes (`sizes`, JSON). The tracing child writes it (`save_io`); the compile child
verifies the library against it (`compiler/build/verify.py`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

INPUT = "input_"
OUTPUT = "output_"
TFLITE_OUTPUT = "tflite_output_"
SIZES = "sizes"


def save_io(path: Path, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
            tflite: Sequence[np.ndarray], sizes: dict[str, int] | None = None) -> None:
    """Write one set of inputs with TensorFlow's and TFLite's outputs for them (and the sizes of
    the symbolic dimensions they were made at)."""
    np.savez(path, **{f"{INPUT}{i}": array for i, array in enumerate(inputs)},
             **{f"{OUTPUT}{i}": array for i, array in enumerate(outputs)},
             **{f"{TFLITE_OUTPUT}{i}": array for i, array in enumerate(tflite)},
             **({SIZES: np.array(json.dumps(sizes))} if sizes is not None else {}))
