"""TFC007: next() on, or a loop over, a Python iterator or generator that outlives the graph function."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class PythonIterator(Rule):
    """A Python iterator used in graph code advances only while tracing.

    ## What it does
    Finds `next(it)`, `for x in it:` and comprehensions over `it` in graph code where `it` is a
    Python iterator or generator (`iter(list)`, `zip(...)`, a generator object,
    `dataset.as_numpy_iterator()`) created outside the function: a module-level or closure name, an
    attribute of `self`, or a parameter that a call in the same file fills with one. Iterators
    created inside the function, and tf.data iterators (`iter(dataset)`), are fine.

    ## Why is this bad
    Advancing a Python iterator is a Python side effect: it happens once, while tracing, and the value
    it produced is frozen into the graph. Every later call reuses that first value instead of consuming
    the next one (and a loop over the iterator sees it exhausted on a retrace). The result is silently
    wrong, so this is reported as an error.

    ## Example
    ```python
    @tf.function
    def buggy_consume_next(iterator):
        tf.print("Value:", next(iterator))

    iterator = iter([1, 2, 3])
    buggy_consume_next(iterator)
    buggy_consume_next(iterator)  # prints 1 again
    ```

    ## Use instead
    ```python
    ds = tf.data.Dataset.from_tensor_slices([1, 2, 3])
    iterator = iter(ds)  # a tf.data iterator: advanced by the graph on every call
    good_consume_next(iterator)
    ```
    """

    code = "TFC007"
    name = "python-iterator"
    severity = Severity.ERROR
    must_flag = (
        # Reference: a Python iterator passed to a tf.function.
        "import tensorflow as tf\n@tf.function\ndef buggy_consume_next(iterator):\n"
        "  tf.print(\"Value:\", next(iterator))\n\niterator = iter([1, 2, 3])\nbuggy_consume_next(iterator)\n"
        "buggy_consume_next(iterator)\nbuggy_consume_next(iterator)\n",
        "import tensorflow as tf\nexternal_var = tf.Variable(0)\n@tf.function\ndef buggy_consume_next(iterator):\n"
        "  external_var.assign_add(next(iterator))\n  tf.print(\"Value of external_var:\", external_var)\n\n"
        "iterator = iter([0, 1, 2, 3])\nbuggy_consume_next(iterator)\nbuggy_consume_next(iterator)\n",
        # A module-level generator read from graph code.
        "import tensorflow as tf\ndef gen():\n    yield 1\n    yield 2\nSTREAM = gen()\n@tf.function\n"
        "def f(x):\n    return x + next(STREAM)\n",
        "import itertools\nimport tensorflow as tf\nCOUNTER = itertools.count()\n@tf.function\ndef f(x):\n"
        "    return x * next(COUNTER)\n",
        # An iterator kept on self; a loop over an outer zip.
        "import tensorflow as tf\nclass M(tf.Module):\n    def __init__(self, items):\n"
        "        self.items = iter(list(items))\n    @tf.function\n    def __call__(self, x):\n"
        "        return x + next(self.items)\n",
        "import tensorflow as tf\nPAIRS = zip([1, 2], [3, 4])\n@tf.function\ndef f(x):\n"
        "    for a, b in PAIRS:\n        x = x + a * b\n    return x\n",
        "import tensorflow as tf\nLINES = (float(line) for line in open('weights.txt'))\n@tf.function\n"
        "def f(x):\n    return x * tf.constant([w for w in LINES])\n",
    )
    must_not_flag = (
        # Reference: a tf.data iterator.
        "import tensorflow as tf\n@tf.function\ndef good_consume_next(iterator):\n"
        "  # This is ok, iterator is a tf.data.Iterator\n  tf.print(\"Value:\", next(iterator))\n\n"
        "ds = tf.data.Dataset.from_tensor_slices([1, 2, 3])\niterator = iter(ds)\ngood_consume_next(iterator)\n"
        "good_consume_next(iterator)\ngood_consume_next(iterator)\n",
        # Iterators created inside the function behave the same on every trace.
        "import tensorflow as tf\n@tf.function\ndef f(xs):\n    it = iter([1, 2, 3])\n    return next(it)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, ys):\n    for a, b in zip([1, 2], [3, 4]):\n"
        "        x = x + a * b\n    return x\n",
        # Outside graph code; and an iterator of a dataset kept on self.
        "ITEMS = iter([1, 2])\ndef f():\n    return next(ITEMS)\n",
        "import tensorflow as tf\nclass T(tf.Module):\n    def __init__(self, ds):\n"
        "        self.it = iter(tf.data.Dataset.range(3))\n    @tf.function\n    def step(self):\n"
        "        return next(self.it)\n",
        # An unknown iterable: not known to be a Python iterator.
        "import tensorflow as tf\n@tf.function\ndef f(it):\n    return next(it)\nf(make_iterator())\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for call, function in facts.graph_calls("builtins.next"):
            if call.args:
                where = _outer_python_iterator(facts, call.args[0], function)
                if where is not None:
                    yield self.finding(
                        facts, call, f"next() on {where} advances it only while tracing: every call reuses the "
                        "traced value; use a tf.data iterator (iter(dataset)) or pass tensors", function=function)
        for loop, function in facts.graph_nodes(ast.For, ast.AsyncFor, *_COMPREHENSIONS):
            iterable = loop.iter if isinstance(loop, (ast.For, ast.AsyncFor)) else loop.generators[0].iter  # type: ignore[attr-defined]
            where = _outer_python_iterator(facts, iterable, function)
            if where is not None:
                yield self.finding(
                    facts, loop, f"loop over {where} consumes it only while tracing: later calls reuse the "
                    "traced values (and a retrace finds it exhausted); iterate over a tf.data.Dataset",
                    function=function)


def _outer_python_iterator(facts: FileFacts, expr: ast.expr, function: FunctionInfo) -> str | None:
    """How to name `expr` when it is a Python iterator that outlives one call of `function`, else None."""
    if isinstance(expr, ast.Attribute) and facts.is_self_attribute(expr):
        cls = facts.class_of_self(expr)
        assigned = facts.self_attribute_values(cls, expr.attr) if cls is not None else []
        if assigned and all(facts.is_python_iterator(value) for _, value in assigned):
            return f"the Python iterator `self.{expr.attr}`"
        return None
    if not isinstance(expr, ast.Name):
        return None
    scope = facts.binding_scope(expr)
    if scope is None:
        return None
    if scope.node is not function.node:
        return f"the Python iterator `{expr.id}`" if facts.is_python_iterator(expr) else None
    if expr.id in function.params:
        return _iterator_argument(facts, expr.id, function)
    return None


def _iterator_argument(facts: FileFacts, parameter: str, function: FunctionInfo) -> str | None:
    for tf_call, argument in facts.arguments_to(function, parameter):
        if facts.is_python_iterator(argument):
            return f"`{parameter}`, a Python iterator ({facts.line_name(tf_call.call.lineno)} passes one)"
    return None
