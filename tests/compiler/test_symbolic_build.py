"""One artifact for unknown dimensions (issue 16), built, verified and called at several sizes
through `tfcheck.load`, against TensorFlow; bounds enforced; the per-shape fallback when an
operator takes no symbolic size, with the operator named (without shape entries:
test_build.py's FAILURES)."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

import tfcheck
from tfcheck.runtime.errors import InputError
from tests.compiler.test_build import build, by_function

FIXTURE = Path(__file__).parents[2] / "fixtures" / "aot" / "symbolic.py"

FILL = '''
import tensorflow as tf
import tfcheck


@tfcheck.aot(dims={"batch": (1, 8)}, shapes=[(2, 4), (3, 4)])
@tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
def filled(x):
    return x + tf.fill(tf.shape(x), 2.0)

'''

# fixtures/aot/symbolic.py's MLP alone, its batch bounded so that the build verifies at 1, 9 and 17.
MLP = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)
model = keras.Sequential([
    keras.Input((128,)),
    keras.layers.Dense(256, activation="relu"),
    keras.layers.Dense(10, activation="softmax"),
])


@tfcheck.aot(dims={"batch": (1, 17)})
@tf.function(input_signature=[tf.TensorSpec([None, 128], tf.float32, name="x")])
def any_batch_mlp(x):
    return model(x, training=False)

'''


def _module(path: Path):  # noqa: ANN202 - the fixture module, imported as the build's child imports it
    spec = importlib.util.spec_from_file_location("symbolic_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_one_artifact_takes_any_batch_and_length(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    shutil.copy(FIXTURE, tmp_path / "symbolic.py")
    code, report = build(run_cli, tmp_path, "--out", str(tmp_path / "out"))
    assert code == 0, report
    records = by_function(report)
    assert len(report["functions"]) == 2
    assert records["any_batch_mlp"]["dims"] == {"batch": {"min": 1, "max": 64, "verified": [1, 33, 64]}}
    assert records["classify_tokens"]["dims"]["tokens_1"] == {"min": 1, "max": 48, "verified": [1, 25, 48]}
    assert all(record["verified"] for record in records.values())

    reference = _module(tmp_path / "symbolic.py")
    library = tfcheck.load(tmp_path / "out")
    rng = np.random.default_rng(1)
    for batch in (1, 6, 64):
        x = rng.standard_normal((batch, 128)).astype(np.float32)
        np.testing.assert_allclose(library.any_batch_mlp(x), reference.any_batch_mlp(x).numpy(), atol=1e-5, rtol=1e-4)
    for batch, length in ((1, 3), (7, 1), (2, 48)):
        tokens = rng.integers(0, 1000, (batch, length)).astype(np.int32)
        np.testing.assert_allclose(library.classify_tokens(tokens), reference.classify_tokens(tokens).numpy(),
                                   atol=1e-4, rtol=1e-3)
    with pytest.raises(InputError, match=r"dimension 0 \(batch\) is 65, the artifact takes 1 to 64"):
        library.any_batch_mlp(np.zeros((65, 128), np.float32))
    with pytest.raises(InputError, match=r"dimension 1 \(tokens_1\) is 49, the artifact takes 1 to 48"):
        library.classify_tokens(np.zeros((2, 49), np.int32))


@pytest.mark.slow
def test_an_operator_without_symbolic_sizes_falls_back_to_the_shape_entries(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    folder = project({"fills.py": FILL})
    code, report = build(run_cli, folder)
    assert code == 0, report
    fell_back = [record for record in report["functions"] if record["function"] == "fills.filled"]
    assert [record["status"] for record in fell_back] == ["built", "built"]
    assert [record["inputs"][0]["shape"] for record in fell_back] == [[2, 4], [3, 4]]
    assert all("no symbolic artifact" in record["message"] and "TFLite operator FILL" in record["message"]
               and "built one artifact per shape entry instead" in record["message"] for record in fell_back)


@pytest.mark.slow
def test_a_symbolic_mlp_is_exact_at_every_batch_around_its_register_tile(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    """The contraction rule tiles a symbolic batch 8 rows at a time: full tiles without bound
    checks, the last partial tile row by row (compiler/schedules/unswitch.py). Each batch size
    around the tile matches TensorFlow, and every row comes out bit for bit as when computed alone."""
    folder = project({"dense.py": MLP})
    code, report = build(run_cli, folder, "--out", str(folder / "out"))
    assert code == 0, report
    [record] = report["functions"]
    assert record["verified"] is True
    assert record["dims"]["batch"]["min"] == 1 and record["dims"]["batch"]["max"] == 17
    reference = _module(folder / "dense.py")
    library = tfcheck.load(folder / "out")
    x = np.random.default_rng(2).standard_normal((17, 128)).astype(np.float32)
    alone = np.concatenate([library.any_batch_mlp(x[row:row + 1]) for row in range(17)])
    for batch in (1, 7, 8, 9, 17):
        out = library.any_batch_mlp(x[:batch])
        np.testing.assert_allclose(out, reference.model(x[:batch], training=False).numpy(), atol=1e-6, rtol=1e-5)
        np.testing.assert_array_equal(out, alone[:batch])
