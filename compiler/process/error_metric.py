"""How far a backend's outputs lie from TensorFlow's, as one figure that means the same everywhere.

The figure is the largest absolute difference relative to the output's scale, max|a - b| / max|b|.
An element-wise relative error, max(|a - b| / |b|), blows up wherever an output is near zero: an
image-to-image generator whose largest difference is 3e-6 of its outputs' range was reported at
1.3e-2, which made a correct build look suspect (issue 42). Verification (`build/verify.py`) and
`tfcheck bench` (`bench/latency.py`) report this one figure, so their numbers compare.
"""

from __future__ import annotations

import numpy as np


def scaled_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max|actual - expected| / max|expected|, over one output of the same shape; where every
    expected value is zero the scale is taken as 1 (the figure is then the absolute difference),
    and an empty output differs by nothing."""
    if not expected.size:
        return 0.0
    wanted = expected.astype(np.float64)
    difference = float(np.abs(actual.astype(np.float64) - wanted).max())
    scale = float(np.abs(wanted).max())
    return difference / scale if scale > 0 else difference
