"""TFC006: a tf.function that calls itself, directly or through other functions."""

from __future__ import annotations

from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule


class RecursiveFunction(Rule):
    """A tf.function that calls itself, directly or through other functions, cannot be traced.

    ## What it does
    Finds calls of a `tf.function` made while that same tf.function is being traced: a decorated
    function (or a name bound to `tf.function(g)`) that calls itself, or that calls a helper that calls
    it back. Only calls through the tf.function object count; a plain helper that recurses over a
    nested Python structure is fine, because that recursion ends during tracing, and so is a function
    that wraps itself in a new tf.function (each level makes a new object, typically to re-enter once
    with a `jit_compile` flag switched off).

    ## Why is this bad
    Recursive tf.functions are not supported. Calling the function from inside its own trace starts a
    new trace: with a tensor argument the base case is a graph conditional, AutoGraph traces both
    branches, and tracing never ends (`RecursionError`). With Python arguments it traces once per
    level of recursion. The severity is ERROR: the function fails or retraces on every level, and
    `tfcheck build` cannot compile it.

    ## Example
    ```python
    @tf.function
    def recursive_fn(n):
        if n > 0:
            return recursive_fn(n - 1)
        else:
            return 1
    ```

    ## Use instead
    ```python
    @tf.function
    def iterative_fn(n):
        result = tf.constant(1)
        for _ in tf.range(n):
            result = result * 1
        return result
    ```
    Write the recursion as a loop over `tf.range` (or `tf.while_loop`), which AutoGraph turns into one
    graph loop, or recurse in a plain Python helper over Python values only.
    """

    code = "TFC006"
    name = "recursive-function"
    severity = Severity.ERROR
    must_flag = (
        # The guide's example.
        "import tensorflow as tf\n@tf.function\ndef recursive_fn(n):\n  if n > 0:\n    return recursive_fn(n - 1)\n"
        "  else:\n    return 1\n",
        # Through a helper.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return helper(x)\n"
        "def helper(x):\n    return f(x - 1) if x > 0 else x\n",
        # A name bound to tf.function(g), called from g.
        "import tensorflow as tf\ndef g(x):\n    return fn(x - 1)\nfn = tf.function(g)\n",
        # A decorated method calling itself through self.
        "import tensorflow as tf\nclass M(tf.Module):\n    @tf.function\n    def walk(self, x):\n"
        "        return self.walk(x - 1)\n",
        # Through a branch function traced by tf.cond.
        "import tensorflow as tf\n@tf.function\ndef f(n):\n"
        "    return tf.cond(n > 0, lambda: f(n - 1), lambda: n)\n",
    )
    must_not_flag = (
        "import tensorflow as tf\n@tf.function\ndef iterative_fn(n):\n    result = tf.constant(1)\n"
        "    for _ in tf.range(n):\n        result = result * 1\n    return result\n",
        # Plain Python recursion over a nested structure, called from graph code: ends while tracing.
        "import tensorflow as tf\ndef flatten(s):\n    if isinstance(s, (list, tuple)):\n"
        "        return [y for x in s for y in flatten(x)]\n    return [s]\n"
        "@tf.function\ndef f(xs):\n    return tf.add_n(flatten(xs))\n",
        # g recurses into itself, not into the tf.function made from it.
        "import tensorflow as tf\ndef g(n):\n    return g(n - 1) if n > 0 else 1\nfn = tf.function(g)\n",
        # Calling another tf.function is fine.
        "import tensorflow as tf\n@tf.function\ndef inner(x):\n    return x + 1\n"
        "@tf.function\ndef outer(x):\n    return inner(x)\n",
        # An eager py_function callback calling the tf.function runs outside the trace.
        "import tensorflow as tf\ndef cb(x):\n    return f(x)\n"
        "@tf.function\ndef f(x):\n    return tf.py_function(cb, [x], tf.float32)\n",
        # A tf.function made afresh inside the function it calls (TensorFlow Probability's minimize.py).
        "import tensorflow as tf\ndef minimize(jit_compile=False):\n    if jit_compile:\n"
        "        @tf.function(jit_compile=True)\n        def run_jitted():\n            return minimize(jit_compile=False)\n"
        "        return run_jitted()\n    return tf.constant(0.0)\n",
        # A non-tf.function method with the same name on another object.
        "import tensorflow as tf\nclass M(tf.Module):\n    @tf.function\n    def call(self, x):\n"
        "        return self.inner.call(x)\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for found in facts.recursive_calls:
            chain = " -> ".join(info.name for info in found.path + (found.function,))
            yield self.finding(
                facts, found.call,
                f"tf.function `{found.function.name}` calls itself ({chain}): recursive tf.functions are not "
                "supported and retrace at every level; write the recursion as a tf.range/tf.while_loop loop",
                function=found.caller)
