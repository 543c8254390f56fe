"""TFC001: Python print() in graph code."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Edit, Finding, Fix, Severity
from tfcheck.rule import Rule

# A debugging flag off at module level, read in a Keras call.
_DEBUG_FLAG = ("import tensorflow as tf\nDEBUG = False\nclass Actor(tf.keras.Model):\n    def call(self, state):\n"
               "        mean = self.dense(state)\n        if DEBUG:\n            print(mean)\n        return mean\n")


# Words that say a print reports tracing itself: "Tracing with", "traced", "retracing".
_TRACING = re.compile(r"\b(re)?trac(e|ed|es|ing)\b", re.IGNORECASE)
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log", "vlog"})
# Modules whose functions log: the standard library's, absl's, TensorFlow's v1 logging.
_LOG_MODULES = ("logging.", "absl.logging.", "tensorflow.compat.v1.logging.", "tensorflow.logging.")
# Calls that return a logger.
_LOGGER_FACTORIES = frozenset({"logging.getLogger", "tensorflow.get_logger", "absl.logging.get_absl_logger"})


class PrintInGraph(Rule):
    """Python `print()` or logging inside graph code runs only while the function is traced.

    ## What it does
    Finds calls to the built-in `print` in code that runs as a TensorFlow graph: functions decorated
    with `tf.function`, functions they call, and functions traced by `tf.data` or functional control
    flow; and calls of `logging`, `absl.logging`, `tf.compat.v1.logging` or a logger
    (`logging.getLogger(...)`, `tf.get_logger()`) there that log a tensor, the same pitfall by
    another name (YosefLab/epitome#44 and #51: the loss logged once, as `Tensor("Mean_3:0", ...)`).
    A message that logs no tensor (a warning about an argument, a note on what is being built) is
    fine once per trace and is not reported. A `print` in a branch only eager execution takes
    (`if tf.executing_eagerly():`, `if hasattr(x, "numpy"):`) never runs while tracing and is not
    reported.

    ## Why is this bad
    Python side effects happen only while tracing. The message is printed on the first call (and on
    every retrace), not on later calls, and tensors print as symbolic placeholders rather than their
    values, which makes debugging output misleading.

    ## Example
    ```python
    @tf.function
    def f(x):
        print("x is", x)
        return x + 1
    ```

    ## Use instead
    ```python
    @tf.function
    def f(x):
        tf.print("x is", x)
        return x + 1
    ```
    `tf.print` is an operation in the graph and runs on every call. (Keep `print` on purpose to see
    when retracing happens; then suppress with `# tfcheck: ignore[TFC001]`.)
    """

    code = "TFC001"
    name = "print-in-graph"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    print(x)\n    return x\n",
        "import tensorflow as tf\ndef helper(x):\n    print(x)\n@tf.function\ndef f(x):\n    helper(x)\n",
        "from tensorflow import function\n@function(jit_compile=True)\ndef f(x):\n    print(x)\n",
        "import tensorflow as tf\nds = tf.data.Dataset.range(3).map(lambda x: print(x) or x)\n",
        # A subclass of a built-in layer (tensorflow/tensorflow#27519): `fit` traces its `call`.
        "import tensorflow as tf\nclass MyDense(tf.keras.layers.Dense):\n    def call(self, inputs):\n"
        "        print('not available.')\n        return super().call(inputs)\n",
        # A debugging flag that is on, or one the file sets elsewhere: the prints run (while tracing).
        _DEBUG_FLAG.replace("False", "True"),
        _DEBUG_FLAG + "def main():\n    global DEBUG\n    DEBUG = True\n",
        _DEBUG_FLAG.replace("if DEBUG:", "if not DEBUG:"),
        # YosefLab/epitome#51 (epitome/models.py, cut down): the loss logged in a tf.function train step.
        "import tensorflow as tf\n@tf.function\ndef train_step(step, x):\n    loss = tf.reduce_mean(x)\n"
        "    tf.compat.v1.logging.info(str(step) + ' ' + str(loss))\n    return loss\n",
        "import logging\nimport tensorflow as tf\nlogger = logging.getLogger(__name__)\n@tf.function\n"
        "def f(x):\n    y = tf.square(x)\n    logger.info('y = %s', y)\n    return y\n",
        "from absl import logging\nimport tensorflow as tf\n@tf.function\ndef f(x):\n    s = tf.reduce_sum(x)\n"
        "    logging.info('sum: %s', s)\n    return s\n",
        # tensorflow/graphics points_to_3Dobjects/train_multi_objects/train.py:418 (cut down): an item of a
        # dataset element logged in a step made a tf.function.
        "from absl import logging\nimport tensorflow as tf\ndef train(strategy, model):\n    def step(sample):\n"
        "        logging.info(sample['name'])\n        return strategy.run(model.train_sample, args=(sample,))\n"
        "    step = tf.function(step)\n    return step\n",
        # NVIDIA-Merlin/models merlin/models/tf/blocks/retrieval/base.py:356-364 (cut down): a warning in the
        # else branch of a tensor `if`, which AutoGraph traces whatever the condition.
        "import logging\nimport tensorflow as tf\nLOG = logging.getLogger('merlin')\n@tf.function\n"
        "def sample(x):\n    if tf.shape(x)[0] > 0:\n        x = x * 2\n    else:\n"
        "        LOG.warn('The sampler returned no samples for this batch.')\n    return x\n",
    )
    must_not_flag = (
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    tf.print(x)\n",
        "def f(x):\n    print(x)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    with tf.init_scope():\n        print('building')\n",
        "import tensorflow as tf\ndef log(x):\n    print(x)\n    return x\n"
        "@tf.function\ndef f(x):\n    return tf.py_function(log, [x], tf.float32)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    print = tf.print\n    print(x)\n",
        # A branch only eager execution takes: never runs while tracing.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.executing_eagerly():\n        print(x)\n    return x\n",
        "import tensorflow as tf\nclass MyDense(tf.keras.layers.Dense):\n    def call(self, inputs):\n"
        "        if hasattr(inputs, 'numpy'):\n            print(inputs.numpy())\n        return super().call(inputs)\n",
        # A debugging flag the module sets off once and never changes: the branch never runs
        # (SAC-HER-Tensorflow2 3326bed Debug/models.py:24-94, cut down).
        _DEBUG_FLAG,
        _DEBUG_FLAG.replace("if DEBUG:", "if not DEBUG:\n            pass\n        else:"),
        # A warning about a Python setting, once per trace on purpose (keras/src's own style), and a
        # static shape logged while building.
        "import logging\nimport tensorflow as tf\n@tf.function\ndef f(x, mode='train'):\n"
        "    if mode not in ('train', 'eval'):\n        logging.warning('unknown mode %s', mode)\n    return x\n",
        "from absl import logging\nimport tensorflow as tf\n@tf.function\ndef f(x):\n"
        "    logging.info('input shape %s', x.shape)\n    return x\n",
        "import logging\nimport tensorflow as tf\ndef f(x):\n    logging.info('x = %s', tf.reduce_sum(x))\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        tf_alias = facts.tensorflow_alias
        for call, function in facts.graph_calls("builtins.print"):
            if facts.in_eager_only_branch(call, function):
                continue  # `if tf.executing_eagerly(): print(x.numpy())` never runs while tracing
            if _meant_for_tracing(facts, call):
                continue
            fix = None
            if tf_alias is not None:
                fix = Fix(f"Replace `print` with `{tf_alias}.print`", (_callee_edit(facts, call, f"{tf_alias}.print"),))
            yield self.finding(facts, call, "print() runs only while tracing, not on every call; use tf.print()",
                               fix, function)
        for call, function in facts.graph_nodes(ast.Call):
            assert isinstance(call, ast.Call)
            if not _is_logging(facts, call.func) or facts.in_eager_only_branch(call, function) \
                    or _meant_for_tracing(facts, call):
                continue
            logged = _logged_tensor(facts, call, function)
            condition = _tensor_condition(facts, call, function)
            if logged is not None:
                yield self.finding(
                    facts, call, f"`{facts.text(call.func)}()` runs only while tracing: it logs `{facts.text(logged)}` "
                    "once, as a symbolic tensor, not its value on every call; use tf.print()", function=function)
            elif condition is not None:
                yield self.finding(
                    facts, call, f"`{facts.text(call.func)}()` in a branch of a tensor condition "
                    f"(`{facts.text(condition)}`) runs while tracing, where AutoGraph traces every branch: it logs "
                    "once per trace whatever the condition, never per call; use tf.print()", function=function)


def _tensor_condition(facts: FileFacts, node: ast.AST, function: FunctionInfo) -> ast.expr | None:
    """The test of the tensor `if`/`while` of `function` whose branch holds `node`, in code AutoGraph
    converts (NVIDIA-Merlin/models' `LOG.warn` in the else of `if tf.shape(x)[0] > 0:`)."""
    if not facts.autograph_converted(function):
        return None
    for ancestor in facts.ancestors(node):
        if ancestor is function.node:
            return None
        if isinstance(ancestor, (ast.If, ast.While)) and facts.surely_tensor(ancestor.test):
            return ancestor.test
    return None


def _logged_tensor(facts: FileFacts, call: ast.Call, function: FunctionInfo) -> ast.expr | None:
    """The first tensor a logging call logs, or None when it logs no tensor."""
    values = [*call.args, *(keyword.value for keyword in call.keywords if keyword.arg is None)]
    return next((found for arg in values for found in _tensors_in(facts, arg, function)), None)


def _tensors_in(facts: FileFacts, arg: ast.expr, function: FunctionInfo) -> list[ast.expr]:
    """Tensors an argument formats: the argument itself, or operands of `str()`, `+`, f-strings and `%`;
    an item of a traced parameter counts (`sample['name']` of a dataset element, tensorflow/graphics'
    points_to_3Dobjects train.py)."""
    return [node for node in ast.walk(arg) if isinstance(node, (ast.Name, ast.Call, ast.Attribute, ast.Subscript))
            and (facts.surely_tensor(node) or _item_of_traced_parameter(facts, node, function))
            and not facts.tensor_metadata(node)]


def _item_of_traced_parameter(facts: FileFacts, node: ast.AST, function: FunctionInfo) -> bool:
    """`sample['name']`: an item of a parameter of the tf.function `function` (a structure passed to a
    tf.function holds tensors: a dataset element, a batch dict)."""
    return isinstance(node, ast.Subscript) and facts.is_parameter(node.value, function) and function.cls is None \
        and facts.graph_functions.get(function, "").startswith(("decorated with", "passed to tf.function"))


def _is_logging(facts: FileFacts, func: ast.expr) -> bool:
    """`logging.info`, `absl.logging.warning`, `tf.compat.v1.logging.info`, or a method of a logger."""
    name = facts.resolve(func)
    if name is not None:
        return name.startswith(_LOG_MODULES) and name.rsplit(".", 1)[-1] in _LOG_METHODS
    if not isinstance(func, ast.Attribute) or func.attr not in _LOG_METHODS:
        return False
    receiver = func.value
    if isinstance(receiver, ast.Call):
        return facts.resolve(receiver.func) in _LOGGER_FACTORIES
    if isinstance(receiver, ast.Name):
        bound = [binding.value for binding in facts.bindings_of(receiver)]
        return bool(bound) and all(isinstance(value, ast.Call) and facts.resolve(value.func) in _LOGGER_FACTORIES
                                   for value in bound)
    return False


def _meant_for_tracing(facts: FileFacts, call: ast.Call) -> bool:
    """A print whose text says it reports tracing (`print("Tracing with", x)`, the TensorFlow guide's own
    way to show when a function traces), or that prints only static shapes and dtypes (`print(x.shape)`):
    once per trace is what its author wants, and tf.print would not do better."""
    texts = [node.value for arg in call.args for node in ast.walk(arg)
             if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    if any(_TRACING.search(text) for text in texts):
        return True
    values = [arg for arg in call.args if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str))]
    return bool(values) and all(facts.tensor_metadata(value) for value in values)


def _callee_edit(facts: FileFacts, call: ast.Call, replacement: str) -> Edit:
    line, column, end_line, end_column = facts.span(call.func)
    return Edit(line, column, end_line, end_column, replacement)
