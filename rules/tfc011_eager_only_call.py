"""TFC011: eager-only operations on tensors (`.numpy()`, NumPy functions) in graph code."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine import kinds
from tfcheck.engine.facts import KERAS_TRACING_METHODS, FileFacts
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

# NumPy functions that look at their argument without converting it to an array.
_NON_CONVERTING = frozenset({"numpy.isscalar", "numpy.dtype", "numpy.issubdtype", "numpy.iinfo", "numpy.finfo",
                             "numpy.result_type", "numpy.ndim", "numpy.shape"})
# Values `.numpy()` is a plain method of, not the eager-only tensor method.
_NUMPY_METHOD_OWNERS = frozenset({kinds.NDARRAY, kinds.LIST, kinds.DICT, kinds.SET, kinds.TUPLE,
                                  kinds.STRING, kinds.NUMBER, kinds.DATASET, kinds.OBJECT})


class EagerOnlyCall(Rule):
    """Eager-only operations on tensors (`.numpy()`, NumPy functions) fail while tracing.

    ## What it does
    Finds, in graph code, `.numpy()` calls and NumPy functions applied to tensors (`np.mean(x)` where `x`
    is the result of a TensorFlow operation, a `tf.Variable` or a parameter typed by an
    `input_signature`). NumPy constants, NumPy arrays built from Python values, and `float()`/`int()` of
    a tensor (which AutoGraph converts) are fine. Functions that test `tf.executing_eagerly()` are
    written to run both ways and are left alone. Also finds Keras endpoints called on a model in graph
    code (`model.predict`, `fit`, `evaluate`, `train_on_batch`, ...): they run their own loop and
    tf.function and hand NumPy values back, so they fail while tracing (TensorFlow 2.21: AttributeError
    or TypeError from inside `predict`); a tf.function calls the model itself, `model(x)`.

    ## Why is this bad
    While tracing, a tensor is symbolic: it has no value to hand to NumPy. `.numpy()` raises
    `AttributeError` (or `NotImplementedError` for variables) and NumPy functions raise
    `NotImplementedError: Cannot convert a symbolic tf.Tensor to a numpy array`. The code works in eager
    mode and breaks as soon as it is decorated or traced by tf.data or Keras. The severity is ERROR:
    the function cannot be traced, so it can be neither saved nor compiled.

    ## Example
    ```python
    @tf.function
    def scale(x):
        peak = np.max(tf.abs(x))
        return x / peak.numpy()
    ```

    ## Use instead
    ```python
    @tf.function
    def scale(x):
        peak = tf.reduce_max(tf.abs(x))
        return x / peak
    ```
    Use the TensorFlow operation (`tf.reduce_mean`, `tf.math.*`, `tf.experimental.numpy.*`) instead of
    NumPy, keep values as tensors instead of calling `.numpy()`, or, if Python really must see the value,
    wrap that part in `tf.numpy_function`.
    """

    code = "TFC011"
    name = "eager-only-call"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    y = tf.reduce_sum(x)\n    return y.numpy()\n",
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(x):\n    return np.mean(tf.abs(x))\n",
        "import numpy as np\nimport tensorflow as tf\n"
        "@tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])\ndef f(x):\n    return np.sum(x)\n",
        "import tensorflow as tf\nv = tf.Variable(1.0)\n@tf.function\ndef f(x):\n    return x * v.numpy()\n",
        # From spektral's layers/base.py (a Keras layer's call, traced by fit): np.eye of a dynamic size.
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef call(inputs):\n    F = tf.shape(inputs)[-1]\n"
        "    m = np.eye(F)\n    return tf.matmul(inputs, tf.constant(m))\n",
        # `.numpy()` on anything in graph code: only eager tensors and variables have it.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return x.numpy() + 1\n",
        # Arithmetic on a parameter is no Python number (issue 36's held-out cases).
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    y = x * 2\n    return y.numpy()\n",
        # A parameter whose shape the function reads is a tensor: tf.function converts NumPy arrays.
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(x):\n    n = x.shape[0]\n"
        "    return np.max(x) / n\n",
        "import tensorflow as tf\ndef to_list(t):\n    return t.numpy().tolist()\n"
        "ds = tf.data.Dataset.range(3).map(lambda x: to_list(x))\n",
        # Keras endpoints on a model while tracing (keras-team/keras#13671, tensorflow/tensorflow#40447).
        "import numpy as np\nimport tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(2)])\n"
        "@tf.function\ndef test(model, x):\n    return model.predict(x, steps=1)\ntest(model, np.zeros((1, 3)))\n",
        "import tensorflow as tf\ninputs = tf.keras.Input(shape=(3,))\nmodel = tf.keras.Model(inputs, tf.keras.layers.Dense(5)(inputs))\n"
        "@tf.function(input_signature=[tf.TensorSpec(shape=(None, 3), dtype=tf.float32)])\ndef predict(x):\n"
        "    return model.predict(x)\n",
        # A custom metric (tensorflow/tensorflow#46640): Keras updates it inside its traced train step.
        "import tensorflow as tf\nclass F1(tf.keras.metrics.Metric):\n    def update_state(self, y_true, y_pred, sample_weight=None):\n"
        "        self.v.assign(float((y_true.numpy() == y_pred.numpy()).mean()))\n",
    )
    must_not_flag = (
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return tf.reduce_max(tf.abs(x))\n",
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(x):\n"
        "    return x * np.pi + np.float32(2.0) + np.array([1.0, 2.0])\n",
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(x):\n"
        "    return tf.reshape(x, [np.prod(x.shape[1:])]) * float(tf.reduce_sum(x))\n",
        # A parameter the file does not type may be a NumPy array or Python value.
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(x, weights):\n"
        "    return x * np.sum(weights)\n",
        # Only for a NumPy input, which graph code never has (keras-cv 94b0a55 keras_cv/src/backend/tf_ops.py:111).
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef crop(x):\n    img = tf.image.resize(x, (8, 8))\n"
        "    if isinstance(x, np.ndarray):\n        return img.numpy()\n    return img\n",
        # Guarded by an eager check.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.executing_eagerly():\n"
        "        print(x.numpy())\n    return x\n",
        # The flag is computed by the enclosing function (TensorFlow's rnn.py).
        "import tensorflow as tf\ndef loop(ta):\n    in_graph_mode = not tf.executing_eagerly()\n"
        "    @tf.function\n    def step(time):\n        if in_graph_mode:\n            return ta.read(time)\n"
        "        return ta[time.numpy()]\n    return step\n",
        # Switched to eager mode explicitly (tf.data's dataset_ops.py).
        "import tensorflow as tf\nfrom tensorflow.python.eager import context\n@tf.function\ndef f(x):\n"
        "    with context.eager_mode():\n        v = tf.constant(1).numpy()\n    return x + v\n",
        # `.numpy()` of a NumPy-like Python object; and eager code.
        "import numpy as np\nimport tensorflow as tf\nclass Box:\n    def numpy(self):\n        return 1\n"
        "@tf.function\ndef f(x):\n    b = Box()\n    return x * b.numpy()\n",
        "import tensorflow as tf\ndef log(x):\n    return x.numpy()\n"
        "@tf.function\ndef f(x):\n    return tf.py_function(log, [x], tf.float32)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return x\nprint(f(1.0).numpy())\n",
        # Calling the model in graph code, `predict` in eager code; `predict` of something not known to be a model.
        "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(2)])\n@tf.function\ndef f(x):\n"
        "    return model(x)\nprint(f(tf.zeros((1, 3))), model.predict(tf.zeros((1, 3))))\n",
        "import tensorflow as tf\n@tf.function\ndef f(estimator, x):\n    return estimator.predict(x)\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for node, function in facts.graph_nodes(ast.Call):
            assert isinstance(node, ast.Call)
            message = _eager_only(facts, node)
            if message is not None and not facts.eager_guarded(function):
                yield self.finding(facts, node, message, function=function)


def _eager_only(facts: FileFacts, call: ast.Call) -> str | None:
    """Why this call cannot run while tracing, or None when it can."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "numpy" and not call.args and not call.keywords:
        if facts.kinds(func.value) & _NUMPY_METHOD_OWNERS:
            return None
        return ("`.numpy()` works only on eager tensors; while tracing the value is symbolic "
                "(keep it a tensor, or use tf.numpy_function)")
    if isinstance(func, ast.Attribute) and func.attr in KERAS_TRACING_METHODS and facts.is_keras_model(func.value):
        return (f"`{facts.text(func)}()` is a Keras endpoint that runs its own loop and tf.function and returns "
                "NumPy values: it cannot run while tracing; call the model, `model(x)`")
    name = facts.resolve(func)
    if name is None or not name.startswith("numpy.") or name.startswith("numpy.random.") or name in _NON_CONVERTING:
        return None
    tensor = next((arg for arg in _arguments(call) if facts.surely_tensor(arg)), None)
    if tensor is None:
        return None
    return (f"`{facts.text(func)}()` converts the tensor `{facts.text(tensor)}` to a NumPy array, which raises "
            "NotImplementedError while tracing; use the TensorFlow operation (tf.math, tf.experimental.numpy)")


def _arguments(call: ast.Call) -> list[ast.expr]:
    return [arg.value if isinstance(arg, ast.Starred) else arg for arg in call.args] + \
        [keyword.value for keyword in call.keywords]
