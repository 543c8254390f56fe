"""A function built with its weights as inputs keeps its compiled `main`'s large constants out of
`lib.so`, in the artifact's `weights.npz` (docs/build.md, "Memory"; docs/artifact-format.md,
"Weights file"): the library holds code only, the runtime checks and loads the file once, without
TensorFlow, and names the artifact when the file is missing or corrupt.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tfcheck.runtime import ArtifactError

REPO = Path(__file__).resolve().parents[2]

# 2 MB of weights: a Dense 512 -> 512 and a Dense 512 -> 512 (biases of 2 kB stay in the library).
WIDE = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((512,)), keras.layers.Dense(512, activation="relu"), keras.layers.Dense(512)])


@tfcheck.aot(weights="inputs")
@tf.function(input_signature=[tf.TensorSpec([4, 512], tf.float32)])
def wide(x):
    return model(x, training=False)
'''
WEIGHT_BYTES = 2 * 512 * 512 * 4

# Run in a fresh process where importing TensorFlow, Keras, TVM or the compiler fails (the runtime
# may still find TVM's wheel to open its runtime libraries: finding is not importing).
BLOCKED_RUN = '''
import builtins
import sys
import numpy as np

real_import = builtins.__import__

def blocked_import(name, *args, **kwargs):
    if name.split(".")[0] in ("tensorflow", "keras", "tvm", "tvm_ffi") or name.startswith("tfcheck.compiler"):
        raise ImportError(f"{name} is blocked in this test")
    return real_import(name, *args, **kwargs)

builtins.__import__ = blocked_import
import tfcheck

lib = tfcheck.load(sys.argv[1])
np.save(sys.argv[3], lib.wide(np.load(sys.argv[2])))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`wide` built once into `out/wide` (and the cache), with TensorFlow's output beside it."""
    folder = tmp_path_factory.mktemp("library_weights")
    (folder / "wide.py").write_text(WIDE, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-m", "tfcheck", "build", "wide.py", "--no-lint", "--cache-dir", "cache", "--out", "out",
         "--format", "json"], cwd=folder, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    [record] = json.loads(completed.stdout)["functions"]
    assert (record["status"], record["verified"]) == ("built", True), record
    return folder


