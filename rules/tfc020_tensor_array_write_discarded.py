"""TFC020: the result of `TensorArray.write` (or `scatter`, `unstack`, `split`) thrown away in graph code."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import TENSOR_ARRAY_UPDATES, FileFacts
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule


class TensorArrayWriteDiscarded(Rule):
    """`ta.write(i, x)` without `ta = ...`: in graph code the write is lost.

    ## What it does
    Finds statements in graph code that call `write`, `scatter`, `unstack` or `split` on a
    `tf.TensorArray` and drop the result: `ta.write(i, x)` instead of `ta = ta.write(i, x)`.

    ## Why is this bad
    These methods return a new TensorArray that holds the write; the array they are called on is not
    changed in a graph. Eagerly the write happens in place, so the code works until it is decorated,
    then `ta.stack()` returns an array of zeros (or whatever was written before), silently. This is
    reported as an error because the result is wrong. An array made eagerly (in `__init__`, at module
    level) is a Python list underneath and is written in place even from graph code, so only arrays
    made in graph code are reported.

    Checked against TensorFlow 2.21 (every example below run): the Example returns `[0. 0. 0.]` under
    `tf.function` and `[2. 2. 2.]` eagerly (where TensorFlow only logs "Object was never used"); two
    discarded writes, a discarded chain `ta.write(0, x).write(1, x)`, a discarded `ta.unstack(x)` and an
    array made on `self` in the traced method all stack to zeros; `ta = ta.write(0, x).write(1, x)`,
    `return ta.write(...)...` and a `tf.while_loop` body returning `ta.write(...)` keep the writes; an
    array made in `__init__` keeps a discarded write.

    ## Example
    ```python
    @tf.function
    def f(x):
        ta = tf.TensorArray(tf.float32, size=3)
        for i in tf.range(3):
            ta.write(i, x)
        return ta.stack()
    ```

    ## Use instead
    ```python
    @tf.function
    def f(x):
        ta = tf.TensorArray(tf.float32, size=3)
        for i in tf.range(3):
            ta = ta.write(i, x)
        return ta.stack()
    ```
    """

    code = "TFC020"
    name = "tensor-array-write-discarded"
    severity = Severity.ERROR
    must_flag = (
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    ta = tf.TensorArray(tf.float32, size=3)\n"
        "    for i in tf.range(3):\n        ta.write(i, x)\n    return ta.stack()\n",
        # From a real issue: the array is rebound by `y = y.stack()` after the loop.
        "import tensorflow as tf\n@tf.function\ndef use_tensor_array(x):\n"
        "    y = tf.TensorArray(x.dtype, tf.shape(x)[0])\n    for i in tf.range(tf.shape(x)[0]):\n"
        "        y.write(i, x[i])\n    y = y.stack()\n    return y\n",
        # Straight-line writes, a chain of writes, and unstack.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    ta = tf.TensorArray(tf.float32, size=2)\n"
        "    ta.write(0, x)\n    ta.write(1, x)\n    return ta.stack()\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    ta = tf.TensorArray(tf.float32, size=2)\n"
        "    ta.write(0, x).write(1, x)\n    return ta.stack()\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    ta = tf.TensorArray(tf.float32, size=3)\n"
        "    ta.unstack(x)\n    return ta.read(0)\n",
        # An array kept on self, and one written after it was rebound by a write.
        "import tensorflow as tf\nclass M(tf.Module):\n    @tf.function\n    def __call__(self, x):\n"
        "        self.ta = tf.TensorArray(tf.float32, size=2)\n        self.ta.write(0, x)\n"
        "        return self.ta.stack()\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    ta = tf.TensorArray(tf.float32, size=2)\n"
        "    ta = ta.write(0, x)\n    ta.write(1, x)\n    return ta.stack()\n",
    )
    must_not_flag = (
        # Reference: the result assigned back.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    ta = tf.TensorArray(tf.float32, size=3)\n"
        "    for i in tf.range(3):\n        ta = ta.write(i, x)\n    return ta.stack()\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    ta = tf.TensorArray(tf.float32, size=2)\n"
        "    ta = ta.write(0, x).write(1, x)\n    return ta.stack()\n",
        # Returned, passed on, or used in an expression.
        "import tensorflow as tf\ndef body(i, ta, x):\n    return i + 1, ta.write(i, x)\n@tf.function\ndef f(x):\n"
        "    ta = tf.TensorArray(tf.float32, size=3)\n"
        "    _, ta = tf.while_loop(lambda i, ta: i < 3, lambda i, ta: body(i, ta, x), (0, ta))\n    return ta.stack()\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    ta = tf.TensorArray(tf.float32, size=1)\n"
        "    return ta.write(0, x).stack()\n",
        # Eager code: the write happens in place (TensorFlow only logs a warning).
        "import tensorflow as tf\ndef f(x):\n    ta = tf.TensorArray(tf.float32, size=1)\n    ta.write(0, x)\n"
        "    return ta.stack()\n",
        # An array made eagerly (in __init__) is a Python list of tensors: `write` changes it in place.
        "import tensorflow as tf\nclass M(tf.Module):\n    def __init__(self):\n"
        "        self.ta = tf.TensorArray(tf.float32, size=2)\n    @tf.function\n    def __call__(self, x):\n"
        "        self.ta.write(0, x)\n        return self.ta.stack()\n",
        # Something else with a write method: a file, a summary writer.
        "import tensorflow as tf\n@tf.function\ndef f(x, log):\n    log.write('step')\n    return x\n",
        "import tensorflow as tf\nOUT = open('log.txt', 'w')\n@tf.function\ndef f(x):\n    OUT.write('traced')\n"
        "    return x\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for statement, function in facts.graph_nodes(ast.Expr):
            call = statement.value  # type: ignore[attr-defined]
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr in TENSOR_ARRAY_UPDATES):
                continue
            origins = facts.tensor_array_origins(call.func.value)
            if not origins or not all(facts.in_graph_code(origin) for origin in origins):
                continue  # an array made eagerly (in __init__, at module level) is written in place
            array = facts.tensor_array_root(call) or call.func.value
            yield self.finding(
                facts, call, f"`{facts.text(call.func)}(...)` returns a new TensorArray and its result is dropped: "
                f"in graph code the write is lost (the array stacks to zeros); assign it, `{facts.text(array)} = "
                f"{facts.text(call)}`", function=function)

