"""TFC015: `tf.py_function` / `tf.numpy_function` in graph code."""

from __future__ import annotations

from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_PY_FUNCTIONS = ("tensorflow.py_function", "tensorflow.numpy_function", "tensorflow.eager_py_func")


class PyFunction(Rule):
    """`tf.py_function` / `tf.numpy_function` make a graph that needs the Python interpreter.

    ## What it does
    Finds `tf.py_function`, `tf.numpy_function` (and `tf.compat.v1.py_func`) in graph code: in a
    tf.function, a function it calls, or a function traced by `tf.data`. The Python function passed to
    them runs eagerly on every call and is not graph code, so other rules do not check it.

    ## Why is this bad
    The op calls back into the Python process that built the graph. The graph is no longer portable:
    a SavedModel holding it does not carry the Python function and fails when loaded elsewhere (TF
    Serving, TFLite, another process), it cannot run on TPUs or remote workers, it holds the GIL, and
    `tfcheck build` cannot compile it. It is an escape hatch, not a way to write graph code. The
    severity is WARNING: it works in this process, but defeats deployment. In an input pipeline
    (a function that only `tf.data` traces, which no tf.function, Keras model or SavedModel
    signature reaches) it is INFO: the pipeline runs in the process that built it, and the cost is
    the GIL held for every element; `--min-severity warning` hides those.

    ## Example
    ```python
    def rotate(image):
        return scipy.ndimage.rotate(image, 30, reshape=False)

    @tf.function
    def augment(image):
        return tf.numpy_function(rotate, [image], tf.float32)
    ```

    ## Use instead
    ```python
    @tf.function
    def augment(image):
        return tf.image.rot90(image)  # or keras.layers.RandomRotation
    ```
    Express the computation with TensorFlow operations. If Python must run (logging, a side effect
    during debugging), keep it outside the function you save or compile, and suppress this finding
    with `# tfcheck: ignore[TFC015]` where it is deliberate.
    """

    code = "TFC015"
    name = "py-function"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        # The older guide's exit hatch.
        "import tensorflow as tf\nexternal_list = []\ndef side_effect(x):\n  print('Python side effect')\n"
        "  external_list.append(x)\n@tf.function\ndef f(x):\n  tf.py_function(side_effect, inp=[x], Tout=[])\n",
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(x):\n"
        "    return tf.numpy_function(np.sort, [x], tf.float32)\n",
        "import tensorflow as tf\nds = tf.data.Dataset.range(3).map(lambda x: tf.py_function(str, [x], tf.string))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return tf.compat.v1.py_func(abs, [x], tf.float32)\n",
    )
    must_not_flag = (
        "import tensorflow as tf\n@tf.function\ndef f(image):\n    return tf.image.rot90(image)\n",
        # Eager code may call py_function (it runs directly).
        "import tensorflow as tf\nresult = tf.py_function(abs, [tf.constant(-1.0)], tf.float32)\n",
        "import tensorflow as tf\ndef helper(x):\n    return tf.py_function(abs, [x], tf.float32)\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for call, function in facts.graph_calls(*_PY_FUNCTIONS):
            if facts.input_pipeline_only(function):
                yield self.finding(
                    facts, call,
                    f"`{facts.text(call.func)}` in an input pipeline calls back into Python for every element, "
                    "holding the GIL: the pipeline cannot run in parallel or outside this process; use "
                    "TensorFlow operations where they exist", function=function, severity=Severity.INFO)
                continue
            yield self.finding(
                facts, call,
                f"`{facts.text(call.func)}` calls back into Python on every run: the graph is not portable, does "
                "not survive a SavedModel load elsewhere and cannot be compiled; use TensorFlow operations",
                function=function)
