"""TFC008: Python `assert` on tensor values in graph code."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.findings import Finding, Fix, Severity
from tfcheck.edits import call_code, expression_code, replace_statement
from tfcheck.rule import Rule

# Comparison -> the tf.debugging assertion that checks it element-wise (exactly what `assert` means
# for the scalar comparisons it accepts in eager mode).
_COMPARE_ASSERTS = {ast.Eq: "assert_equal", ast.NotEq: "assert_none_equal", ast.Lt: "assert_less",
                    ast.LtE: "assert_less_equal", ast.Gt: "assert_greater", ast.GtE: "assert_greater_equal"}
# Reductions to a scalar boolean: a condition tf.debugging.Assert takes as it is.
_SCALAR_BOOL_REDUCTIONS = frozenset({"tensorflow.reduce_all", "tensorflow.reduce_any", "tensorflow.math.reduce_all",
                                     "tensorflow.math.reduce_any"})


class PythonAssert(Rule):
    """Python `assert` on a tensor value raises while the function is traced.

    ## What it does
    Finds `assert` statements in graph code whose condition depends on tensor values: the result of a
    TensorFlow operation (`tf.reduce_all(x > 0)`, `tf.shape(x)[0] == n`), a `tf.Variable`, or a
    parameter of a tf.function with an `input_signature`. Asserts on static shapes (`x.shape[0] == 3`),
    dtypes, `isinstance`, `is None` and other Python values are fine and not reported.

    ## Why is this bad
    While tracing, a tensor has no value yet, so `assert` cannot turn it into a Python `bool`:
    TensorFlow raises `OperatorNotAllowedInGraphError` ("Using a symbolic `tf.Tensor` as a Python
    `bool` is not allowed"). Code that passes in eager mode fails as soon as it is decorated. The
    severity is ERROR because the function cannot be traced at all.

    ## Example
    ```python
    @tf.function
    def normalize(x):
        assert tf.reduce_all(x >= 0), "x must be non-negative"
        return x / tf.reduce_sum(x)
    ```

    ## Use instead
    ```python
    @tf.function
    def normalize(x):
        tf.debugging.Assert(tf.reduce_all(x >= 0), ["x must be non-negative"])
        return x / tf.reduce_sum(x)
    ```
    `tf.debugging.Assert` and `tf.debugging.assert_equal`/`assert_less`/... are graph operations that
    check the value on every call, in eager and in graph mode. `--fix` rewrites comparisons to the
    matching `tf.debugging.assert_*` and scalar reductions to `tf.debugging.Assert`; other conditions
    get an unsafe fix that wraps them in `tf.reduce_all` (exact only for boolean conditions).
    """

    code = "TFC008"
    name = "python-assert"
    severity = Severity.ERROR
    must_flag = (
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    assert tf.reduce_all(x >= 0), 'negative'\n    return x\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    assert tf.shape(x)[0] == 3\n    return x\n",
        "import tensorflow as tf\n@tf.function(input_signature=[tf.TensorSpec([], tf.float32)])\n"
        "def f(x):\n    assert x > 0\n    return x\n",
        "import tensorflow as tf\ndef check(x):\n    n = tf.reduce_sum(x)\n    assert n > 0\n"
        "@tf.function\ndef f(x):\n    check(x)\n",
        "import tensorflow as tf\nclass M(tf.keras.Model):\n    def train_step(self, data):\n"
        "        assert tf.math.reduce_all(tf.math.is_finite(data)), 'non-finite input'\n        return {}\n",
        "import tensorflow as tf\nv = tf.Variable(1.0)\n@tf.function\ndef f():\n    assert v > 0 and v < 2\n",
    )
    must_not_flag = (
        # `self` and a parameter the signature does not cover are no tensors (found writing docs/coverage.md).
        "import tensorflow as tf\nclass M(tf.Module):\n    @tf.function(input_signature=[tf.TensorSpec([None])])\n"
        "    def f(self, x, scale=2):\n        assert self\n        assert scale > 0\n        return x * scale\n",
        # The fixes.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n"
        "    tf.debugging.Assert(tf.reduce_all(x >= 0), ['negative'])\n    return x\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    tf.debugging.assert_equal(tf.shape(x)[0], 3)\n",
        # Static shapes, dtypes, Python values.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    assert x.shape[0] == 3\n"
        "    assert x.dtype == tf.float32\n    assert len(x.shape) == 2\n    return x\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, mask=None):\n    assert mask is None\n"
        "    assert isinstance(x, tf.Tensor)\n    assert tf.is_tensor(x)\n    return x\n",
        # A parameter the file does not type: it may well be a Python number.
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    assert n > 0\n    return x * n\n",
        # Outside graph code (the guide's own checks).
        "import tensorflow as tf\n@tf.function\ndef square(a):\n    return a * a\n"
        "assert square(tf.constant(10.0)) == 100\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    with tf.init_scope():\n"
        "        assert tf.reduce_all(tf.constant([1]) > 0)\n    return x\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    n = tf.get_static_value(tf.shape(x)[0])\n"
        "    assert n is None or n > 0\n    return x\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        tf_alias = facts.tensorflow_alias
        for node, function in facts.graph_nodes(ast.Assert):
            assert isinstance(node, ast.Assert)
            if not facts.surely_tensor(node.test):
                continue
            fix = _fix(facts, node, tf_alias) if tf_alias is not None else None
            yield self.finding(facts, node, "Python `assert` on a tensor value raises while tracing; use "
                               "tf.debugging.Assert or tf.debugging.assert_* (graph operations)", fix, function)


def _fix(facts: FileFacts, node: ast.Assert, tf: str) -> Fix | None:
    """The tf.debugging call that checks the same condition, or None where there is none."""
    test = node.test
    if isinstance(test, ast.BoolOp) or (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
        return None  # `and`/`or`/`not` on tensors would need rewriting into tf.logical_*.
    message = expression_code(facts, node.msg) if node.msg is not None else None
    try:
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARE_ASSERTS:
            function = f"{tf}.debugging.{_COMPARE_ASSERTS[type(test.ops[0])]}"
            if message is None:
                keywords = {}
            else:
                keywords = {"message": message} if _is_string(node.msg) else {"data": f"[{message}]"}
            code = call_code(function, expression_code(facts, test.left), expression_code(facts, test.comparators[0]),
                             **keywords)
            return _replace(facts, node, code, function, True)
        data = f"[{message if message is not None else repr(f'assert {facts.text(test)} failed')}]"
        function = f"{tf}.debugging.Assert"
        if isinstance(test, ast.Call) and facts.resolve(test.func) in _SCALAR_BOOL_REDUCTIONS \
                and len(test.args) == 1 and not test.keywords:
            return _replace(facts, node, call_code(function, expression_code(facts, test), data), function, True)
        condition = call_code(f"{tf}.reduce_all", expression_code(facts, test))
        return _replace(facts, node, call_code(function, condition, data), function, False)
    except ValueError:  # a piece that is not an expression on its own: no fix rather than a broken one
        return None


def _is_string(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.JoinedStr) or (isinstance(expr, ast.Constant) and isinstance(expr.value, str))


def _replace(facts: FileFacts, node: ast.Assert, code: str, function: str, safe: bool) -> Fix:
    return Fix(f"Replace the `assert` with `{function}`", (replace_statement(facts, node, code),), safe)
