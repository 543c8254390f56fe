"""TFC001: Python print() in graph code."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.findings import Edit, Finding, Fix, Severity
from tfcheck.rule import Rule

# A debugging flag off at module level, read in a Keras call.
_DEBUG_FLAG = ("import tensorflow as tf\nDEBUG = False\nclass Actor(tf.keras.Model):\n    def call(self, state):\n"
               "        mean = self.dense(state)\n        if DEBUG:\n            print(mean)\n        return mean\n")


# Words that say a print reports tracing itself: "Tracing with", "traced", "retracing".
_TRACING = re.compile(r"\b(re)?trac(e|ed|es|ing)\b", re.IGNORECASE)


class PrintInGraph(Rule):
    """Python `print()` inside graph code runs only while the function is traced.

    ## What it does
    Finds calls to the built-in `print` in code that runs as a TensorFlow graph: functions decorated
    with `tf.function`, functions they call, and functions traced by `tf.data` or functional control
    flow. A `print` in a branch only eager execution takes (`if tf.executing_eagerly():`,
    `if hasattr(x, "numpy"):`) never runs while tracing and is not reported.

    ## Why is this bad
    Python side effects happen only while tracing. The message is printed on the first call (and on
    every retrace), not on later calls, and tensors print as symbolic placeholders rather than their
    values, which makes debugging output misleading.

    ## Example
    ```python
    @tf.function
    def f(x):
        print("x is", x)
        return x + 1
    ```

    ## Use instead
    ```python
    @tf.function
    def f(x):
        tf.print("x is", x)
        return x + 1
    ```
    `tf.print` is an operation in the graph and runs on every call. (Keep `print` on purpose to see
    when retracing happens; then suppress with `# tfcheck: ignore[TFC001]`.)
    """

    code = "TFC001"
    name = "print-in-graph"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    print(x)\n    return x\n",
        "import tensorflow as tf\ndef helper(x):\n    print(x)\n@tf.function\ndef f(x):\n    helper(x)\n",
        "from tensorflow import function\n@function(jit_compile=True)\ndef f(x):\n    print(x)\n",
        "import tensorflow as tf\nds = tf.data.Dataset.range(3).map(lambda x: print(x) or x)\n",
        # A subclass of a built-in layer (tensorflow/tensorflow#27519): `fit` traces its `call`.
        "import tensorflow as tf\nclass MyDense(tf.keras.layers.Dense):\n    def call(self, inputs):\n"
        "        print('not available.')\n        return super().call(inputs)\n",
        # A debugging flag that is on, or one the file sets elsewhere: the prints run (while tracing).
        _DEBUG_FLAG.replace("False", "True"),
        _DEBUG_FLAG + "def main():\n    global DEBUG\n    DEBUG = True\n",
        _DEBUG_FLAG.replace("if DEBUG:", "if not DEBUG:"),
    )
    must_not_flag = (
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    tf.print(x)\n",
        "def f(x):\n    print(x)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    with tf.init_scope():\n        print('building')\n",
        "import tensorflow as tf\ndef log(x):\n    print(x)\n    return x\n"
        "@tf.function\ndef f(x):\n    return tf.py_function(log, [x], tf.float32)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    print = tf.print\n    print(x)\n",
        # A branch only eager execution takes: never runs while tracing.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.executing_eagerly():\n        print(x)\n    return x\n",
        "import tensorflow as tf\nclass MyDense(tf.keras.layers.Dense):\n    def call(self, inputs):\n"
        "        if hasattr(inputs, 'numpy'):\n            print(inputs.numpy())\n        return super().call(inputs)\n",
        # A debugging flag the module sets off once and never changes: the branch never runs
        # (SAC-HER-Tensorflow2 3326bed Debug/models.py:24-94, cut down).
        _DEBUG_FLAG,
        _DEBUG_FLAG.replace("if DEBUG:", "if not DEBUG:\n            pass\n        else:"),
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        tf_alias = facts.tensorflow_alias
        for call, function in facts.graph_calls("builtins.print"):
            if facts.in_eager_only_branch(call, function):
                continue  # `if tf.executing_eagerly(): print(x.numpy())` never runs while tracing
            if _meant_for_tracing(facts, call):
                continue
            fix = None
            if tf_alias is not None:
                fix = Fix(f"Replace `print` with `{tf_alias}.print`", (_callee_edit(facts, call, f"{tf_alias}.print"),))
            yield self.finding(facts, call, "print() runs only while tracing, not on every call; use tf.print()",
                               fix, function)


def _meant_for_tracing(facts: FileFacts, call: ast.Call) -> bool:
    """A print whose text says it reports tracing (`print("Tracing with", x)`, the TensorFlow guide's own
    way to show when a function traces), or that prints only static shapes and dtypes (`print(x.shape)`):
    once per trace is what its author wants, and tf.print would not do better."""
    texts = [node.value for arg in call.args for node in ast.walk(arg)
             if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    if any(_TRACING.search(text) for text in texts):
        return True
    values = [arg for arg in call.args if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str))]
    return bool(values) and all(facts.tensor_metadata(value) for value in values)


def _callee_edit(facts: FileFacts, call: ast.Call, replacement: str) -> Edit:
    line, column, end_line, end_column = facts.span(call.func)
    return Edit(line, column, end_line, end_column, replacement)
