"""TFC023: `tf.random.set_seed` (or `keras.utils.set_random_seed`) called in graph code."""

from __future__ import annotations

from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_SET_SEED = ("tensorflow.random.set_seed", "tensorflow.set_random_seed", "keras.utils.set_random_seed",
             "tensorflow.python.framework.random_seed.set_seed",
             "tensorflow.python.framework.random_seed.set_random_seed")


class SetSeedInGraph(Rule):
    """Setting the global random seed inside a tf.function does not do what it does eagerly.

    ## What it does
    Finds `tf.random.set_seed(...)`, `tf.compat.v1.set_random_seed(...)` and
    `keras.utils.set_random_seed(...)` in graph code: a tf.function, a function it calls, a function
    traced by `tf.data` or functional control flow.

    ## Why is this bad
    In graph code the call runs once, while tracing, and only sets the seed of the graph being traced.
    Eagerly, `set_seed(1)` before a random op restarts its sequence, so every call draws the same
    numbers; in a tf.function the random ops get fixed seeds at trace time and keep advancing: every
    call draws new numbers, the seed is not reset. The program's global seed is not changed at all,
    and a tensor seed (`set_seed(x)` with a tensor argument) fails with
    `OperatorNotAllowedInGraphError`. The severity is WARNING: a Python seed runs, but not as written.

    Checked against TensorFlow 2.21 (every example below run): with a tensor seed the Example raises
    OperatorNotAllowedInGraphError (the reported bug); with `set_seed(1)` inside a tf.function two calls
    return different numbers, while the same function run eagerly returns the same numbers twice (the eager must-not-flag example); after
    a tf.function called `set_seed(7)`, an eager draw is the one of the seed set before, not of seed 7;
    `keras.utils.set_random_seed(1)` inside a tf.function runs without error and behaves the same.

    ## Example
    ```python
    @tf.function
    def f(x):
        tf.random.set_seed(x)
        return tf.random.normal((2, 3))
    ```

    ## Use instead
    ```python
    tf.random.set_seed(1)  # once, in eager code

    @tf.function
    def f(seed):
        return tf.random.stateless_normal((2, 3), seed=seed)  # seed: a shape [2] tensor
    ```
    For reproducible draws per call use stateless ops with a seed argument, or a
    `tf.random.Generator` created outside the function.
    """

    code = "TFC023"
    name = "set-seed-in-graph"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        # From a real issue: a tensor seed.
        "import tensorflow as tf\n@tf.function\ndef f(X):\n    tf.random.set_seed(X)\n"
        "    tf.print(tf.random.normal((2, 3)))\nf(tf.constant(1))\n",
        "import tensorflow as tf\n@tf.function\ndef g():\n    tf.random.set_seed(1)\n    return tf.random.uniform((2,))\n",
        "import tensorflow as tf\ndef reset():\n    tf.compat.v1.set_random_seed(1)\n@tf.function\ndef g():\n"
        "    reset()\n    return tf.random.uniform((2,))\n",
        "import keras\nimport tensorflow as tf\n@tf.function\ndef g():\n    keras.utils.set_random_seed(1)\n"
        "    return tf.random.uniform((2,))\n",
    )
    must_not_flag = (
        # Reference: the seed set once in eager code.
        "import tensorflow as tf\n@tf.function\ndef rnd():\n    return tf.random.uniform(shape=[])\n"
        "tf.random.set_seed(42)\nprint(rnd())\n",
        "import tensorflow as tf\ndef main():\n    tf.random.set_seed(1)\n    return tf.random.uniform((2,))\n",
        "import tensorflow as tf\n@tf.function\ndef f(seed):\n    return tf.random.stateless_normal((2, 3), seed=seed)\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for call, function in facts.graph_calls(*_SET_SEED):
            yield self.finding(
                facts, call, f"`{facts.text(call.func)}` in graph code runs once, while tracing, and only seeds the "
                "graph being traced: calls do not restart the random sequence, the global seed is unchanged, and a "
                "tensor seed raises; set the seed once outside, or use stateless ops with a seed",
                function=function)
