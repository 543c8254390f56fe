"""Call an `@tfcheck.aot` function: it runs its compiled artifact when the cache holds a fresh one.

    python examples/dispatch_mlp.py        # after `tfcheck build fixtures/aot/mlp.py`
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures" / "aot"))

import mlp  # noqa: E402  (the zoo module: a Keras MLP under @tfcheck.aot)


def main() -> None:
    x = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    compiled = mlp.mlp(x)
    print(f"mlp.mlp(x) ran on: {mlp.mlp.backend}")
    reference = mlp.mlp.tf_function(x).numpy()
    print(f"max |compiled - tf.function| = {np.abs(np.asarray(compiled) - reference).max():.2e}")


if __name__ == "__main__":
    main()