def _tensorflow_output(folder: Path, x: np.ndarray) -> np.ndarray:
    """`wide(x)` by TensorFlow, the module imported as the build imports it (seeded weights)."""
    spec = importlib.util.spec_from_file_location("library_weights_wide", folder / "wide.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return np.asarray(module.wide.tf_function(x))


@pytest.mark.slow
def test_the_library_holds_no_weights_and_the_artifact_matches_tensorflow_without_it(built: Path) -> None:
    artifact = built / "out" / "wide"
    manifest = json.loads((artifact / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["format_version"] == 2
    assert manifest["weights"]["file"] == "weights.npz" and manifest["weights"]["count"] == 2
    assert (artifact / "lib.so").stat().st_size < WEIGHT_BYTES / 8  # code only (frozen: over 2 MB)
    assert (artifact / "weights.npz").stat().st_size >= WEIGHT_BYTES
    x = np.random.default_rng(1).standard_normal((4, 512)).astype(np.float32)
    np.save(built / "x.npy", x)
    completed = subprocess.run([sys.executable, "-c", BLOCKED_RUN, str(built / "out"), str(built / "x.npy"),
                                str(built / "y.npy")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    np.testing.assert_allclose(np.load(built / "y.npy"), _tensorflow_output(built, x), rtol=1e-4, atol=1e-5)


DISPATCH = '''
import json, sys
import numpy as np, tensorflow as tf
sys.path.insert(0, ".")
import wide

x = np.load("x.npy")
np.save("dispatched.npy", np.asarray(wide.wide(tf.constant(x))))
print(json.dumps(wide.wide.backend))
'''


@pytest.mark.slow
def test_dispatch_runs_the_artifact_with_its_weights_file_on_tensorflow_tensors(built: Path) -> None:
    """`@tfcheck.aot` passes TensorFlow tensors over DLPack (not the NumPy route), weights after them."""
    [manifest] = [json.loads(path.read_text()) for path in (built / "cache").glob("*/manifest.json")]
    assert manifest["weights"]["count"] == 2  # the artifact dispatch finds takes its weights from the file
    x = np.random.default_rng(2).standard_normal((4, 512)).astype(np.float32)
    np.save(built / "x.npy", x)
    completed = subprocess.run([sys.executable, "-c", DISPATCH], cwd=built, capture_output=True, text=True,
                               timeout=300, env={**os.environ, "TFCHECK_ARTIFACTS": str(built / "cache")})
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert json.loads(completed.stdout.splitlines()[-1]) == "tvm:cpu"
    np.testing.assert_allclose(np.load(built / "dispatched.npy"), _tensorflow_output(built, x), rtol=1e-4, atol=1e-5)


def _copy(built: Path, name: str) -> Path:
    """A copy of the exported artifact folder (with the runtime libraries it needs beside it)."""
    copy = built / name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(built / "out", copy)
    return copy


@pytest.mark.slow
def test_a_missing_weights_file_is_named_with_the_artifact(built: Path) -> None:
    out = _copy(built, "missing")
    (out / "wide" / "weights.npz").unlink()
    with pytest.raises(ArtifactError, match=r"weights file weights.npz missing .*rebuild it") as error:
        import tfcheck

        tfcheck.load(out)
    assert str(out / "wide") in str(error.value)


@pytest.mark.slow
@pytest.mark.parametrize(("damage", "message"), [
    (lambda data: data[:-100], r"has \d+ bytes, the manifest records \d+: it was truncated"),
    (lambda data: data[:-100] + bytes(100), "has SHA-256 [0-9a-f]{64}, the manifest records [0-9a-f]{64}"),
])
def test_a_corrupt_weights_file_is_named_with_the_artifact(built: Path, damage, message: str) -> None:
    import tfcheck

    out = _copy(built, "corrupt")
    path = out / "wide" / "weights.npz"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ArtifactError, match=message) as error:
        tfcheck.load(out)
    assert str(out / "wide") in str(error.value) and "weights.npz" in str(error.value)


@pytest.mark.slow
def test_the_cache_rebuilds_an_artifact_whose_weights_file_is_corrupt(built: Path) -> None:
    """The cache's integrity check covers the weights file as it covers the library."""
    from tfcheck.compiler.cache.artifacts import entry_problem

    [folder] = [path.parent for path in (built / "cache").glob("*/manifest.json")]
    assert entry_problem(folder) is None
    original = (folder / "weights.npz").read_bytes()
    try:
        (folder / "weights.npz").write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        assert "weights.npz has SHA-256" in (entry_problem(folder) or "")
    finally:
        (folder / "weights.npz").write_bytes(original)


def test_large_constants_become_parameters_of_main_and_small_ones_stay() -> None:
    tvm = pytest.importorskip("tvm")
    from tvm import relax
    from tvm.script import relax as R

    from tfcheck.compiler.build.library_weights import MIN_BYTES, lift_constants

    rng = np.random.default_rng(0)
    big = rng.standard_normal((32, 32)).astype(np.float32)  # 4 kB, used twice: one parameter
    small = rng.standard_normal((32,)).astype(np.float32)  # 128 B: stays a constant
    assert big.nbytes >= MIN_BYTES > small.nbytes
    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((2, 32), "float32"))
    weight = relax.const(big)
    with builder.function("main", [x]):
        with builder.dataflow():
            once = builder.emit(relax.op.matmul(x, weight))
            twice = builder.emit(relax.op.add(relax.op.matmul(once, weight), relax.const(small)))
            output = builder.emit_output(twice)
        builder.emit_func_output(output)
    lifted = lift_constants(builder.get())
    assert [str(param.name) for param in lifted.mod["main"].params] == ["x", "tfcheck_constant_0"]
    assert int(lifted.mod["main"].attrs["num_input"]) == 1
    np.testing.assert_array_equal(lifted.values[0].numpy(), big)
    machine = relax.VirtualMachine(tvm.compile(lifted.mod, target="llvm"), tvm.cpu())
    value = rng.standard_normal((2, 32)).astype(np.float32)
    got = machine["main"](tvm.runtime.tensor(value), lifted.values[0]).numpy()
    np.testing.assert_allclose(got, value @ big @ big + small, rtol=1e-5, atol=1e-4)


def test_a_constant_of_a_dtype_numpy_lacks_stays_in_the_library() -> None:
    """The runtime reads the weights file with NumPy alone: a bfloat16 constant is kept inside."""
    pytest.importorskip("tvm")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from tvm import relax
    from tvm.script import relax as R

    from tfcheck.compiler.build.library_weights import lift_constants

    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((64, 64), "bfloat16"))
    with builder.function("main", [x]):
        with builder.dataflow():
            output = builder.emit_output(relax.op.add(x, relax.const(np.ones((64, 64), dtype=ml_dtypes.bfloat16))))
        builder.emit_func_output(output)
    lifted = lift_constants(builder.get())
    assert lifted.values == [] and [str(param.name) for param in lifted.mod["main"].params] == ["x"]
