"""TFC029: a tensor used as a Python bool in graph code that AutoGraph does not convert."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_K = "import tensorflow as tf\nimport keras\n"


class TensorBoolWithoutAutograph(Rule):
    """A tensor used as a Python bool where AutoGraph does not convert the code raises while tracing.

    ## What it does
    Finds, in graph code that AutoGraph does not rewrite (a Keras 3 layer's `call`, `train_step`,
    `test_step`, a metric's `update_state`, a loss, and the helpers they call, when no tf.function
    or tf.data reaches them), a surely-tensor value used as a Python truth value: the test of an
    `if`, `while` or conditional expression, or an operand of `and`, `or`, `not`. Code behind a
    `tf.executing_eagerly()` test is not reported, nor a function AutoGraph tries to convert and gives
    up on (`self.__x`, a `for … else`, ...): TFC034 reports that, at its cause.

    ## Why is this bad
    Since TensorFlow 2.16, `tf.keras` is Keras 3, which traces these methods as written: there is no
    AutoGraph to turn `if tf.reduce_sum(x) > 0:` into `tf.cond`. Tracing asks the symbolic tensor for
    its truth value and raises `OperatorNotAllowedInGraphError: Using a symbolic tf.Tensor as a Python
    bool is not allowed` (TensorFlow 2.21, under `fit` and when a functional model is built). Layers
    written for tf.keras 2, which wrapped `call` in AutoGraph, fail this way after an upgrade.

    ## Example
    ```python
    class Gate(keras.layers.Layer):
        def call(self, x):
            if tf.reduce_sum(x) > 0:
                return x * 2
            return x
    ```

    ## Use instead
    ```python
    class Gate(keras.layers.Layer):
        def call(self, x):
            return tf.where(tf.reduce_sum(x) > 0, x * 2, x)   # or tf.cond / keras.ops.cond
    ```
    """

    code = "TFC029"
    name = "tensor-bool-without-autograph"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        _K + "class Gate(keras.layers.Layer):\n    def call(self, x):\n        if tf.reduce_sum(x) > 0:\n"
        "            return x * 2\n        return x\n",
        _K + "class Net(keras.Model):\n    def train_step(self, data):\n        x, y = data\n"
        "        loss = tf.reduce_mean(tf.square(self(x) - y))\n        if loss > 100.0:\n"
        "            return {'loss': tf.constant(100.0)}\n        return {'loss': loss}\n",
        _K + "class Clip(keras.layers.Layer):\n    def call(self, x):\n"
        "        return x if not tf.reduce_any(tf.math.is_nan(x)) else tf.zeros_like(x)\n",
    )
    must_not_flag = (
        # AutoGraph converts a tf.function: the `if` becomes tf.cond.
        _K + "@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        return x * 2\n    return x\n",
        # Python values and static shapes in `call` are fine.
        _K + "class Gate(keras.layers.Layer):\n    def call(self, x, training=None):\n"
        "        if training and x.shape[-1] > 2:\n            return x * 2\n        return x\n",
        # A branch only eager execution takes.
        _K + "class Debug(keras.layers.Layer):\n    def call(self, x):\n        if tf.executing_eagerly():\n"
        "            if tf.reduce_sum(x) > 0:\n                print('positive')\n        return x\n",
        # `is None` tests the Python object, not the tensor's value.
        _K + "class Mask(keras.layers.Layer):\n    def call(self, x, mask=None):\n"
        "        m = tf.cast(x > 0, x.dtype)\n        if m is None:\n            return x\n        return x * m\n",
        # The tensor is the value of the `or`, never tested (keras-team/keras-cv faster_rcnn.py:135).
        _K + "class Boxes(keras.layers.Layer):\n    def call(self, x):\n"
        "        batch = x.get_shape().as_list()[0] or tf.shape(x)[0]\n        return tf.reshape(x, [batch, -1])\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for node, function in facts.graph_nodes(ast.If, ast.While, ast.IfExp, ast.BoolOp, ast.UnaryOp):
            if _inside_a_tested_expression(facts, node) or facts.autograph_converted(function) \
                    or facts.autograph_refusal(function) is not None or facts.eager_guarded(function) \
                    or facts.in_eager_only_branch(node, function):
                continue
            test = next((part for part in facts.truth_tested(node) if facts.surely_tensor(part)), None)
            if test is not None:
                yield self.finding(facts, test, _message(facts, test, function), function=function)


def _inside_a_tested_expression(facts: FileFacts, node: ast.AST) -> bool:
    """A `BoolOp`/`not` that is part of a larger one, or of an `if`/`while` test: reported there, once."""
    if not isinstance(node, (ast.BoolOp, ast.UnaryOp)):
        return False
    parent = facts.parent(node)
    return isinstance(parent, ast.BoolOp) or (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)) \
        or (isinstance(parent, (ast.If, ast.While, ast.IfExp)) and parent.test is node)


def _message(facts: FileFacts, test: ast.expr, function: FunctionInfo) -> str:
    return (f"`{facts.text(test)}` is a symbolic tensor used as a Python bool in code AutoGraph does not convert "
            f"(`{function.name}` runs as written, as Keras 3 runs it): tracing raises OperatorNotAllowedInGraphError; "
            "use tf.cond, tf.where or keras.ops.cond")
