"""Freezing a function that writes its variables (compiler/trace/variable_writes.py; issue 42).

hunglc007/tensorflow-yolov4-tflite (core/common.py at 9f16748) subclasses tf.keras 2's
BatchNormalization and calls it with `training = tf.logical_and(training, self.trainable)`, a
tensor. tf_keras (src/layers/normalization/batch_normalization.py, `_fused_batch_norm`) then runs
`smart_cond(training, training_fn, inference_fn)`, which TensorFlow folds to the inference branch
(its constant evaluation takes the LogicalAnd of constants), but asks `tf.get_static_value(training)`,
which does not, whether to update: so it adds `moving_mean.assign(mean)` and
`moving_variance.assign(variance)` of the inference-mode fused batch norm's outputs 1 and 2.
`MovingStatistics` below is that code with the layer's machinery taken out (tf_keras is not
installed here): TensorFlow's own freezing failed on it ("Input 0 of node .../AssignNewValue was
passed float from .../resource:0 incompatible with expected resource").
"""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tests.compiler.tflite_run import run_tflite  # noqa: E402
from tfcheck.compiler.process.child import StepError  # noqa: E402
from tfcheck.compiler.trace.bridge import freeze, to_tflite  # noqa: E402


class MovingStatistics(tf.Module):
    """common.py's BatchNormalization.call, then tf_keras's `_fused_batch_norm` with
    `use_fused_avg_updates` (its path for a 4-D input), over non-trivial moving statistics."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        rng = np.random.default_rng(0)
        self.gamma = tf.Variable(rng.uniform(0.5, 1.5, channels).astype(np.float32))
        self.beta = tf.Variable(rng.standard_normal(channels).astype(np.float32))
        self.moving_mean = tf.Variable(rng.standard_normal(channels).astype(np.float32))
        self.moving_variance = tf.Variable(rng.uniform(0.5, 2.0, channels).astype(np.float32))

    def __call__(self, inputs: tf.Tensor, training: bool = False) -> tf.Tensor:
        if not training:
            training = tf.constant(False)
        training = tf.logical_and(training, True)  # `self.trainable`

        def fused(is_training: bool) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
            return tf.compat.v1.nn.fused_batch_norm(
                inputs, self.gamma, self.beta, mean=self.moving_mean, variance=self.moving_variance,
                epsilon=1e-3, is_training=is_training, exponential_avg_factor=0.01 if is_training else 1.0)

        output, mean, variance = tf.__internal__.smart_cond.smart_cond(
            training, lambda: fused(True), lambda: fused(False))
        if tf.get_static_value(training) is None:  # tf_keras: `training_value or training_value is None`
            self.moving_mean.assign(mean)
            self.moving_variance.assign(variance)
        return tf.nn.leaky_relu(output, alpha=0.1)


def test_inference_batch_norm_updates_of_a_tensor_training_flag_freeze_and_match_tensorflow() -> None:
    layer = MovingStatistics(8)
    function = tf.function(layer, input_signature=[tf.TensorSpec([1, 12, 12, 8], tf.float32)])
    concrete = function.get_concrete_function()
    assert "AssignVariableOp" in {node.op for node in concrete.graph.as_graph_def().node}
    images = np.random.default_rng(1).standard_normal((1, 12, 12, 8)).astype(np.float32)
    flatbuffer = to_tflite(freeze(concrete))
    np.testing.assert_allclose(run_tflite(flatbuffer, images), function(images).numpy(), rtol=1e-5, atol=1e-5)


class Counter(tf.Module):
    """A function that does change a variable: a call counter beside the result."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = tf.Variable(0.0, name="calls")

    @tf.function(input_signature=[tf.TensorSpec([4], tf.float32)])
    def double(self, values: tf.Tensor) -> tf.Tensor:
        self.calls.assign_add(1.0)
        return values * 2.0


def test_a_write_that_changes_a_variable_is_refused_naming_it() -> None:
    counter = Counter()  # the method holds its instance weakly
    with pytest.raises(StepError) as raised:
        freeze(counter.double.get_concrete_function())
    assert raised.value.op == "AssignAddVariableOp"
    assert "writes its variables: calls:0 (AssignAddVariableOp at node" in raised.value.message
    assert "keeps no state from one call to the next" in raised.value.message


class ExplicitCond(tf.Module):
    """The same flag with `tf.cond`, which (unlike `smart_cond`) keeps an `If` on the constant
    predicate: the training branch, never taken, updates the moving mean."""

    def __init__(self, training: bool) -> None:
        super().__init__()
        self.training = training
        self.moving_mean = tf.Variable(np.linspace(-1, 1, 4).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([3, 4], tf.float32)])
    def normalize(self, inputs: tf.Tensor) -> tf.Tensor:
        training = tf.logical_and(tf.constant(self.training), True)

        def update() -> tf.Tensor:
            mean = tf.reduce_mean(inputs, axis=0)
            self.moving_mean.assign(0.99 * self.moving_mean + 0.01 * mean)
            return inputs - mean

        return tf.cond(training, update, lambda: inputs - self.moving_mean)


def test_a_write_in_a_branch_a_constant_predicate_never_takes_is_dropped() -> None:
    layer = ExplicitCond(training=False)
    concrete = layer.normalize.get_concrete_function()
    assert "If" in {node.op for node in concrete.graph.as_graph_def().node}
    values = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    flatbuffer = to_tflite(freeze(concrete))
    np.testing.assert_allclose(run_tflite(flatbuffer, values), layer.normalize(values).numpy(), rtol=1e-6, atol=1e-6)


def test_a_write_in_the_branch_a_constant_predicate_takes_is_refused() -> None:
    layer = ExplicitCond(training=True)
    with pytest.raises(StepError) as raised:
        freeze(layer.normalize.get_concrete_function())
    assert "(AssignVariableOp at node" in raised.value.message
