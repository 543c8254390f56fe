"""TFC005: a loop in graph code over Python or NumPy data, unrolled into the graph at trace time."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine import kinds
from tfcheck.engine.facts import LARGE_RANGE, FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule


class PythonDataLoop(Rule):
    """A loop over Python or NumPy data in graph code is unrolled into the graph.

    ## What it does
    Finds `for` loops in graph code over NumPy arrays, over `range()` of a large literal, over
    module-level lists of numbers, or over a parameter that a call in the same file fills with such
    data; and `while` loops counting a Python number up to a large literal or up to a bound computed
    from the length of an argument (`len(prices) - 1`). Loops over `tf.range`,
    tensors, datasets and structural lists (`self.layers`, a list of functions) are not flagged.

    ## Why is this bad
    AutoGraph converts a loop into a graph loop only when it iterates over a tensor or a dataset. A
    loop over Python data runs while tracing and adds a copy of its body to the graph for every
    element: the graph (and tracing time, and memory) grows with the data, and new data means a new
    trace. It is a warning because the result is still correct, only slow and large.

    ## Example
    ```python
    @tf.function
    def train(dataset):
        loss = tf.constant(0)
        for x, y in dataset:
            loss += tf.abs(y - x)
        return loss

    train([(1, 1)] * 10)  # 10 copies of the loop body in the graph
    ```

    ## Use instead
    ```python
    train(tf.data.Dataset.from_tensor_slices(data))  # the loop body appears once
    ```
    Wrap Python or NumPy data in a `tf.data.Dataset`, or loop with `tf.range` over a tensor.
    """

    code = "TFC005"
    name = "python-data-loop"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        # Reference: looping over Python data passed to a tf.function (through a measuring helper).
        "import tensorflow as tf\ndef measure_graph_size(f, *args):\n  g = f.get_concrete_function(*args).graph\n"
        "@tf.function\ndef train(dataset):\n  loss = tf.constant(0)\n  for x, y in dataset:\n"
        "    loss += tf.abs(y - x) # Some dummy computation.\n  return loss\n"
        "small_data = [(1, 1)] * 3\nbig_data = [(1, 1)] * 10\nmeasure_graph_size(train, small_data)\n"
        "measure_graph_size(train, big_data)\n",
        "import tensorflow as tf\n@tf.function\ndef train(data):\n    for x in data:\n        tf.print(x)\n"
        "train([(1.0, 2.0)] * 100)\n",
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(x):\n"
        "    for w in np.linspace(0.0, 1.0, 50):\n        x = x * w\n    return x\n",
        "import numpy as np\nimport tensorflow as tf\nWEIGHTS = np.ones(1000)\n@tf.function\ndef f(x):\n"
        "    for w in WEIGHTS:\n        x += w\n    return x\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    for i in range(1000):\n        x = x + i\n    return x\n",
        "import tensorflow as tf\nSTEPS = 500\n@tf.function\ndef f(x):\n    for i in range(STEPS):\n"
        "        x = x * 0.9\n    return x\n",
        "import tensorflow as tf\nDATA = [(0.5, 1.0), (1.5, 2.0), (2.5, 3.0)] * 20\n@tf.function\ndef f(x):\n    for d in DATA:\n"
        "        x += d\n    return x\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    i = 0\n    while i < 1000:\n        x = x + 1\n"
        "        i += 1\n    return x\n",
        # tensorflow/tensorflow#43111: a bound from the length of an argument (the reporter's get_loss).
        "import tensorflow as tf\n@tf.function\ndef get_loss(h_actions, prices):\n    profit = 0.0\n    index = 0\n"
        "    final_index = len(prices) - 1\n    while index < final_index:\n        curr_price = prices[index]\n"
        "        profit += curr_price * h_actions[index]\n        index += 1\n    return profit\n",
    )
    must_not_flag = (
        # Reference: the same loop fed a dataset.
        "import tensorflow as tf\ndef measure_graph_size(f, *args):\n  g = f.get_concrete_function(*args).graph\n"
        "@tf.function\ndef train(dataset):\n  loss = tf.constant(0)\n  for x, y in dataset:\n"
        "    loss += tf.abs(y - x) # Some dummy computation.\n  return loss\n"
        "small_data = [(1, 1)] * 3\nmeasure_graph_size(train, tf.data.Dataset.from_generator(\n"
        "    lambda: small_data, (tf.int32, tf.int32)))\n",
        "import tensorflow as tf\n@tf.function\ndef f(n):\n    for i in tf.range(n):\n        tf.print(i)\n",
        "import tensorflow as tf\nclass M(tf.keras.Model):\n    def train_step(self, x):\n"
        "        for layer in self.layers:\n            x = layer(x)\n        return x\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    for i in range(3):\n        x = x + i\n    return x\n",
        "import numpy as np\nimport tensorflow as tf\nKERNEL = np.array([0.25, 0.5, 0.25])\n@tf.function\n"
        "def f(x):\n    for w in KERNEL:\n        x = x * w\n    return x\n",
        # Configuration passed as small literal lists: structure, not data.
        "import tensorflow as tf\nKERNELS = [(3, 3), (5, 5)]\n@tf.function\ndef f(x, widths):\n"
        "    for k in KERNELS:\n        x = tf.nn.avg_pool2d(x, k, 1, 'SAME')\n    for w in widths:\n"
        "        x = x * w\n    return x\nf(tf.ones([1, 8, 8, 1]), [64, 128])\n",
        "import tensorflow as tf\nSCALES = [0.5, 1.0, 2.0]\n@tf.function\ndef f(x):\n"
        "    for s in SCALES:\n        x = x * s\n    return x\n",
        "import tensorflow as tf\nACTIVATIONS = [tf.nn.relu, tf.nn.tanh]\n@tf.function\ndef f(x):\n"
        "    for act in ACTIVATIONS:\n        x = act(x)\n    return x\n",
        "import numpy as np\nWEIGHTS = np.ones(1000)\ndef f(x):\n    for w in WEIGHTS:\n        x += w\n"
        "    return x\n",
        "import tensorflow as tf\n@tf.function\ndef f(ds):\n    for batch in ds:\n        tf.print(batch)\n"
        "f(tf.data.Dataset.range(10))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    i = tf.constant(0)\n    while i < 1000:\n"
        "        i += 1\n    return x\n",
        # A tensor counter up to the length of an argument: a graph loop.
        "import tensorflow as tf\n@tf.function\ndef f(prices):\n    i = tf.constant(0)\n    n = len(prices)\n"
        "    while i < n:\n        i += 1\n    return i\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for loop, function in facts.graph_nodes(ast.For, ast.AsyncFor, ast.While):
            what = None if facts.may_be_graph_loop(loop) else _unrolled_data(facts, loop, function)
            if what is not None:
                yield self.finding(facts, loop, _message(what), function=function)


def _unrolled_data(facts: FileFacts, loop: ast.AST, function: FunctionInfo) -> str | None:
    if isinstance(loop, ast.While):
        return _counted_while(facts, loop.test, function)
    assert isinstance(loop, (ast.For, ast.AsyncFor))
    return facts.python_data(loop.iter) or _data_parameter(facts, loop.iter, function)


def _data_parameter(facts: FileFacts, iterable: ast.expr, function: FunctionInfo) -> str | None:
    """A parameter of a tf.function that a call in this file fills with Python data."""
    if not isinstance(iterable, ast.Name) or not facts.is_parameter(iterable, function):
        return None
    for tf_call, argument in facts.arguments_to(function, iterable.id):
        listed = facts.is_number_data(argument) and facts.looks_like_data(argument)
        what = facts.python_data(argument) or ("a Python list" if listed else None)
        if what is not None:
            return f"`{iterable.id}`, which {facts.line_name(tf_call.call.lineno)} passes {what}"
    return None


def _counted_while(facts: FileFacts, test: ast.expr, function: FunctionInfo) -> str | None:
    """`while i < 1000:` with `i` a Python number: 1000 unrolled iterations; or `while i < n:` with `n`
    computed from the length of an argument (`len(prices) - 1`): as many as the data is long."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Lt, ast.LtE))
            and isinstance(test.left, ast.Name) and facts.kinds(test.left) == {kinds.NUMBER}):
        return None
    bound = test.comparators[0]
    if isinstance(bound, ast.Name):
        bound = facts.module_constant(bound) or _local_value(facts, bound, function) or bound
    if isinstance(bound, ast.Constant) and type(bound.value) is int and bound.value >= LARGE_RANGE:
        return f"a Python counter up to {bound.value}"
    if facts.kinds(bound) == {kinds.NUMBER} and _length_of_argument(facts, bound, function):
        return f"a Python counter up to `{facts.text(bound)}` (from the length of an argument)"
    return None


def _local_value(facts: FileFacts, name: ast.Name, function: FunctionInfo) -> ast.expr | None:
    """The value of a local of `function` assigned exactly once."""
    bindings = facts.bindings_of(name)
    if facts.binding_scope(name) is not function.scope or len(bindings) != 1 or bindings[0].kind != "assign":
        return None
    return bindings[0].value


def _length_of_argument(facts: FileFacts, bound: ast.expr, function: FunctionInfo) -> bool:
    """`bound` holds `len(p)` of a parameter `p` of the graph function (a Python int while tracing)."""
    return any(isinstance(node, ast.Call) and facts.resolve(node.func) == "builtins.len" and len(node.args) == 1
               and facts.is_parameter(node.args[0], function) for node in ast.walk(bound))


def _message(what: str) -> str:
    return (f"loop over {what} runs while tracing and unrolls into the graph, one copy of its body per element; "
            "wrap the data in a tf.data.Dataset or loop over tf.range")
