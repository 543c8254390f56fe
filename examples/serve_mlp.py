"""Serve a compiled artifact in production: no TensorFlow, no compiler, no tracing.

    python examples/serve_mlp.py .tfcheck/demo      # a folder from `tfcheck build --out`
"""

from __future__ import annotations

import sys
import time

import numpy as np

import tfcheck


def main(folder: str) -> None:
    started = time.perf_counter()
    lib = tfcheck.load(folder)
    x = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    probabilities = lib.mlp(x)
    elapsed = time.perf_counter() - started
    print(f"lib.mlp(x): output {probabilities.dtype}{list(probabilities.shape)}, rows sum to "
          f"{probabilities.sum(axis=1).min():.4f}..{probabilities.sum(axis=1).max():.4f}")
    print(f"load + first call: {elapsed * 1000:.0f} ms; TensorFlow imported: {'tensorflow' in sys.modules}")
    try:
        lib.mlp(x[:3])
    except tfcheck.runtime.InputError as error:
        print(f"wrong input shape is refused: {error}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".tfcheck/demo")
