"""TFC022: `next(iterator, default)` on a tf.data iterator in graph code: the default is never returned."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule


class NextDefaultOnDatasetIterator(Rule):
    """`next(it, default)` on a tf.data iterator in graph code raises OutOfRangeError at the end.

    ## What it does
    Finds `next(it, default)` in graph code where `it` is surely a tf.data iterator: `iter(dataset)`,
    `dataset.__iter__()`, the iterator of a distributed dataset
    (`iter(strategy.experimental_distribute_dataset(ds))`), held in a local, outer or `self` name, or a
    parameter that every call of the tf.function in the file fills with one.

    ## Why is this bad
    In graph code `next()` on a tf.data iterator is a graph op (`IteratorGetNext`). Python's default
    is only returned when the iterator raises StopIteration while tracing, which it never does: when the
    data runs out, the op raises `OutOfRangeError` at run time instead of producing the default. The
    code works eagerly and fails when decorated. (`next()` without a default on a dataset iterator is
    fine and not reported; TFC007 covers Python iterators.)

    Checked against TensorFlow 2.21 (every example below run): the Example raises OutOfRangeError on
    its fourth draw from a three-element dataset under `tf.function` and returns `-1` eagerly; the
    other must-flag examples raise OutOfRangeError once the data runs out, the distributed one with a
    `OneDeviceStrategy`; `get_next_as_optional()` and `next(iter([1, 2]), -1)` return their defaults.

    ## Example
    ```python
    ds = tf.data.Dataset.from_tensor_slices([1, 2, 3])
    it = iter(ds)

    @tf.function
    def draw():
        return [next(it, -1) for _ in range(4)]
    ```

    ## Use instead
    ```python
    @tf.function
    def draw():
        element = it.get_next_as_optional()
        return tf.cond(element.has_value(), element.get_value, lambda: -1)
    ```
    """

    code = "TFC022"
    name = "next-default-on-dataset-iterator"
    severity = Severity.ERROR
    must_flag = (
        "import tensorflow as tf\nds = tf.data.Dataset.from_tensor_slices([1, 2, 3])\nit = iter(ds)\n"
        "@tf.function\ndef draw():\n    return [next(it, -1) for _ in range(4)]\n",
        # From a real issue.
        "import tensorflow as tf\nx = tf.convert_to_tensor([[1], [2], [3]])\nds = tf.data.Dataset.from_tensor_slices(x)\n"
        "dsi = iter(ds)\n@tf.function\ndef func():\n    for _ in range(4):\n        tf.print(next(dsi, -1))\n",
        # A local iterator, one kept on self, one passed in, a distributed one.
        "import tensorflow as tf\n@tf.function\ndef f():\n    ds = tf.data.Dataset.range(0)\n    it = ds.__iter__()\n"
        "    return next(it, tf.constant(-1, tf.int64))\n",
        "import tensorflow as tf\nclass Reader(tf.Module):\n    def __init__(self):\n"
        "        self.it = iter(tf.data.Dataset.range(2))\n    @tf.function\n    def __call__(self):\n"
        "        return next(self.it, tf.constant(-1, tf.int64))\n",
        "import tensorflow as tf\n@tf.function\ndef step(iterator):\n    return next(iterator, tf.constant(-1))\n"
        "step(iter(tf.data.Dataset.from_tensor_slices([1])))\n",
        "import tensorflow as tf\nstrategy = tf.distribute.OneDeviceStrategy('/cpu:0')\n"
        "dist = strategy.experimental_distribute_dataset(tf.data.Dataset.range(3).batch(1))\nit = iter(dist)\n"
        "@tf.function\ndef f():\n    return [next(it, -1) for _ in range(4)]\n",
    )
    must_not_flag = (
        # Reference: an optional, and next() without a default.
        "import tensorflow as tf\nit = iter(tf.data.Dataset.from_tensor_slices([1, 2, 3]))\n@tf.function\ndef draw():\n"
        "    element = it.get_next_as_optional()\n    return tf.cond(element.has_value(), element.get_value, lambda: -1)\n",
        "import tensorflow as tf\nit = iter(tf.data.Dataset.range(3))\n@tf.function\ndef draw():\n    return next(it)\n",
        # A Python iterator's default works while tracing; eager code is fine.
        "import tensorflow as tf\n@tf.function\ndef f():\n    it = iter([1, 2])\n    return [next(it, -1) for _ in range(3)]\n",
        "import tensorflow as tf\nit = iter(tf.data.Dataset.range(3))\ndef draw():\n    return [next(it, -1) for _ in range(4)]\n",
        # An iterator the file does not pin down.
        "import tensorflow as tf\n@tf.function\ndef step(iterator):\n    return next(iterator, None)\nstep(make_iterator())\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for call, function in facts.graph_calls("builtins.next"):
            if len(call.args) != 2 or call.keywords:
                continue
            where = _dataset_iterator(facts, call.args[0], function)
            if where is not None:
                yield self.finding(
                    facts, call, f"`next()` on {where} is a graph op: when the data runs out it raises "
                    f"OutOfRangeError, the default `{facts.text(call.args[1])}` is never returned; use "
                    "`get_next_as_optional()`", function=function)


def _dataset_iterator(facts: FileFacts, expr: ast.expr, function: FunctionInfo) -> str | None:
    """How to name `expr` when it is surely a tf.data iterator, else None."""
    if facts.is_dataset_iterator(expr):
        return f"the tf.data iterator `{facts.text(expr)}`"
    if facts.is_parameter(expr, function):
        calls = facts.tf_function_calls_of(function)
        if calls and all(facts.is_dataset_iterator(call.arguments.get(expr.id)) for call in calls):
            return f"`{expr.id}`, a tf.data iterator ({facts.line_name(calls[0].call.lineno)} passes one)"
    return None
