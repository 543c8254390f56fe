"""`tfcheck build` on functions as people write them (issue 16): methods of a Keras model and of
a tf.Module, nested inputs and outputs, and SavedModels (two signatures from
`tf.saved_model.save`, and a Keras `model.export`). Every artifact is verified against TensorFlow
by the build; dispatch is then checked in a fresh process. Tiny Dense models keep each build to
seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result

import tfcheck
from tfcheck.runtime import InputError

pytestmark = pytest.mark.slow

METHODS = '''
import keras
import tensorflow as tf
import tfcheck


class Classifier(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(8, activation="relu")
        self.out = keras.layers.Dense(3)

    def call(self, x):
        return self.out(self.hidden(x))

    @tfcheck.aot
    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
    def serve(self, x):
        return tf.nn.softmax(self(x))


class Scaler(tf.Module):
    def __init__(self):
        self.w = tf.Variable(tf.random.normal([4, 2]))

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
    def apply(self, x):
        return {"y": tf.matmul(x, self.w)}


classifier = Classifier()
classifier(tf.zeros([2, 4]))
scaler = Scaler()
apply_scaler = tfcheck.aot(scaler.apply)
'''

# Run in a fresh process with the build's cache: the module-level instances get the artifacts,
# another instance of the class falls back to TensorFlow, and the results match TensorFlow's.
METHODS_DISPATCH = '''
import json, warnings
import numpy as np
import keras
keras.utils.set_random_seed(0)
import models

x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
report = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    served = models.classifier.serve(x)
    report["classifier"] = models.classifier.serve.backend
    report["same_wrapper"] = models.classifier.serve is models.classifier.serve
    report["close"] = bool(np.allclose(served.numpy(), models.classifier.serve.tf_function(x).numpy(), atol=1e-5))
    other = models.Classifier()
    other(x)
    other.serve(x)
    report["other"] = other.serve.backend
    scaled = models.apply_scaler(x)
    report["scaler"] = models.apply_scaler.backend
    report["scaler_close"] = bool(np.allclose(scaled["y"].numpy(), (x @ models.scaler.w.numpy()), atol=1e-5))
report["warnings"] = [str(w.message) for w in caught]
print(json.dumps(report))
'''


def build(run_cli: Callable[..., Result], folder: Path, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    result = run_cli(folder, "build", *args, "--cache-dir", str(folder / "cache"), "--out", str(folder / "out"),
                     "--format", "json")
    report = json.loads(result.stdout)
    return result.exit_code, {record["function"]: record for record in report["functions"]}


def manifest(record: dict[str, Any]) -> dict[str, Any]:
    return json.loads(Path(record["artifact"], "manifest.json").read_text())


def run_python(folder: Path, code: str) -> dict[str, Any]:
    env = {**os.environ, "TFCHECK_ARTIFACTS": str(folder / "cache"), "PYTHONPATH": str(folder)}
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_methods_of_a_keras_model_and_a_tf_module(project: Callable[..., Path],
                                                  run_cli: Callable[..., Result]) -> None:
    folder = project({"models.py": METHODS})
    code, records = build(run_cli, folder)
    assert code == 0, records
    served, scaled = records["models.classifier.serve"], records["models.apply_scaler"]
    assert served["status"] == scaled["status"] == "built" and served["verified"] and scaled["verified"]
    assert (served["name"], scaled["name"]) == ("classifier_serve", "scaler_apply")
    assert Path(served["exported"]).name == "classifier_serve"
    assert manifest(served)["qualname"] == "models.classifier.serve" and manifest(served)["instance"] == "classifier"
    assert manifest(scaled)["qualname"] == "models.scaler.apply" and manifest(scaled)["instance"] == "scaler"

    lib = tfcheck.load(folder / "out")
    assert lib.classifier_serve(np.ones((2, 4), np.float32)).shape == (2, 3)
    assert lib.scaler_apply(x=np.ones((2, 4), np.float32))["y"].shape == (2, 2)

    report = run_python(folder, METHODS_DISPATCH)
    assert report["classifier"] == report["scaler"] == "tvm:cpu" and report["same_wrapper"]
    assert report["close"] and report["scaler_close"]
    assert report["other"] == "tensorflow"
    [warning] = report["warnings"]
    assert "built for the module-level instance 'classifier' (models.classifier.serve)" in warning


NESTED = '''
import collections
import tensorflow as tf
import tfcheck

Stats = collections.namedtuple("Stats", ["total", "peak"])
weights = tf.Variable(tf.random.normal([4, 3]))


@tfcheck.aot
@tf.function(input_signature=[{"ids": tf.TensorSpec([2, 5], tf.int32),
                               "dense": tf.TensorSpec([2, 4], tf.float32)}])
def score(features):
    hidden = tf.matmul(features["dense"], weights)
    counts = tf.cast(tf.reduce_sum(features["ids"], axis=1), tf.float32)
    return {"logits": (hidden, hidden * 2.0), "stats": Stats(counts, tf.reduce_max(hidden, axis=1))}
'''

NESTED_DISPATCH = '''
import json
import numpy as np
import tensorflow as tf
import keras
keras.utils.set_random_seed(0)
import feats

features = {"ids": np.arange(10, dtype=np.int32).reshape(2, 5), "dense": np.ones((2, 4), np.float32)}
result = feats.score(features)
expected = feats.score.tf_function(features)
print(json.dumps({"backend": feats.score.backend, "stats_class": type(result["stats"]) is feats.Stats,
                  "close": all(np.allclose(a, b, atol=1e-5)
                               for a, b in zip(tf.nest.flatten(result), tf.nest.flatten(expected)))}))
'''


def test_dict_of_features_in_dict_of_tuples_out(project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    folder = project({"feats.py": NESTED})
    code, records = build(run_cli, folder)
    record = records["feats.score"]
    assert code == 0 and record["status"] == "built" and record["verified"], record
    written = manifest(record)
    assert [spec["name"] for spec in written["inputs"]] == ["features['dense']", "features['ids']"]
    assert written["input_structure"] == [{"name": "features", "kind": "dict", "keys": ["dense", "ids"]}]
    assert written["output_structure"] == {"kind": "dict", "keys": ["logits", "stats"], "items": [
        {"kind": "tuple", "length": 2}, {"kind": "namedtuple", "name": "Stats", "fields": ["total", "peak"]}]}

    lib = tfcheck.load(folder / "out")
    ids = np.arange(10, dtype=np.int32).reshape(2, 5)
    result = lib.score({"ids": ids, "dense": np.ones((2, 4), np.float32)})
    hidden, doubled = result["logits"]
    np.testing.assert_allclose(doubled, hidden * 2.0, rtol=1e-6)
    assert result["stats"]._fields == ("total", "peak")
    np.testing.assert_array_equal(result["stats"].total, ids.sum(axis=1).astype(np.float32))
    with pytest.raises(InputError, match=r"argument features\['ids'\] has dtype int64, expected features\['ids'\]"):
        lib.score({"ids": ids.astype(np.int64), "dense": np.ones((2, 4), np.float32)})

    report = run_python(folder, NESTED_DISPATCH)
    assert report == {"backend": "tvm:cpu", "stats_class": True, "close": True}


SAVE_MODELS = '''
import keras
import tensorflow as tf

keras.utils.set_random_seed(0)


class Module(tf.Module):
    def __init__(self):
        self.w = tf.Variable(tf.random.normal([4, 2]))

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
    def project(self, x):
        return {"y": tf.matmul(x, self.w)}

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="b"),
                                  tf.TensorSpec([2, 2], tf.float32, name="a")])
    def combine(self, b, a):
        return tf.matmul(b, self.w) + a, a * 2.0


module = Module()
tf.saved_model.save(module, "two_signatures", signatures={"project": module.project, "combine": module.combine})
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
model.export("keras_export", verbose=False)
'''


def test_saved_models_from_tf_saved_model_save_and_keras_export(project: Callable[..., Path],
                                                                run_cli: Callable[..., Result]) -> None:
    folder = project({"save.py": SAVE_MODELS}, config='''
        [tool.tfcheck.build]
        shapes = { "keras_export.serving_default" = [[[2, 4]]] }
    ''')
    subprocess.run([sys.executable, "save.py"], cwd=folder, check=True, capture_output=True, timeout=300)

    result = run_cli(folder, "inspect", "two_signatures", "--signature", "combine")
    assert result.exit_code == 0 and "two_signatures.combine" in result.stdout and "ADD" in result.stdout

    code, records = build(run_cli, folder, "two_signatures", "keras_export", "--signature", "project",
                          "--signature", "combine", "--signature", "serving_default")
    assert code == 1  # keras_export has no `project` or `combine`, two_signatures no `serving_default`
    built = {label: record for label, record in records.items() if record["status"] == "built"}
    assert set(built) == {"two_signatures.project", "two_signatures.combine", "keras_export.serving_default"}
    assert all(record["verified"] for record in built.values())
    assert "not linted: a SavedModel holds graphs" in built["two_signatures.project"]["message"]
    missing = records["keras_export.project"]["message"]
    assert "has no signature 'project'; its signatures: serve, serving_default" in missing
    assert manifest(built["two_signatures.combine"])["input_structure"] == [
        {"name": "a", "kind": "tensor"}, {"name": "b", "kind": "tensor"}]

    lib = tfcheck.load(folder / "out")
    a, b = np.ones((2, 2), np.float32), np.ones((2, 4), np.float32)
    combined = lib.combine(b=b, a=a)
    assert sorted(combined) == ["output_0", "output_1"]
    np.testing.assert_allclose(combined["output_1"], a * 2.0)
    assert lib.serving_default(b)["output_0"].shape == (2, 3)
    assert lib["two_signatures.project"](x=b)["y"].shape == (2, 2)


def test_a_signature_with_unknown_dimensions_builds_one_symbolic_artifact(project: Callable[..., Path],
                                                                        run_cli: Callable[..., Result]) -> None:
    folder = project({"save.py": textwrap.dedent(SAVE_MODELS).split("module = Module()")[0] + '''
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
model.export("keras_export", verbose=False)
'''})
    subprocess.run([sys.executable, "save.py"], cwd=folder, check=True, capture_output=True, timeout=300)
    code, records = build(run_cli, folder, "keras_export", "--signature", "serve", "--out", str(folder / "out"))
    record = records["keras_export.serve"]
    assert code == 0 and record["verified"], record
    assert record["dims"] == {"batch": {"min": 1, "max": None, "verified": [1, 17, 32], "step": 1}}
    assert record["inputs"][0]["shape"] == ["batch", 4]
    serve = tfcheck.load(folder / "out").serve
    assert [serve(np.ones((batch, 4), np.float32))["output_0"].shape for batch in (1, 5, 40)] == \
        [(1, 3), (5, 3), (40, 3)]
