"""TFC026: `raise` under a tensor `if`/`while` in code AutoGraph converts: it raises while tracing, for every input."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule


class RaiseUnderTensorCondition(Rule):
    """A `raise` under a tensor condition raises while tracing, whatever the input.

    ## What it does
    Finds, in code that AutoGraph converts (a tf.function, a function it calls, a function traced
    by `tf.data`), a `raise` statement that is a statement of its own in a branch of an `if` whose
    test is surely a tensor (`if tf.reduce_any(x < 0):`, `if a <= tf.constant(0):`), in the body of
    a `while` on a tensor, or right after a tensor `if` whose body ends in `return` (AutoGraph makes
    the rest of the function that `if`'s else branch). Checks on static shapes (`x.shape[0] != 2`),
    on Python values (a parameter with a Python default counts as one, input_signature or not), and
    code behind a `tf.executing_eagerly()` test are not reported; neither is a `raise` nested under a
    Python `if` inside the branch, nor one inside a `try` that may catch it.

    ## Why is this bad
    AutoGraph turns an `if` or `while` on a tensor into `tf.cond`/`tf.while_loop`, which trace every
    branch to build the graph: the `raise` runs while tracing, so the function raises for every
    input, valid ones included, although it works eagerly. Code that Keras 3 runs unconverted (a
    layer's `call`, `train_step`) fails earlier, on the tensor `if` itself
    (OperatorNotAllowedInGraphError), and is not reported here.

    Checked against TensorFlow 2.21 (every example below run from a file, as AutoGraph needs the
    source): each must-flag example raises its error when called with a valid tensor (the `tf.data`
    one when `map` is called), and returns its value with `run_functions_eagerly(True)`;
    `if tf.constant(False): raise ...` raises too. Of the must-not-flag examples, the trieste test
    passes, the static shape checks, the Python flag, the eager-only check of the TensorFlow Text
    tutorial, the Python-number argument and the eager loop run without error; inside `try`/`except`
    the `except` branch is what runs (the function returns -1.0 for 1.0), another pitfall; the Keras 3
    layer (traced) and `autograph=False` raise OperatorNotAllowedInGraphError at the `if`.

    ## Example
    ```python
    @tf.function
    def f(a):
        if a <= tf.constant(0):
            raise ValueError("a must be positive")
        return a

    f(tf.constant(1))  # ValueError: a must be positive
    ```

    ## Use instead
    ```python
    @tf.function
    def f(a):
        tf.debugging.assert_positive(a, message="a must be positive")
        return a
    ```
    `tf.debugging.assert_*` and `tf.debugging.Assert` are graph operations: they check the value on
    every call and raise `InvalidArgumentError` only when it is wrong. A check that needs only static
    shapes can stay a Python `if` on `x.shape`.
    """

    code = "TFC026"
    name = "raise-under-tensor-condition"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # From secondmind-labs/trieste, tests/thirdparty/test_tensorflow.py (and issue #304): "note that
        # 1 should *not* trigger the error branch, but does"; called here outside `pytest.raises`.
        "import tensorflow as tf\n@tf.function\ndef f(a: tf.Tensor) -> tf.Tensor:\n"
        "    if a <= tf.constant(0):\n        raise ValueError\n\n    return a\n\nf(tf.constant(1))\n",
        # A NaN check as written in an audio helper found with the code search (the index does not name
        # its repository), called from a tf.function and mapped over a dataset.
        "import tensorflow as tf\ndef normalize_mel(mel, mean, std):\n    if tf.reduce_any(tf.math.is_nan(mel)):\n"
        "        raise ValueError('Mel spectrogram contains NaN values')\n    return (mel - mean) / (std + 1e-8)\n"
        "@tf.function\ndef step(mel):\n    return normalize_mel(mel, 0.0, 1.0)\n",
        "import tensorflow as tf\ndef normalize_mel(mel):\n    if tf.reduce_any(tf.math.is_inf(mel)):\n"
        "        raise ValueError('Mel spectrogram contains Inf values')\n    return mel\n"
        "ds = tf.data.Dataset.from_tensor_slices([[1.0]]).map(normalize_mel)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_min(x) > 0:\n        y = x\n    else:\n"
        "        raise ValueError('non-positive')\n    return y\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_all(x > 0):\n"
        "        return x\n    raise ValueError('non-positive')\n",
        "import tensorflow as tf\n@tf.function(input_signature=[tf.TensorSpec([], tf.float32)])\ndef f(x):\n"
        "    while x > 10.0:\n        raise ValueError('too big')\n    return x\n",
    )
    must_not_flag = (
        # The same trieste test as its authors wrote it: the call sits in `pytest.raises`, the error shown
        # on purpose.
        "import pytest\nimport tensorflow as tf\ndef test_raise_is_incompatible_with_tf_function() -> None:\n"
        "    @tf.function\n    def f(a: tf.Tensor) -> tf.Tensor:\n        if a <= tf.constant(0):\n"
        "            raise ValueError\n\n        return a\n\n    with pytest.raises(ValueError):\n"
        "        f(tf.constant(1))\n",
        # secondmind-labs/trieste#304: called with Python numbers, the `if` is a Python `if`.
        "import tensorflow as tf\ndef f(a):\n    if a < 0:\n        raise ValueError\n    return a\n"
        "f_compiled = tf.function(f)\nf_compiled(1)\n",
        # tensorflow/text, docs/tutorials/nmt_with_attention.ipynb: the shape checker returns at once
        # while tracing.
        "import tensorflow as tf\nclass ShapeChecker():\n    def __init__(self):\n        self.shapes = {}\n"
        "    def __call__(self, tensor, names, broadcast=False):\n        if not tf.executing_eagerly():\n"
        "            return\n        if isinstance(names, str):\n            names = (names,)\n"
        "        shape = tf.shape(tensor)\n        rank = tf.rank(tensor)\n        if rank != len(names):\n"
        "            raise ValueError(f'Rank mismatch: found {rank}: {shape.numpy()}')\n"
        "checker = ShapeChecker()\n@tf.function\ndef f(x):\n    checker(x, ('batch',))\n    return x\n",
        # Static shapes and Python flags are Python values while tracing.
        "import tensorflow as tf\n@tf.function\ndef f(img):\n    if tf.shape(img).shape[0] != 3:\n"
        "        raise ValueError('invalid decoded shape')\n    if img.shape[-1] != 3:\n"
        "        raise ValueError('need RGB')\n    return img\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, strict=False):\n    if x < tf.constant(0.0):\n"
        "        if strict:\n            raise ValueError('negative')\n        x = -x\n    return x\n",
        # tensorflow/decision-forests, keras/core_inference.py: `input_signature=[]` leaves the defaulted
        # index a Python int.
        "import tensorflow as tf\nclass M(tf.Module):\n    @tf.function(input_signature=[])\n"
        "    def yggdrasil_model_path_tensor(self, multitask_model_index: int = 0):\n"
        "        if multitask_model_index >= len(self._models):\n"
        "            raise ValueError(f'Requesting sub-model {multitask_model_index}')\n"
        "        return self._models[multitask_model_index].path\n",
        # Caught inside the function: another pitfall (the except branch is what gets traced).
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    try:\n        if x < tf.constant(0.0):\n"
        "            raise ValueError('neg')\n        return x\n    except ValueError:\n        return -x\n",
        # Eager code: a training loop that checks the loss after each step.
        "import tensorflow as tf\ndef train(model, batches):\n    for x, y in batches:\n"
        "        loss = tf.reduce_mean(tf.square(model(x) - y))\n        if tf.math.is_nan(loss):\n"
        "            raise ValueError('Loss is NaN!')\n",
        # Not converted: Keras 3 runs `call` as it is, and `autograph=False` keeps Python's `if`.
        "import tensorflow as tf\nimport keras\nclass L(keras.layers.Layer):\n    def call(self, x):\n"
        "        if tf.reduce_any(x < 0):\n            raise ValueError('negative')\n        return x\n",
        "import tensorflow as tf\n@tf.function(autograph=False)\ndef f(x):\n    if tf.reduce_any(x < 0):\n"
        "        raise ValueError('negative')\n    return x\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for node, function in facts.graph_nodes(ast.If, ast.While):
            assert isinstance(node, (ast.If, ast.While))
            if not facts.autograph_converted(function) or not _tensor_test(facts, node.test, function):
                continue
            if facts.eager_guarded(function) or _in_try(facts, node, function):
                continue
            branches = [node.body] if isinstance(node, ast.While) else [node.body, node.orelse]
            raises = [s for branch in branches for s in branch if isinstance(s, ast.Raise) and s.exc is not None]
            after = _statement_after(facts, node) if isinstance(node, ast.If) and not node.orelse \
                and isinstance(node.body[-1], ast.Return) else None
            if isinstance(after, ast.Raise) and after.exc is not None:
                raises.append(after)
            for statement in raises:
                yield self.finding(
                    facts, statement, "`raise` under a tensor condition: AutoGraph traces every branch of a "
                    "tensor `if`/`while`, so this raises while tracing, for every input; check the value with "
                    "tf.debugging.Assert or tf.debugging.assert_* (graph operations)", function=function)


def _tensor_test(facts: FileFacts, expr: ast.expr, function: FunctionInfo) -> bool:
    """`facts.surely_tensor(expr)`, except through the receiver or a parameter with a Python default: an
    input_signature makes the engine call every parameter a tensor, but one it does not cover keeps its
    default (tensorflow/decision-forests, `yggdrasil_model_path_tensor(self, multitask_model_index: int = 0)`
    under `input_signature=[]`)."""
    if not facts.surely_tensor(expr):
        return False
    if isinstance(expr, ast.Name):
        return not _python_parameter(facts, expr, function)
    if isinstance(expr, ast.Compare):
        parts = [expr.left, *expr.comparators]
    elif isinstance(expr, ast.BoolOp):
        parts = list(expr.values)
    elif isinstance(expr, ast.BinOp):
        parts = [expr.left, expr.right]
    elif isinstance(expr, ast.UnaryOp):
        parts = [expr.operand]
    elif isinstance(expr, ast.Subscript):
        parts = [expr.value]
    else:
        return True
    return any(_tensor_test(facts, part, function) for part in parts)


def _python_parameter(facts: FileFacts, name: ast.Name, function: FunctionInfo) -> bool:
    """Whether `name` is the receiver of the method `function`, or a parameter of it with a default."""
    node = function.node
    if isinstance(node, ast.Lambda) or name.id not in function.params or facts.binding_scope(name) is not function.scope:
        return False
    if function.cls is not None and function.params[0] == name.id:
        return True
    arguments = node.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaulted = {a.arg for a in positional[len(positional) - len(arguments.defaults):]}
    defaulted |= {a.arg for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None}
    return name.id in defaulted


def _in_try(facts: FileFacts, node: ast.AST, function: FunctionInfo) -> bool:
    """Whether `node` lies in a `try` with handlers of `function`, which may catch the exception."""
    for ancestor in facts.ancestors(node):
        if ancestor is function.node:
            return False
        if isinstance(ancestor, ast.Try) and ancestor.handlers:
            return True
    return False


def _statement_after(facts: FileFacts, node: ast.stmt) -> ast.stmt | None:
    """The statement that follows `node` in its block, if any."""
    parent = facts.parent(node)
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and node in block:
            index = block.index(node)
            return block[index + 1] if index + 1 < len(block) else None
    return None
