"""TFC021: Python iterating over a tensor (comprehension, zip/enumerate/list/..., unpacking) in graph code."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine import kinds
from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# Builtins that iterate over their arguments in Python. AutoGraph overloads some of them, but for a
# tensor only `sorted` (tf.sort) and `len`; `enumerate`, `zip`, `map`, `filter`, `any`, `all` fall back
# to Python's. Each entry: the positions of the arguments iterated.
_ITERATING_BUILTINS: dict[str, slice] = {
    "builtins.zip": slice(0, None), "builtins.enumerate": slice(0, 1), "builtins.map": slice(1, None),
    "builtins.filter": slice(1, 2), "builtins.list": slice(0, 1), "builtins.tuple": slice(0, 1),
    "builtins.set": slice(0, 1), "builtins.frozenset": slice(0, 1), "builtins.sum": slice(0, 1),
    "builtins.any": slice(0, 1), "builtins.all": slice(0, 1),
}
_MIN_MAX = ("builtins.min", "builtins.max")  # iterate only when given one argument


class PythonIterationOverTensor(Rule):
    """Python code that iterates over a tensor in graph code, where AutoGraph does not convert it.

    ## What it does
    Finds, in graph code, Python iteration over a value that is surely a single tensor (a
    TensorFlow op's result, a `tf.Variable`, a parameter with an `input_signature` or one every call
    fills with a tensor): a list/set/dict comprehension or generator expression over it, `zip`,
    `enumerate`, `map`, `filter`, `list`, `tuple`, `set`, `sum`, `any`, `all`, `min`/`max` of it, and
    unpacking it (`r, c = tf.shape(x)`). Also a comprehension over a `tf.data.Dataset`. Python lists
    of tensors (`tf.unstack(x)`, `tf.split`, the result of `tf.cond`) are iterated fine and not
    reported, and neither is code behind a `tf.executing_eagerly()` check. In graph code AutoGraph does
    not convert (a Keras 3 `call`, `autograph=False`), `range()` of a tensor is Python's `range` and
    raises TypeError (TensorFlow 2.21); where AutoGraph converts, it is `tf.range` and fine. There,
    too, a `for` statement over a surely-single tensor raises OperatorNotAllowedInGraphError and
    `len()` of one raises TypeError (`len is not well defined for a symbolic Tensor`); AutoGraph
    converts both elsewhere. A function AutoGraph tries to convert and gives up on is TFC034's.

    ## Why is this bad
    AutoGraph turns `for x in tensor:` statements into graph loops, but not comprehensions, builtins
    or unpacking: they ask the symbolic tensor for a Python iterator, and tracing fails with
    `OperatorNotAllowedInGraphError: Iterating over a symbolic tf.Tensor is not allowed`. The code
    works eagerly and fails once decorated. A comprehension over a dataset is worse: the Python loop
    asks the dataset's iterator for elements that are graph ops and never raise StopIteration, so
    tracing never ends.

    Checked against TensorFlow 2.21 (every example below run): each must-flag example raises
    OperatorNotAllowedInGraphError when called with tensors, except the comprehension over a dataset,
    which was still tracing when stopped after 120 s; `for i, a in enumerate(dataset)` and
    `zip(dataset, dataset)` in a `for` statement, comprehensions over `tf.unstack(x)` or `x.shape`,
    `sorted(x)` and `r, c = tf.unstack(tf.shape(x))` all trace and run.

    ## Example
    ```python
    @tf.function
    def square_if_positive(x):
        return [i ** 2 if i > 0 else i for i in x]

    square_if_positive(tf.range(-5, 5))
    ```

    ## Use instead
    ```python
    @tf.function
    def square_if_positive(x):
        return tf.map_fn(lambda i: i ** 2 if i > 0 else i, x)
    ```
    A `for` statement over the tensor, writing into a `tf.TensorArray`, works too; so does
    `tf.unstack(x)` when the size is known while tracing.
    """

    code = "TFC021"
    name = "python-iteration-over-tensor"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # `enumerate` over the predictions in a Keras metric's update_state (issue 37's shape 5: under
        # `fit`, "Iterating over a symbolic tf.Tensor is not allowed", TensorFlow 2.21).
        "import tensorflow as tf\nclass PerClass(tf.keras.metrics.Metric):\n"
        "    def update_state(self, y_true, y_pred, sample_weight=None):\n        for i, row in enumerate(y_pred):\n"
        "            self.total.assign_add(row[i])\n",
        # From a real issue: the AutoGraph guide's function, called with a tensor.
        "import tensorflow as tf\n@tf.function\ndef square_if_positive(x):\n"
        "    return [i ** 2 if i > 0 else i for i in x]\nsquare_if_positive(tf.range(-5, 5))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return tf.stack([x * i for i in tf.range(3)])\n",
        "import tensorflow as tf\n@tf.function(input_signature=[tf.TensorSpec([None])])\ndef f(x):\n"
        "    return sum(v * v for v in x)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, y):\n    s = tf.constant(0)\n"
        "    for a, b in zip(x, y):\n        s += a * b\n    return s\nf(tf.constant([1, 2]), tf.constant([3, 4]))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    s = tf.constant(0)\n    for i, a in enumerate(x):\n"
        "        s += a\n    return s\nf(tf.constant([1, 2]))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    r, c = tf.shape(x)\n    return r * c\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return tf.stack(list(tf.reverse(x, [0])))\n",
        "import tensorflow as tf\nds = tf.data.Dataset.range(3)\n@tf.function\ndef f():\n"
        "    return tf.add_n([x for x in ds])\n",
        # `range()` of a tensor where AutoGraph does not convert (tensorflow/tensorflow#113242, a Keras 3 `call`).
        "import tensorflow as tf\nclass M(tf.keras.Model):\n    def call(self, x):\n        expanded = []\n"
        "        for j in range(tf.shape(x)[1]):\n            expanded.append(x[:, j:j + 1] * 2.0)\n"
        "        return tf.concat(expanded, axis=1)\n",
        # A `for` statement over, and `len()` of, a tensor in a Keras 3 `call` (coverage C5, C8: each raises when
        # the functional model is built, TensorFlow 2.21).
        "import tensorflow as tf\nimport keras\nclass Rows(keras.layers.Layer):\n    def call(self, x):\n"
        "        out = []\n        for row in tf.identity(x):\n            out.append(row * 2)\n"
        "        return keras.ops.stack(out)\n",
        "import tensorflow as tf\nimport keras\nclass Count(keras.layers.Layer):\n    def call(self, x):\n"
        "        return keras.ops.divide(x, len(tf.identity(x)))\n",
    )
    must_not_flag = (
        # `len()` of a tensor in a `call` of a file that does not show which Keras it is written for: Keras 2
        # converts `call` (AutoGraph's `len` is the static size), Keras 3 does not (google-research/deeplab2
        # 64bc1c1 model/layers/drop_path.py:125, judged not a finding: written for Keras 2).
        "import tensorflow as tf\nclass DropPath(tf.keras.layers.Layer):\n    def call(self, x):\n"
        "        shape = [tf.shape(x)[0]] + [1] * (len(tf.shape(x)) - 1)\n"
        "        return x * tf.random.uniform(shape)\n",
        # The same in a tf.function: AutoGraph converts the `for` and `len` (tf.while_loop, tf.shape).
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    s = tf.zeros_like(x[0])\n"
        "    for row in tf.identity(x):\n        s += row\n    return s / len(tf.identity(x))\n",
        # Functional control flow called eagerly runs its function eagerly (google/uncertainty-baselines
        # drug_cardiotoxicity/augmentation_utils.py:656); a feature-column spec is a dict (tensorflow/ranking
        # keras/feature.py:272).
        "import tensorflow as tf\ndef per_row(idx):\n    if len(tf.shape(idx)) == 1:\n        idx = idx * 2\n"
        "    return idx\nout = tf.map_fn(per_row, tf.ones((2, 3)))\n",
        "import tensorflow as tf\nimport keras\nclass Enc(keras.layers.Layer):\n    def call(self, features):\n"
        "        specs = tf.feature_column.make_parse_example_spec(self.columns)\n        for name in specs:\n"
        "            features[name] = features[name] * 2\n        return features\n",
        # TensorFlow calls that return Python tuples and lists (deepmind/acme a6d7199
        # acme/agents/tf/mpo/learning.py:245; google/edward2 ee02560 layers/posterior_network.py:81).
        "import tensorflow as tf\n@tf.function\ndef step(grads, alphas):\n"
        "    clipped = tuple(tf.clip_by_global_norm(grads, 40.0)[0])\n"
        "    probs, _ = tf.linalg.normalize(alphas, ord=1, axis=-1)\n    first, second = tf.unstack(probs)\n"
        "    return clipped, first + second\n",
        # Reference: tf.map_fn, and a for statement that AutoGraph converts.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return tf.map_fn(lambda i: i ** 2 if i > 0 else i, x)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    r = tf.TensorArray(x.dtype, 0, dynamic_size=True)\n"
        "    for i in x:\n        r = r.write(r.size(), i * 2)\n    return r.stack()\nf(tf.range(3))\n",
        # Python lists of tensors, static shapes, datasets in for statements.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return [row * 2 for row in tf.unstack(x)]\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    a, b = tf.split(x, 2)\n    r, c = tf.unstack(tf.shape(x))\n"
        "    return [d for d in x.shape], a, b, r * c\n",
        "import tensorflow as tf\n@tf.function\ndef f():\n    s = tf.constant(0, tf.int64)\n"
        "    for i, a in enumerate(tf.data.Dataset.range(3)):\n        s += a\n    return s\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return sorted(tf.reverse(x, [0]))\n",
        # Slices of the list a while_loop returns; `*args` under an input_signature (real TensorFlow code).
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    outs = tf.while_loop(lambda i, a, b: i < 3, "
        "lambda i, a, b: (i + 1, a, b), [0, x, x])[1:]\n    return [o * 2 for o in outs]\n",
        "import tensorflow as tf\n@tf.function(input_signature=[tf.TensorSpec([2]), tf.TensorSpec([2])])\n"
        "def f(*args):\n    return tf.add_n(list(args))\n",
        # Ops with several outputs, unpacked (tf-models-official 2.20.0 official/vision/ops/preprocess_ops_3d.py:371,
        # official/vision/modeling/layers/roi_generator.py:131, official/legacy/xlnet/training_utils.py:163,
        # official/vision/serving/video_classification.py:48; tensorflow-probability 0.25.0
        # distributions/empirical.py:251, a raw op).
        "import tensorflow as tf\n@tf.function\ndef f(boxes, scores, grads, shape, bbox, serialized, x):\n"
        "    rois, roi_scores, _, _ = tf.image.combined_non_max_suppression(boxes, scores, 10, 10)\n"
        "    clipped, _ = tf.clip_by_global_norm(grads, clip_norm=1.0)\n"
        "    sample = tf.image.sample_distorted_bounding_box(shape, bounding_boxes=bbox)\n"
        "    begin, size, _ = sample\n"
        "    _, decoded = tf.io.parse_single_sequence_example(serialized, {}, {})\n"
        "    _, idx, count = tf.raw_ops.UniqueWithCountsV2(x=x, axis=[0])\n"
        "    return rois, roi_scores, clipped, begin, size, decoded, idx, count\n",
        # A parameter the file does not pin down (a list of tensors in the call below).
        "import tensorflow as tf\n@tf.function\ndef f(xs):\n    return [x * 2 for x in xs]\nf([tf.constant(1)])\n",
        # Eager code, and code behind an eager check.
        "import tensorflow as tf\ndef f(x):\n    return [i for i in tf.range(3)]\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.executing_eagerly():\n"
        "        return [i for i in tf.range(3)]\n    return x\n",
        # `range()` of a tensor in a function AutoGraph converts is tf.range.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    s = tf.constant(0.)\n    for j in range(tf.shape(x)[0]):\n"
        "        s += x[j]\n    return s\nf(tf.constant([1., 2.]))\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for node, function in facts.graph_nodes(*_COMPREHENSIONS, ast.Call, ast.Assign, ast.For):
            if facts.eager_guarded(function):
                continue
            unconverted = _unconverted_tensor_use(facts, node, function)
            if unconverted is not None:
                yield self.finding(facts, node, unconverted, function=function)
                continue
            bound = _tensor_range_bound(facts, node, function)
            if bound is not None:
                yield self.finding(facts, node, f"`range()` of `{facts.text(bound)}`, a symbolic tensor, raises TypeError "
                                   "while tracing: AutoGraph does not convert this function (Keras 3 runs `call` as "
                                   "written), so `range` needs a Python int; use tf.range, or a size known while "
                                   "tracing (`x.shape[1]`)", function=function)
                continue
            for iterable, how in _iterated(facts, node):
                described = _iteration_outcome(facts, iterable, isinstance(node, _COMPREHENSIONS))
                if described is not None:
                    yield self.finding(facts, node, f"{how} `{facts.text(iterable)}`, {described}", function=function)
                    break


def _tensor_range_bound(facts: FileFacts, node: ast.AST, function: FunctionInfo) -> ast.expr | None:
    """The argument of `range(...)` that is surely a tensor, in graph code AutoGraph does not convert
    (where `range` is Python's, not AutoGraph's `tf.range`); else None."""
    if not isinstance(node, ast.Call) or facts.resolve(node.func) != "builtins.range" \
            or facts.autograph_converted(function):
        return None
    return next((arg for arg in node.args if facts.is_single_tensor(arg)), None)


def _unconverted_tensor_use(facts: FileFacts, node: ast.AST, function: FunctionInfo) -> str | None:
    """What goes wrong with a `for` statement over, or `len()` of, a surely-single tensor in graph code
    that only roots without AutoGraph reach (Keras 3, `autograph=False`), where both are Python's; None
    elsewhere (a function AutoGraph tries to convert and gives up on is TFC034's)."""
    if not facts.surely_runs_as_written(function):
        return None
    if isinstance(node, ast.For) and facts.is_single_tensor(node.iter):
        return (f"a `for` statement iterates in Python over `{facts.text(node.iter)}`, a symbolic tensor: AutoGraph "
                "does not convert this function (Keras 3 runs `call` as written), so tracing raises "
                "OperatorNotAllowedInGraphError; use tf.map_fn, tf.while_loop, or tf.unstack when the size is static")
    if isinstance(node, ast.Call) and facts.resolve(node.func) == "builtins.len" and len(node.args) == 1 \
            and facts.is_single_tensor(node.args[0]):
        return (f"`len()` of `{facts.text(node.args[0])}`, a symbolic tensor, raises TypeError while tracing: "
                "AutoGraph does not convert this function (Keras 3 runs `call` as written), so `len` is Python's; "
                "use tf.shape(x)[0], or x.shape[0] when the size is static")
    return None


def _iterated(facts: FileFacts, node: ast.AST) -> Iterator[tuple[ast.expr, str]]:
    """The expressions `node` iterates over in Python, each with how it does."""
    if isinstance(node, _COMPREHENSIONS):
        for generator in node.generators:
            yield generator.iter, "a comprehension iterates in Python over"
    elif isinstance(node, ast.Call):
        name = facts.resolve(node.func)
        positional = [arg for arg in node.args if not isinstance(arg, ast.Starred)]
        if name in _ITERATING_BUILTINS:
            for arg in positional[_ITERATING_BUILTINS[name]]:
                yield arg, f"`{name.removeprefix('builtins.')}()` iterates in Python over"
        elif name in _MIN_MAX and len(node.args) == 1 and positional:
            yield positional[0], f"`{name.removeprefix('builtins.')}()` iterates in Python over"
    elif isinstance(node, ast.Assign) and any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets):
        yield node.value, "unpacking iterates in Python over"


def _iteration_outcome(facts: FileFacts, iterable: ast.expr, comprehension: bool) -> str | None:
    """What happens when graph code iterates over `iterable` in Python; None when nothing goes wrong.

    Datasets count only in comprehensions: AutoGraph overloads `zip`, `enumerate`, `map` and `filter`
    for them."""
    if facts.is_single_tensor(iterable):
        return ("a symbolic tensor: tracing raises OperatorNotAllowedInGraphError (AutoGraph converts only "
                "`for` statements); use a `for` statement, tf.map_fn, or tf.unstack when the size is static")
    if comprehension and facts.kinds(iterable) == {kinds.DATASET}:
        return ("a tf.data.Dataset: its elements are graph ops that never end the Python loop, so tracing "
                "never finishes; use a `for` statement or Dataset.reduce")
    return None
