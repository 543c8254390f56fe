"""TFC025: `locals()` in a converted `if`/`for`/`while`, or `vars()`/`dir()` without arguments, in
code that AutoGraph rewrites."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_LOCALS, _VARS, _DIR = "builtins.locals", "builtins.vars", "builtins.dir"


class FrameIntrospectionInAutograph(Rule):
    """`locals()`, `vars()` and `dir()` do not see the function's variables in code AutoGraph converts.

    ## What it does
    Finds, in code that AutoGraph rewrites (a tf.function, a function it calls, a function traced by
    `tf.data`), `locals()` inside the body of an `if`, a `for` or a `while` (or a `while` test), and
    `vars()` or `dir()` without arguments anywhere.

    ## Why is this bad
    AutoGraph turns the body of every `if`, `for` and `while` (whatever its condition) into a
    function of its own, so `locals()` there returns that function's frame: AutoGraph's names
    (`ag__`, `fscope`, the loop's iterator) and the loop variable, not the function's parameters and
    variables. Looking a name up in it raises `KeyError`. `vars()` and `dir()` without arguments are
    called through AutoGraph's `converted_call` and see its frame (`args`, `kwargs`, `f`, ...)
    anywhere in the function. Eagerly, or with `autograph=False`, the same code works. `locals()`
    outside a control-flow statement sees the function's variables (plus AutoGraph's own names) and
    is not reported; neither is code that Keras 3 calls (`call`, `train_step`, a loss), which it runs
    unconverted.

    Checked against TensorFlow 2.21 (every example below run): the Example raises
    `KeyError: 'method_3'` (the reported bug) and returns the right value eagerly; `locals()` in an
    `if` on a Python bool, a Python `while` and a `for` over a list returns only `ag__`, `fscope` and
    the loop's names; `vars()` and `dir()` at the top of a tf.function return
    `['args', 'caller_fn_scope', 'f', 'kwargs', 'options']`; with `autograph=False`, in a function
    decorated with `tf.autograph.experimental.do_not_convert`, in a function with a `for`/`else`
    (AutoGraph does not convert it), and in a Keras 3 layer's `call` and a loss under `fit`,
    `locals()` in a loop sees the function's variables.

    ## Example
    ```python
    @tf.function
    def apply(inputs, order=("method_3", "method_1")):
        def method_1(x): return x * 2
        def method_3(x): return x * 3
        for name in order:
            inputs = locals()[name](inputs)  # KeyError: 'method_3'
        return inputs
    ```

    ## Use instead
    ```python
    @tf.function
    def apply(inputs, order=("method_3", "method_1")):
        methods = {"method_1": lambda x: x * 2, "method_3": lambda x: x * 3}
        for name in order:
            inputs = methods[name](inputs)
        return inputs
    ```
    Name the values you need in a dict of your own; `vars(obj)` and `dir(obj)` with an argument are
    fine.
    """

    code = "TFC025"
    name = "frame-introspection-in-autograph"
    severity = Severity.ERROR
    must_flag = (
        # From a real issue (tensorflow/tensorflow#59725): functions looked up by name in a loop.
        "import tensorflow as tf\n@tf.function\ndef apply(inputs, order=('method_3', 'method_1')):\n"
        "    def method_1(x): return x * 2\n    def method_3(x): return x * 3\n    for name in order:\n"
        "        inputs = locals()[name](inputs)\n    return inputs\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, flag=True):\n    y = x + 1\n    if flag:\n"
        "        return locals()['y']\n    return x\n",
        "import tensorflow as tf\ndef helper(x):\n    n = 0\n    while n < 2:\n        print(locals())\n"
        "        n += 1\n    return x\n@tf.function\ndef f(x):\n    return helper(x)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    y = x + 1\n    return vars()['y']\n",
        "import tensorflow as tf\ndef parse(x):\n    print(dir())\n    return x\n"
        "ds = tf.data.Dataset.range(3).map(parse)\n",
    )
    must_not_flag = (
        # Reference: the same lookup eagerly.
        "def apply(inputs, order=('method_3', 'method_1')):\n    def method_1(x): return x * 2\n"
        "    def method_3(x): return x * 3\n    for name in order:\n        inputs = locals()[name](inputs)\n"
        "    return inputs\n",
        "import tensorflow as tf\n@tf.function(autograph=False)\ndef f(x):\n    y = x + 1\n    for i in range(2):\n"
        "        print(locals())\n    return x\n",
        "import tensorflow as tf\n@tf.autograph.experimental.do_not_convert\ndef helper(x):\n    for i in range(2):\n"
        "        print(locals())\n    return x\n@tf.function\ndef f(x):\n    return helper(x)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    for i in range(2):\n        print(locals())\n"
        "    else:\n        pass\n    return x\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    y = x + 1\n    print(locals().keys(), vars(tf), dir(x))\n"
        "    return locals()['y']\n",
        "import keras\nclass L(keras.layers.Layer):\n    def call(self, x):\n        for i in range(2):\n"
        "            print(locals())\n        return x\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for call, function in facts.graph_calls(_LOCALS, _VARS, _DIR):
            if not facts.autograph_converted(function):
                continue
            name = facts.resolve(call.func)
            if name == _LOCALS and _in_converted_statement(facts, call, function):
                yield self.finding(
                    facts, call, "`locals()` inside an `if`/`for`/`while` that AutoGraph converts returns the "
                    "frame of the function AutoGraph makes of the body (`ag__`, `fscope`, the loop's names), not "
                    "this function's variables; keep what you look up by name in a dict of your own",
                    function=function)
            elif name != _LOCALS and not call.args and not call.keywords:
                yield self.finding(
                    facts, call, f"`{facts.text(call.func)}()` without arguments in code AutoGraph converts "
                    "returns the names of AutoGraph's `converted_call` (`args`, `kwargs`, `f`, ...), not this "
                    "function's; name the values you need", function=function)


def _in_converted_statement(facts: FileFacts, node: ast.AST, function: FunctionInfo) -> bool:
    """Whether `node` lies in the body or `else` of an `if`/`for`, or the test or body of a `while`, of
    `function` (the parts AutoGraph turns into functions; an `if` test and a `for` iterable are not)."""
    child = node
    for parent in facts.ancestors(node):
        if parent is function.node:
            return False
        if isinstance(parent, ast.While) or (isinstance(parent, (ast.If, ast.For)) and child in
                                             (*parent.body, *parent.orelse)):
            return True
        child = parent
    return False
