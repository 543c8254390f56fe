"""TFC039: a symbolic Keras 3 KerasTensor (from `keras.Input`) given to TensorFlow, NumPy or Python as a value."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_INPUTS = frozenset({"keras.Input", "keras.layers.Input"})
# TensorFlow modules whose functions are ops: every one raises on a KerasTensor. Others (`tf.nest`,
# `tf.data`, `tf.summary`) take any Python object or are not called on model inputs.
_TF_OP_MODULES = frozenset({"", "math", "nn", "linalg", "image", "signal", "random", "strings", "debugging",
                            "bitwise", "sparse"})
# TensorFlow functions of those modules that accept a KerasTensor (checked: `tf.is_tensor`, `tf.as_dtype`).
_TF_ACCEPTING = frozenset({"is_tensor", "as_dtype", "name_scope", "function", "print"})
_PYTHON_CONVERSIONS = frozenset({"builtins.int", "builtins.float", "builtins.bool", "builtins.len",
                                 "numpy.asarray", "numpy.array"})
# `keras.ops` functions whose result is not a KerasTensor, or that raise on one (the window functions).
_OPS_NOT_SYMBOLIC = frozenset({"shape", "convert_to_numpy", "hamming", "hanning", "blackman", "bartlett", "kaiser"})
_OPS_WINDOWS = frozenset({"hamming", "hanning", "blackman", "bartlett", "kaiser"})
# Orderings of a KerasTensor are KerasTensors (checked); `==` is Python's identity test, a bool.
_ORDERINGS = (ast.Lt, ast.Gt, ast.LtE, ast.GtE)
_DEPTH = 12
_K = "import keras\nfrom keras import ops\nimport tensorflow as tf\nimport numpy as np\n"


class KerasTensorMisused(Rule):
    """A symbolic KerasTensor has no value: TensorFlow ops, `int()`, NumPy, `if` and `for` reject it.

    ## What it does
    Finds, outside graph code, a KerasTensor used as a value: given to a TensorFlow op (`tf.reshape`,
    `tf.nn.relu`, `tf.shape`, `tf.concat([...])`), to `int()`, `float()`, `bool()`, `len()`,
    `np.asarray()` or `np.array()`, iterated over (`for`, a comprehension), used as a condition (`if`,
    `while`, `not`, `and`/`or`, `assert`), or given to a `keras.ops` window function (`hamming`, ...).
    A KerasTensor here is the result of `keras.Input(...)` / `keras.layers.Input(...)` (also through
    `tf.keras`), of a Keras layer called on one (`keras.layers.Dense(3)(x)`, or a name bound to a
    layer), of a `keras.ops` function, an arithmetic operator, an ordering (`<`, `>`) or an index on one, or a name bound
    to any of these by the assignment that reaches it (every binding of it a plain assignment at the
    top level of its function or module). Only in files that show they are written for Keras 3
    (`FileIndex.keras_3`: `keras.ops`, `keras.config`, `keras.random`, `keras.Variable`): Keras 2,
    `tf.keras` up to TensorFlow 2.15, wrapped TensorFlow ops on its KerasTensors into `TFOpLambda`
    layers, and code written for it is not wrong (the corpus's 22 `tf.keras` findings were all such).

    ## Why is this bad
    In Keras 3, `tf.keras` from TensorFlow 2.16 on, a functional model's inputs are symbolic
    placeholders of a shape and a dtype. TensorFlow ops raise `ValueError: A KerasTensor cannot be
    used as input to a TensorFlow function`; `int()`, `float()` and NumPy raise `ValueError: A
    KerasTensor is symbolic ... You cannot convert it`; iterating raises `NotImplementedError`, `if`
    raises `TypeError: A symbolic KerasTensor cannot be used as a boolean`. All checked against
    TensorFlow 2.21 (Keras 3), as are the near-misses that work: `keras.ops.reshape(x, ...)`,
    `keras.ops.shape(x)`, `x.shape`, `x + 1`, and a `keras.layers.Lambda` wrapping TensorFlow ops.

    ## Example
    ```python
    inputs = keras.Input((4,))
    x = keras.layers.Dense(4)(inputs)
    x = tf.reshape(x, (-1, 2, 2))
    ```

    ## Use instead
    ```python
    inputs = keras.Input((4,))
    x = keras.layers.Dense(4)(inputs)
    x = keras.ops.reshape(x, (-1, 2, 2))
    ```
    """

    code = "TFC039"
    name = "keras-tensor-misused"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # Checked in TF 2.21: ValueError "A KerasTensor cannot be used as input to a TensorFlow function".
        _K + "inputs = keras.Input((4,))\nx = keras.layers.Dense(4)(inputs)\nx = tf.reshape(x, (-1, 2, 2))\n",
        _K + "inp = tf.keras.Input((4,))\ny = tf.nn.relu(inp)\n",
        _K + "inp = keras.layers.Input((4,))\nn = tf.shape(inp)[0]\n",
        _K + "def build():\n    a = keras.Input((4,))\n    dense = keras.layers.Dense(3)\n    h = dense(a)\n"
        "    out = tf.concat([a, h], -1)\n    return keras.Model(a, out)\n",
        _K + "inp = keras.Input((4,))\ny = tf.nn.relu(keras.ops.relu(inp) * 2)\n",
        # Checked: ValueError "You cannot convert it to an int / a float / a NumPy array".
        _K + "inp = keras.Input((4,))\nn = int(inp)\n",
        _K + "inp = keras.Input((4,))\nn = float(inp[0])\n",
        _K + "inp = keras.Input((4,))\na = np.asarray(inp)\n",
        # Checked: NotImplementedError "Iterating over a symbolic KerasTensor is not supported".
        _K + "inp = keras.Input((4,))\nparts = [v * 2 for v in inp]\n",
        # Checked: TypeError "A symbolic KerasTensor cannot be used as a boolean".
        _K + "def build():\n    inp = keras.Input((4,))\n    if inp:\n        return inp\n",
        _K + "def build():\n    inp = keras.Input((4,))\n    h = keras.layers.Dense(3)(inp)\n"
        "    if keras.ops.sum(h) > 0:\n        return h\n",
        # Checked: TypeError "Hamming operation does not support symbolic tensors".
        _K + "inp = keras.Input((4,))\nw = keras.ops.hamming(inp)\n",
    )
    must_not_flag = (
        # Checked: keras.ops, the shape, arithmetic and a Lambda around TensorFlow ops all work.
        _K + "inp = keras.Input((4,))\nx = keras.ops.reshape(inp, (-1, 2, 2))\nn = keras.ops.shape(inp)[0]\n",
        _K + "inp = keras.Input((4,))\nd = int(inp.shape[-1])\nx = inp + 1\n",
        _K + "inp = keras.Input((4,))\nx = keras.layers.Lambda(lambda t: tf.reshape(t, (-1, 2, 2)))(inp)\n",
        _K + "inp = keras.Input((4,))\nok = tf.is_tensor(inp)\nflat = tf.nest.flatten(inp)\n",
        # Checked: `==` of a KerasTensor is a bool.
        _K + "inp = keras.Input((4,))\nsame = 1 if inp == 1 else 0\n",
        # Keras 2: TensorFlow ops on a KerasTensor become TFOpLambda layers; a file that names no API only
        # Keras 3 has may be written for it (ageron/handson-ml2 16_nlp_with_rnns_and_attention.ipynb, TF 2.x).
        "import tensorflow as tf\ninp = tf.keras.Input((4,))\ny = tf.nn.relu(inp)\n",
        "import tf_keras as keras\nimport tensorflow as tf\ninp = keras.Input((4,))\ny = tf.reshape(inp, (-1, 2, 2))\n",
        "import tensorflow as tf\nopt = tf.keras.optimizers.legacy.Adam()\ninp = tf.keras.Input((4,))\n"
        "y = tf.nn.relu(inp)\n",
        # Inside a layer's call the values are real tensors.
        _K + "class Block(keras.layers.Layer):\n    def call(self, x):\n        h = keras.layers.Dense(3)(x)\n"
        "        return tf.nn.relu(h)\n",
        # The name bound twice: it may hold something else.
        _K + "inp = keras.Input((4,))\ninp = np.ones((2, 4))\ny = tf.reshape(inp, (-1, 2, 2))\n",
        # Bound again in a loop: which binding reaches the use is not straight-line.
        _K + "x = keras.Input((4,))\nfor _ in range(2):\n    x = np.ones((2, 4))\ny = tf.reshape(x, (-1, 2, 2))\n",
        # Keras 2 internals.
        "import tensorflow as tf\nfrom tensorflow.python.keras.layers import Input\ninp = Input((4,))\n"
        "y = tf.reshape(inp, (-1, 2, 2))\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        if not facts.keras_3:
            return
        for node, _ in facts.all_nodes():
            if facts.in_graph_code(node):
                continue
            for value, use in _value_uses(facts, node):
                if _keras_tensor(facts, value, _DEPTH):
                    yield self.finding(
                        facts, value, f"`{facts.text(value)}` is a symbolic KerasTensor (from `keras.Input`) in "
                        f"Keras 3: {use} raises; use `keras.ops` or a Keras layer, or read its `.shape`")


def _value_uses(facts: FileFacts, node: ast.AST) -> Iterator[tuple[ast.expr, str]]:
    """The expressions `node` uses as values (TensorFlow op arguments, conversions, conditions, iterables)."""
    if isinstance(node, ast.Call):
        name = facts.resolve(node.func) or ""
        use = _value_call(name)
        if use is not None:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                yield from ((item, use) for item in (arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]))
    elif isinstance(node, ast.For):
        yield node.iter, "iterating over it"
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        yield from ((generator.iter, "iterating over it") for generator in node.generators)
    elif isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
        yield node.test, "using it as a condition"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node.operand, "using it as a condition"
    elif isinstance(node, ast.BoolOp):
        yield from ((value, "using it as a condition") for value in node.values[:-1])


def _value_call(name: str) -> str | None:
    """How a call of `name` uses its arguments as values, or None when it accepts a KerasTensor."""
    if name in _PYTHON_CONVERSIONS:
        return f"`{name.split('.', 1)[-1]}()` of it"
    if name.startswith("keras.ops.") and name.rsplit(".", 1)[-1] in _OPS_WINDOWS:
        return f"`{name}` of it"
    if not name.startswith("tensorflow."):
        return None
    module, _, function = name[len("tensorflow."):].rpartition(".")
    if module in _TF_OP_MODULES and function[:1].islower() and function not in _TF_ACCEPTING:
        return f"the TensorFlow function `{name}` given it"
    return None


def _keras_tensor(facts: FileFacts, expr: ast.expr, depth: int) -> bool:
    """Whether `expr` is surely a KerasTensor: see the rule's docstring for the forms followed."""
    if depth == 0:
        return False
    if isinstance(expr, ast.Name):
        value = _reaching_value(facts, expr)
        return value is not None and _keras_tensor(facts, value, depth - 1)
    if isinstance(expr, ast.BinOp):
        return _keras_tensor(facts, expr.left, depth - 1) or _keras_tensor(facts, expr.right, depth - 1)
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and isinstance(expr.ops[0], _ORDERINGS):
        return _keras_tensor(facts, expr.left, depth - 1) or _keras_tensor(facts, expr.comparators[0], depth - 1)
    if isinstance(expr, ast.Subscript):
        return _keras_tensor(facts, expr.value, depth - 1)
    if not isinstance(expr, ast.Call):
        return False
    name = facts.resolve(expr.func) or ""
    if name in _INPUTS:
        return True
    if name.startswith("keras.ops."):
        return name.rsplit(".", 1)[-1] not in _OPS_NOT_SYMBOLIC and _any_keras_tensor(facts, expr.args, depth)
    return _is_keras_layer(facts, expr.func) and _any_keras_tensor(facts, expr.args[:1], depth)


def _any_keras_tensor(facts: FileFacts, args: list[ast.expr], depth: int) -> bool:
    """An argument, or an item of a list or tuple argument, is a KerasTensor."""
    items = [i for a in args for i in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])]
    return any(_keras_tensor(facts, item, depth - 1) for item in items)


