"""compiler/trace/pooling3d.py: 3-D pooling converted to TFLite as two 2-D poolings.

Each case converts a function with one `tf.nn.max_pool3d` or `tf.nn.avg_pool3d` the way `tfcheck
build` does (`freeze`, `to_tflite`), runs the flatbuffer in TFLite's interpreter and compares with
TensorFlow's own result: exactly for the maximum, to float32 rounding for the average.
"""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tests.compiler.tflite_run import run_tflite  # noqa: E402
from tfcheck.compiler.trace.pooling3d import pools_as_2d  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, to_tflite  # noqa: E402

SHAPE = [2, 7, 9, 10, 3]  # odd sizes, so SAME pads unevenly and VALID drops a remainder

CASES = [
    (2, 2, "VALID"),
    (3, 2, "SAME"),
    ([2, 3, 1], [1, 2, 3], "SAME"),  # a different window and stride on each axis
    (3, 1, "VALID"),
]


@pytest.mark.parametrize("pool", [tf.nn.max_pool3d, tf.nn.avg_pool3d], ids=["max", "avg"])
@pytest.mark.parametrize("window, strides, padding", CASES)
def test_converted_pooling_matches_tensorflow(pool, window, strides, padding) -> None:
    # The batch is unknown at conversion: the reshapes must carry it as -1.
    function = tf.function(lambda x: pool(x, window, strides, padding),
                           input_signature=[tf.TensorSpec([None, *SHAPE[1:]])])
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    got, expected = run_tflite(to_tflite(freeze(function.get_concrete_function())), x), function(x).numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=0 if pool is tf.nn.max_pool3d else 1e-6)


def test_only_pooling_nodes_change_and_consumers_keep_their_input() -> None:
    function = tf.function(lambda x: tf.nn.relu(tf.nn.max_pool3d(x, 2, 2, "VALID")) + 1.0,
                           input_signature=[tf.TensorSpec([1, 4, 4, 4, 2])])
    graph = freeze(function.get_concrete_function()).graph
    before = graph.as_graph_def()
    after = pools_as_2d(before, graph)
    ops = {node.name: node.op for node in after.node}
    (pool,) = [node.name for node in before.node if node.op == "MaxPool3D"]
    assert ops[pool] == "Reshape" and "MaxPool3D" not in ops.values()
    assert sorted(op for op in ops.values() if op == "MaxPool") == ["MaxPool", "MaxPool"]
    unchanged = {node.name: node for node in before.node if node.name != pool}
    assert all(node == unchanged[node.name] for node in after.node if node.name in unchanged)


def test_unknown_spatial_sizes_are_left_to_the_converter_which_names_the_op() -> None:
    function = tf.function(lambda x: tf.nn.max_pool3d(x, 2, 2, "VALID"),
                           input_signature=[tf.TensorSpec([1, None, 8, 8, 2])])
    frozen = freeze(function.get_concrete_function())
    graph_def = frozen.graph.as_graph_def()
    assert pools_as_2d(graph_def, frozen.graph) is graph_def
    with pytest.raises(Exception, match="MaxPool3D"):
        to_tflite(frozen)
