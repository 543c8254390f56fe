"""TFC037: calls that work eagerly (or in TF1 sessions) but raise when a tf.function traces them."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

# `tf.compat.v1.` is dropped by the canonical spelling (tfcheck.engine.names).
_NAME_SCOPES = ("tensorflow.name_scope", "tensorflow.python.framework.ops.name_scope")
_RESET_GRAPH = ("tensorflow.reset_default_graph", "tensorflow.python.framework.ops.reset_default_graph")
# What TensorFlow 2.21 accepts for a nested scope (`ops._VALID_SCOPE_NAME_REGEX`); a root scope must
# also not start with `_`, `-`, `/` or `\` (not checked: whether a scope is the root is not known here).
_VALID_SCOPE_NAME = re.compile(r"[A-Za-z0-9_.\\/>-]*")
# A file that runs TF1 graphs: `.eval()` and the default graph are meant there.
_TF1_GRAPH_MODE = frozenset({"tensorflow.disable_eager_execution", "tensorflow.disable_v2_behavior",
                             "tensorflow.Session", "tensorflow.InteractiveSession"})
_T = "import tensorflow as tf\n"


class ApiFailsWhenTraced(Rule):
    """A name scope TensorFlow rejects, `.eval()` or `reset_default_graph()` in graph code raise when traced.

    ## What it does
    Finds, in graph code (a tf.function, a function it calls, one traced by `tf.data`, a Keras `call`):

    - `tf.name_scope("...")` (or `tf.compat.v1.name_scope`) with a string literal that is no valid
      scope name: a character other than letters, digits and `_ . \\ / > -` (a space, a colon);
    - `.eval()` on a value that is surely a tensor;
    - `tf.compat.v1.reset_default_graph()`.

    Files that run TF1 graphs (`disable_eager_execution()`, `disable_v2_behavior()`, a `Session`)
    are left alone.

    ## Why is this bad
    Eagerly `tf.name_scope` does not check the name, so `tf.name_scope("my scope")` works until the
    code is traced, where the graph raises `ValueError: 'my scope' is not a valid root scope name`
    (or `... is not a valid scope name` inside another scope). `tensor.eval()` needs a TF1 default
    session: in a tf.function it raises `ValueError: Cannot evaluate tensor using eval(): No default
    session is registered` (use the tensor itself, or `.numpy()` in eager code). Resetting the default
    graph while a function graph is being built raises `AssertionError: Do not use
    tf.reset_default_graph() to clear nested graphs`. Each raises on the first call.

    Checked against TensorFlow 2.21: every must-flag example below raises when the function is
    called, including a Keras layer's `call` when a functional model is built; the same
    `tf.name_scope("my scope")` in eager code, and the scope names `layer/`, `a-b.c/d` and `""` in a
    tf.function, run.

    ## Example
    ```python
    @tf.function
    def f(x):
        with tf.name_scope("my scope"):
            return x * 2
    ```

    ## Use instead
    ```python
    @tf.function
    def f(x):
        with tf.name_scope("my_scope"):
            return x * 2
    ```
    """

    code = "TFC037"
    name = "api-fails-when-traced"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # docs/coverage.md G1, G2, C9, G3 (each checked raising in TensorFlow 2.21).
        _T + "@tf.function\ndef f(x):\n    with tf.name_scope('my scope'):\n        return x * 2\n",
        _T + "@tf.function\ndef g(x):\n    with tf.name_scope('outer'):\n        with tf.name_scope('in:ner'):\n"
        "            return x * 2\n",
        _T + "@tf.function\ndef f(x):\n    with tf.compat.v1.name_scope('my scope'):\n        return x * 2\n",
        _T + "import keras\nclass L(keras.layers.Layer):\n    def call(self, x):\n"
        "        with tf.name_scope(name='my scope'):\n            return x * 2\n",
        _T + "@tf.function\ndef f(x):\n    y = tf.reduce_sum(x)\n    return y.eval()\n",
        _T + "@tf.function\ndef g(x):\n    tf.compat.v1.reset_default_graph()\n    return x\n",
    )
    must_not_flag = (
        # Checked: valid names in a tf.function; any name eagerly.
        _T + "@tf.function\ndef f(x):\n    with tf.name_scope('layer/'):\n        with tf.name_scope('a-b.c/d'):\n"
        "            with tf.name_scope(''):\n                return x * 2\n",
        _T + "def e(x):\n    with tf.name_scope('my scope'):\n        return x * 2\n",
        # TF1 graph code, run in a session.
        _T + "tf.compat.v1.disable_eager_execution()\ndef model(x):\n    return x * 2\n"
        "ds = tf.data.Dataset.range(3).map(lambda x: tf.constant(x.eval()))\n",
        # `.eval()` on something that is not surely a tensor (a model's own method).
        _T + "@tf.function\ndef f(x, model):\n    model.eval()\n    return x\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        if any(facts.resolve(call.func) in _TF1_GRAPH_MODE for call, _ in facts.calls):
            return
        for call, function in facts.graph_calls(*_NAME_SCOPES):
            name = _literal_name(call)
            if name is not None and not _VALID_SCOPE_NAME.fullmatch(name):
                yield self.finding(
                    facts, call, f"scope name {name!r} is not valid in a graph (letters, digits and `_ . \\ / > -` "
                    "only): tracing raises `is not a valid scope name`, though it works eagerly", function=function)
        for call, function in facts.graph_calls(*_RESET_GRAPH):
            yield self.finding(
                facts, call, "`reset_default_graph()` in graph code raises `Do not use tf.reset_default_graph() to "
                "clear nested graphs` when traced; reset outside the function, or not at all in TF2", function=function)
        for call, function in facts.graph_nodes(ast.Call):
            assert isinstance(call, ast.Call)
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "eval" and not call.args and not call.keywords \
                    and facts.surely_tensor(func.value):
                yield self.finding(
                    facts, call, "`.eval()` needs a TF1 default session: in graph code it raises `Cannot evaluate "
                    "tensor using eval()`; use the tensor itself", function=function)


def _literal_name(call: ast.Call) -> str | None:
    """The scope name a `name_scope` call gets as a string literal (first argument or `name=`)."""
    values = call.args[:1] + [k.value for k in call.keywords if k.arg == "name"]
    value = values[0] if values else None
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
