"""The weights of a function built with its weights as inputs (docs/build.md, "Memory").

The tracing child writes them here, one at a time, for the compile child, which binds them as
constants of the imported module (`importer.bind_weights`); the compile child writes the compiled
`main`'s large constants to the artifact's weights file the same way (`pipeline.py`), in the format
the runtime reads (`tfcheck/runtime/weights.py`). Entries are named by index, never by a variable's
name (names come from user code). Neither TensorFlow nor TVM is imported here.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from tfcheck.runtime.weights import entry

# The name of the TFLite input that takes weight <i> (TVM's importer names `main`'s parameter after it).
WEIGHT_INPUT = "tfcheck_weight_"
# The variant folder's file of weights (absent when the weights were frozen into the graph).
WEIGHTS_FILE = "weights.npz"


def save_weights(values: Iterable[np.ndarray], path: Path) -> int:
    """Write each value as it comes (only one is ever held here), uncompressed; return the count."""
    count = 0
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for count, value in enumerate(values, start=1):
            with archive.open(f"{entry(count - 1)}.npy", "w", force_zip64=True) as stream:
                np.lib.format.write_array(stream, np.ascontiguousarray(value), allow_pickle=False)
    return count

