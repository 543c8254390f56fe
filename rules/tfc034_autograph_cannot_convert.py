"""TFC034: a construct makes AutoGraph run a function as written, and the function has tensor control flow."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_T = "import tensorflow as tf\n"
_CONDITIONS = (ast.If, ast.While, ast.IfExp, ast.BoolOp, ast.UnaryOp)
_WHAT = {ast.If: "`if`", ast.While: "`while`", ast.IfExp: "conditional expression", ast.BoolOp: "`and`/`or`",
         ast.UnaryOp: "`not`", ast.For: "`for`"}
# What to do about each of AutoGraph's causes (tfcheck.engine.autograph), by its first word.
_REMEDIES = {
    "mangled": "rename the attribute with one leading underscore (`self._x`)",
    "for/else": "replace the `else` by a flag set before `break`",
    "while/else": "replace the `else` by a flag set before `break`",
    "generators": "define the generator function outside this function",
    '"set_loop_options"': "make `set_loop_options` the first statement of the loop it configures",
    "could": "put each lambda on its own line, or give their parameters different names",
    "code": "indent the function with tabs only or spaces only",
    "decorated": "apply the wrapt decorator above `@tf.function`, or write it with functools.wraps",
}


class AutographCannotConvert(Rule):
    """A construct AutoGraph cannot convert, in a function with tensor control flow, makes that flow raise.

    ## What it does
    Finds functions that AutoGraph tries to convert (a tf.function, a `tf.data` function, and what
    they call) but gives up on, and that have an `if`, `while`, `for`, conditional expression or
    `and`/`or`/`not` on a value that is surely a tensor. TensorFlow 2.21 gives up on a function
    whose source has a name-mangled attribute (`self.__x`), a `for … else` or `while … else`, a
    `yield` (a generator function defined inside counts: AutoGraph checks the whole source), a
    `tf.autograph.experimental.set_loop_options(...)` outside a loop or after another statement of
    its loop, indentation that mixes tabs and spaces (in a method or nested function), or, for a
    lambda, another lambda with the same parameters on its line. The finding is at that construct.

    A function wrapped by a `@wrapt.decorator` decorator of the file, below `@tf.function` or called
    from converted code, is run as-is too.

    ## Why is this bad
    AutoGraph only warns (`AutoGraph could not transform <f> and will run it as-is. Cause: mangled
    names are not yet supported`) and runs the function as written: its tensor `if` asks a symbolic
    tensor for a Python bool and tracing raises `OperatorNotAllowedInGraphError: Using a symbolic
    tf.Tensor as a Python bool is not allowed` (a `for` over a tensor: `Iterating over a symbolic
    tf.Tensor is not allowed`). The error names the `if`, not the construct that caused it. Each
    must-flag example below raises so in TensorFlow 2.21; each must-not-flag one runs.

    ## Example
    ```python
    class Scaler(tf.Module):
        def __init__(self):
            super().__init__()
            self.__scale = 2.0

        @tf.function
        def __call__(self, x):
            if tf.reduce_sum(x) > 0:
                return x * self.__scale
            return x
    ```

    ## Use instead
    ```python
    class Scaler(tf.Module):
        def __init__(self):
            super().__init__()
            self._scale = 2.0

        @tf.function
        def __call__(self, x):
            if tf.reduce_sum(x) > 0:
                return x * self._scale
            return x
    ```
    """

    code = "TFC034"
    name = "autograph-cannot-convert"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        _T + "class Scaler(tf.Module):\n    def __init__(self):\n        super().__init__()\n        self.__scale = 2.0\n"
        "    @tf.function\n    def __call__(self, x):\n        if tf.reduce_sum(x) > 0:\n"
        "            return x * self.__scale\n        return x\n",
        _T + "@tf.function\ndef f(x):\n    for row in tf.identity(x):\n        if row > 5:\n            break\n"
        "    else:\n        x = x + 1\n    return x\n",
        _T + "@tf.function\ndef f(x):\n    while tf.reduce_sum(x) < 10:\n        x = x + 1\n    else:\n"
        "        x = x * 1\n    return x\n",
        # A generator function defined inside: AutoGraph's checker walks the nested def.
        _T + "@tf.function\ndef f(x):\n    def pairs(items):\n        for i in items:\n            yield i\n"
        "    if tf.reduce_sum(x) > 0:\n        x = x * 2\n    return x\n",
        # A generator function called from converted code runs as written (conversion.py skips it).
        _T + "def gen(x):\n    if tf.reduce_sum(x) > 0:\n        yield x * 2\n"
        "@tf.function\ndef f(x):\n    return list(gen(x))[0]\n",
        # A wrapt decorator: AutoGraph runs the wrapper as-is (a helper, and below tf.function).
        _T + "import wrapt\n@wrapt.decorator\ndef logged(wrapped, instance, args, kwargs):\n"
        "    return wrapped(*args, **kwargs)\n@logged\ndef helper(x):\n    if tf.reduce_sum(x) > 0:\n"
        "        return x * 2\n    return x\n@tf.function\ndef f(x):\n    return helper(x)\n",
        _T + "import wrapt\n@wrapt.decorator\ndef logged(wrapped, instance, args, kwargs):\n"
        "    return wrapped(*args, **kwargs)\n@tf.function\n@logged\ndef g(x):\n    if tf.reduce_sum(x) > 0:\n"
        "        return x * 2\n    return x\n",
        _T + "@tf.function\ndef f(x):\n    for i in tf.range(3):\n        x = x + 1\n"
        "        tf.autograph.experimental.set_loop_options(maximum_iterations=3)\n    return x\n",
        _T + "@tf.function\ndef f(x):\n    tf.autograph.experimental.set_loop_options(maximum_iterations=3)\n"
        "    for i in tf.range(3):\n        x = x + 1\n    return x\n",
        # Two lambdas with the same parameter on one line: AutoGraph cannot find the first one's source.
        _T + "ds = tf.data.Dataset.range(3).map(lambda x: x * 2 if tf.reduce_max(x) > 1 else x).map(lambda x: x + 1)\n",
        # A tab-indented class whose method body adds spaces.
        _T + "class T(tf.Module):\n\t@tf.function\n\tdef f(self, x):\n\t    if tf.reduce_sum(x) > 0:\n"
        "\t        return x * 2\n\t    return x\n",
    )
    must_not_flag = (
        # The same functions without the construct, or without tensor control flow, run.
        _T + "class Scaler(tf.Module):\n    def __init__(self):\n        super().__init__()\n        self._scale = 2.0\n"
        "    @tf.function\n    def __call__(self, x):\n        if tf.reduce_sum(x) > 0:\n"
        "            return x * self._scale\n        return x\n",
        _T + "class Scaler(tf.Module):\n    def __init__(self):\n        super().__init__()\n        self.__scale = 2.0\n"
        "    @tf.function\n    def __call__(self, x):\n        return x * self.__scale\n",
        _T + "@tf.function\ndef f(x):\n    i = 0\n    while i < 3:\n        i += 1\n    else:\n        i = 0\n    return x\n",
        _T + "@tf.function\ndef f(x):\n    for i in tf.range(3):\n"
        "        tf.autograph.experimental.set_loop_options(maximum_iterations=3)\n        x = x + 1\n    return x\n",
        _T + "ds = tf.data.Dataset.range(3).map(lambda x: x * 2 if tf.reduce_max(x) > 1 else x).map(lambda y: y + 1)\n",
        # Lambdas inside a converted function are converted with it (from NVIDIA/DeepLearningExamples
        # UNet_Medical data_loader.py:118, with a tensor conditional added; runs in TensorFlow 2.21).
        _T + "@tf.function\ndef f(x):\n"
        "    return tf.cond(tf.reduce_sum(x) > 1, lambda: x * 2 if tf.reduce_sum(x) > 5 else x, lambda: x)\n",
        _T + "class T(tf.Module):\n\t@tf.function\n\tdef f(self, x):\n\t\tif tf.reduce_sum(x) > 0:\n"
        "\t\t\treturn x * 2\n\t\treturn x\n",
        # `set_loop_options` first in its own loop, after statements of the outer loop; a dunder attribute.
        _T + "@tf.function\ndef f(x):\n    for i in tf.range(3):\n        x = x + 1\n        for j in tf.range(2):\n"
        "            tf.autograph.experimental.set_loop_options(maximum_iterations=2)\n            x = x + 1\n"
        "    return x\n",
        _T + "class S(tf.Module):\n    @tf.function\n    def __call__(self, x):\n        tf.print(self.__class__.__name__)\n"
        "        if tf.reduce_sum(x) > 0:\n            return x * 2\n        return x\n",
        # A wrapt decorator applied after tf.function wraps the converted function.
        _T + "import wrapt\n@wrapt.decorator\ndef logged(wrapped, instance, args, kwargs):\n"
        "    return wrapped(*args, **kwargs)\n@logged\n@tf.function\ndef h(x):\n    if tf.reduce_sum(x) > 0:\n"
        "        return x * 2\n    return x\n",
        # AutoGraph never tries: do_not_convert (the `if` then raises anyway, but not for this cause).
        _T + "@tf.function\n@tf.autograph.experimental.do_not_convert\ndef f(x):\n    for row in x:\n        pass\n"
        "    else:\n        x = x + 1\n    return x\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for function in facts.graph_functions:
            refusal = facts.autograph_refusal(function)
            if refusal is None or facts.eager_guarded(function):
                continue
            flow = _first_tensor_control_flow(facts, function)
            if flow is not None:
                remedy = next(text for word, text in _REMEDIES.items() if refusal.cause.startswith(word))
                if refusal.node in function.nodes and isinstance(refusal.node, (ast.Yield, ast.YieldFrom)):
                    remedy = "a generator is never converted: return tensors built with tf.cond/tf.where instead"
                yield self.finding(
                    facts, refusal.node,
                    f"AutoGraph cannot convert `{function.name}` ({refusal.cause}) and runs it as written, so the "
                    f"{_WHAT[type(flow)]} on a tensor at {facts.line_name(flow.lineno)} raises "  # type: ignore[attr-defined]
                    f"OperatorNotAllowedInGraphError while tracing; {remedy}", function=function)


def _first_tensor_control_flow(facts: FileFacts, function: FunctionInfo) -> ast.AST | None:
    """The first statement or expression of `function`'s own code that AutoGraph would have turned into
    graph control flow on a surely-tensor value (outside branches only eager execution takes)."""
    found = [node for node in function.nodes
             if (isinstance(node, ast.For) and _tensor_iterable(facts, node.iter))
             or (isinstance(node, _CONDITIONS) and any(facts.surely_tensor(p) for p in facts.truth_tested(node)))]
    return min((node for node in found if not facts.in_eager_only_branch(node, function)),
               key=lambda node: (node.lineno, node.col_offset), default=None)  # type: ignore[attr-defined]


def _tensor_iterable(facts: FileFacts, iterable: ast.expr) -> bool:
    """A surely-single tensor, or `range()` of one (AutoGraph's `tf.range`, Python's `range` without it)."""
    if isinstance(iterable, ast.Call) and facts.resolve(iterable.func) == "builtins.range":
        return any(facts.is_single_tensor(arg) for arg in iterable.args)
    return facts.is_single_tensor(iterable)
