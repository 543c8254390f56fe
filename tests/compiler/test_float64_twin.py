"""Functions computed in float64 build as their float32 twin read back as float64
(`compiler/trace/float64_twin.py`), and compute in float64: a constant float32 cannot hold (0.1, a
layer norm's epsilon) and every weight keep their float64 values, and the artifact, run by
production's runtime without TVM or TensorFlow, is within float64 rounding of TensorFlow (float32
arithmetic anywhere would be 1e-7 off). A function that mixes float64 with float32 is refused,
naming float64, as before.

The form is marload/DeepRL-TensorFlow2's (876266d, PPO/PPO_Continuous.py): a Keras model after
`tf.keras.backend.set_floatx('float64')`; the layer norm and the scaled output are this test's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.compiler.production_run import build_exported, run_exported

tf = pytest.importorskip("tensorflow")

from tfcheck.compiler.build.verify import compare  # noqa: E402
from tfcheck.compiler.trace.float64_twin import TwinRefused, computes_in_float64, twin_graph  # noqa: E402

FUNCTIONS = '''
import tensorflow as tf
from tensorflow.keras.layers import Dense, Input, LayerNormalization

import tfcheck

tf.keras.backend.set_floatx('float64')
tf.keras.utils.set_random_seed(0)
state = Input((3,))
hidden = LayerNormalization()(Dense(32, activation='relu')(state))
model = tf.keras.models.Model(state, [Dense(1, activation='tanh')(hidden), Dense(1, activation='softplus')(hidden)])


@tfcheck.aot(dims={"batch": (1, 8)})
@tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float64)])
def policy(states):
    mu, std = model(states, training=False)
    return mu * 0.1, std


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float64)])
def mixed(states):
    scores = tf.matmul(states, tf.ones([3, 4], tf.float64))
    return tf.nn.relu(tf.cast(scores, tf.float32))
'''

# Run by the artifact's runtime alone (`production_run.run_exported`).
RUN = '''
mu, std = library.policy(inputs["states"])
results = {"mu": np.asarray(mu), "std": np.asarray(std)}
'''


@pytest.mark.slow
def test_a_float64_function_computes_in_float64_and_a_mixed_one_is_refused(project: Callable[..., Path],
                                                                            tmp_path: Path) -> None:
    folder = project({"ppo.py": FUNCTIONS})
    records = build_exported(folder / "ppo.py", tmp_path, "--no-lint")
    policy, mixed = records["policy"], records["mixed"]
    assert (policy["status"], policy["verified"]) == ("built", True), policy["message"]
    assert policy["max_rel_error"] < 1e-12, policy["max_rel_error"]
    assert mixed["status"] == "failed"
    assert "MatMul in float64 (input 'states' is float64)" in mixed["message"], mixed["message"]
    assert "mixes float64 with other float dtypes" in mixed["message"], mixed["message"]
    manifest = json.loads((tmp_path / "out" / "policy" / "manifest.json").read_text())
    assert [spec["dtype"] for spec in manifest["inputs"] + manifest["outputs"]] == ["float64"] * 3

    states = np.random.default_rng(3).standard_normal((5, 3))
    got = run_exported(tmp_path, RUN, {"states": states})
    want = _tensorflow_outputs(folder, states, tmp_path)
    for name in ("mu", "std"):
        assert got[name].dtype == np.float64
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-15, err_msg=name)


def _tensorflow_outputs(folder: Path, states: np.ndarray, tmp_path: Path) -> dict[str, np.ndarray]:
    """`policy`'s tf.function on `states`, in a fresh process as the build traces it: imported in
    the test's own process, the module would draw other initial weights (Keras' generators are
    shared) and leave `set_floatx('float64')` set for the tests after it."""
    script = (f"import sys; sys.path.insert(0, {str(folder)!r}); import numpy as np, tensorflow as tf, ppo; "
              f"mu, std = ppo.policy.tf_function(tf.constant(np.load({str(tmp_path / 'states.npy')!r}))); "
              f"np.savez({str(tmp_path / 'want.npz')!r}, mu=mu.numpy(), std=std.numpy())")
    np.save(tmp_path / "states.npy", states)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return dict(np.load(tmp_path / "want.npz"))


def _graph_of(function: Callable[..., object], *specs: object) -> object:
    return tf.function(function, input_signature=list(specs)).get_concrete_function().graph.as_graph_def()


def test_only_a_function_wholly_in_float64_is_twinned() -> None:
    float64 = tf.TensorSpec([2, 3], tf.float64)
    assert computes_in_float64(tf, _graph_of(lambda x: tf.nn.relu(x) * 2.0, float64))
    assert not computes_in_float64(tf, _graph_of(lambda x: tf.cast(x, tf.float32) * 2.0, float64))
    assert not computes_in_float64(tf, _graph_of(lambda x: x * 2.0, tf.TensorSpec([2, 3], tf.float32)))
    assert not computes_in_float64(tf, _graph_of(lambda x: x * 2, tf.TensorSpec([2, 3], tf.int32)))


def test_the_twin_is_float32_and_lifts_the_constants_float32_would_round() -> None:
    graph = _graph_of(lambda x: x * 2.0 + tf.constant([0.1, 0.5, 1e-3], tf.float64), tf.TensorSpec([2, 3], tf.float64))
    twin, lifted = twin_graph(tf, graph)
    assert [(name, value.tolist()) for name, value in lifted] == [
        (next(node.name for node in graph.node if node.op == "Const" and node.attr["value"].tensor.tensor_shape.dim),
         [0.1, 0.5, 1e-3])]
    assert not computes_in_float64(tf, twin)
    assert all(node.name != lifted[0][0] for node in twin.node)  # the caller puts an input in its place
    kept = [node for node in twin.node if node.op == "Const"]
    assert [tf.make_ndarray(node.attr["value"].tensor).dtype for node in kept] == [np.float32]  # 2.0: exact


def test_an_inexact_constant_inside_a_called_function_is_refused_by_name() -> None:
    graph = tf.compat.v1.GraphDef()
    function = graph.library.function.add()
    function.signature.name = "scaled"
    node = function.node_def.add()
    node.name, node.op = "tenth", "Const"
    node.attr["dtype"].type = tf.float64.as_datatype_enum
    node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.float64(0.1)))
    with pytest.raises(TwinRefused, match="constant 'tenth' of function 'scaled'"):
        twin_graph(tf, graph)


def test_verification_of_a_float64_output_catches_one_float32_rounding() -> None:
    """The twin is read back as float64; a float32 rounding left anywhere must fail verification."""
    want = np.random.default_rng(0).standard_normal((64, 8)) * 100
    assert compare([want * (1 + 1e-13)], [want]).passed  # float64's own rounding, amplified
    assert not compare([want.astype(np.float32).astype(np.float64)], [want]).passed