def _is_keras_layer(facts: FileFacts, expr: ast.expr) -> bool:
    """`expr` is a Keras layer made here (`keras.layers.Dense(3)`) or a name bound to one."""
    if isinstance(expr, ast.Name):
        value = _reaching_value(facts, expr)
        return value is not None and _is_keras_layer(facts, value)
    if not isinstance(expr, ast.Call):
        return False
    name = facts.resolve(expr.func) or ""
    layer = name[len("keras.layers."):] if name.startswith("keras.layers.") else ""
    return layer[:1].isupper() and "." not in layer and layer not in ("Input", "InputLayer")


def _reaching_value(facts: FileFacts, name: ast.Name) -> ast.expr | None:
    """The value of the assignment to `name` that reaches this read, when every binding of the name is a
    plain assignment at the top level of the reading scope (straight-line code, as `x = layer(x)` chains
    of functional models are): the last one in a statement before the read's."""
    scope, bindings = facts.scope_of_name(name), facts.bindings_of(name)
    while scope is not None and scope.kind == "comprehension" and name.id not in scope.bindings:
        scope = scope.parent  # a comprehension runs at once, where it is written
    if scope is None or not bindings or any(b.kind != "assign" or b.conditional or b.scope is not scope
                                           for b in bindings):
        return None
    here = facts.statement_in(name, scope.node)
    earlier = [(facts.statement_in(b.node, scope.node).lineno, b) for b in bindings]
    earlier = [(line, b) for line, b in earlier if line < here.lineno]  # type: ignore[attr-defined]
    return max(earlier, key=lambda pair: pair[0])[1].value if earlier else None
