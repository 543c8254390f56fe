"""End to end: `tfcheck build` a zoo model, then run it (a) in a fresh process without TensorFlow
through `tfcheck.load` and (b) through `@tfcheck.aot` dispatch, against TensorFlow's outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
ZOO = REPO / "fixtures" / "aot"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tensorflow")]


def _python(script: str, cwd: Path, **env: str) -> str:
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=cwd,
                               capture_output=True, text=True, timeout=600,
                               env={**os.environ, **env})
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLP of the zoo, built with the real command into a private cache and --out folder."""
    root = tmp_path_factory.mktemp("e2e")
    completed = subprocess.run(
        [sys.executable, "-m", "tfcheck", "build", str(ZOO / "mlp.py"), "--cache-dir",
         str(root / "cache"), "--out", str(root / "out")],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return root


def test_artifact_without_tensorflow_and_dispatch_match_tensorflow(built: Path) -> None:
    x = np.random.default_rng(7).standard_normal((64, 64)).astype(np.float32)
    np.save(built / "x.npy", x)
    # TensorFlow's answer and the dispatching wrapper's, with the weights the build had: it seeds
    # every RNG with 0 before importing the module, and so does this process.
    report = json.loads(_python(f"""
        import json, sys, warnings
        import numpy as np, keras
        keras.utils.set_random_seed(0)
        sys.path.insert(0, {str(ZOO)!r})
        import mlp
        x = np.load({str(built / "x.npy")!r})
        np.save({str(built / "tf.npy")!r}, mlp.mlp.tf_function(x).numpy())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dispatched = mlp.mlp(x).numpy()
            backend = mlp.mlp.backend
            mlp.model.layers[0].kernel.assign(mlp.model.layers[0].kernel * 2)
            mlp.mlp(x)
        np.save({str(built / "dispatched.npy")!r}, dispatched)
        print(json.dumps({{"backend": backend, "after_change": mlp.mlp.backend,
                          "warnings": [str(w.message) for w in caught]}}))
    """, REPO, TFCHECK_ARTIFACTS=str(built / "cache")).splitlines()[-1])
    reference = np.load(built / "tf.npy")
    assert report["backend"] == "tvm:cpu"
    np.testing.assert_allclose(np.load(built / "dispatched.npy"), reference, rtol=1e-4, atol=1e-6)
    assert report["after_change"] == "tensorflow"
    assert any("variables it captures changed" in w for w in report["warnings"])

    fresh = json.loads(_python(f"""
        import json, sys
        import numpy as np
        import tfcheck
        lib = tfcheck.load({str(built / "out")!r})
        y = lib.mlp(np.load({str(built / "x.npy")!r}))
        np.save({str(built / "aot.npy")!r}, y)
        print(json.dumps({{"tensorflow": "tensorflow" in sys.modules,
                          "compiler": any(m.startswith("tfcheck.compiler") for m in sys.modules)}}))
    """, REPO).splitlines()[-1])
    assert fresh == {"tensorflow": False, "compiler": False}
    np.testing.assert_allclose(np.load(built / "aot.npy"), reference, rtol=1e-4, atol=1e-6)


def test_run_command_on_the_built_artifact(built: Path) -> None:
    x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    np.save(built / "x3.npy", x)
    out = built / "y3.npz"
    completed = subprocess.run(
        [sys.executable, "-m", "tfcheck", "run", str(built / "out" / "mlp"), "-i",
         str(built / "x3.npy"), "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    probabilities = np.load(out)["output_0"]
    assert probabilities.shape == (64, 10)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
