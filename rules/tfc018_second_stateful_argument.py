"""TFC018: a tf.function called with a second optimizer (or an unbuilt model): new variables after the first trace."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine import kinds
from tfcheck.engine.facts import FileFacts, TfFunctionCall
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_STATEFUL_KINDS = {kinds.OPTIMIZER: "optimizer", kinds.MODEL: "model", kinds.LAYER: "layer"}
# Calls on a model or layer that create its variables eagerly, before any tf.function sees it.
_BUILDING_METHODS = frozenset({"build", "fit", "evaluate", "predict", "summary", "train_on_batch",
                               "predict_on_batch", "test_on_batch"})


class SecondStatefulArgument(Rule):
    """A tf.function given a second optimizer, or a new unbuilt model, creates variables after its first trace.

    ## What it does
    Finds calls of a tf.function that pass a parameter a different Keras optimizer (or a model or
    layer that has not been built) than an earlier call of the same tf.function object passed it,
    reported at the call that passes the second one. Optimizers are followed through names, through
    the names a `for opt in (a, b):` loop variable takes, and through `self.opt` attributes.

    ## Why is this bad
    A tf.function may create variables only on its first trace. Optimizers create their slot
    variables, and unbuilt models and layers their weights, on first use, so the call with the
    second one traces again and creates variables there, which raises `ValueError: tf.function only
    supports singleton tf.Variables created on the first call`. An error: the call cannot run.

    ## Example
    ```python
    @tf.function
    def train_step(w, x, y, optimizer):
        ...

    train_step(w, x, y, opt1)
    train_step(w, x, y, opt2)  # a second optimizer: new slot variables
    ```

    ## Use instead
    ```python
    train_step_1 = tf.function(train_step).get_concrete_function(w, x, y, opt1)
    train_step_2 = tf.function(train_step).get_concrete_function(w, x, y, opt2)
    ```
    Make one tf.function per optimizer (`tf.function(train_step)` for each), and call
    `model.build(input_shape)` before passing a new model.
    """

    code = "TFC018"
    name = "second-stateful-argument"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # Reference: multiple Keras optimizers.
        "import tensorflow as tf\nopt1 = tf.keras.optimizers.Adam(learning_rate = 1e-2)\n"
        "opt2 = tf.keras.optimizers.Adam(learning_rate = 1e-3)\n@tf.function\n"
        "def train_step(w, x, y, optimizer):\n   with tf.GradientTape() as tape:\n"
        "       L = tf.reduce_sum(tf.square(w*x - y))\n   gradients = tape.gradient(L, [w])\n"
        "   optimizer.apply_gradients(zip(gradients, [w]))\nw = tf.Variable(2.)\n"
        "x = tf.constant([-1.])\ny = tf.constant([2.])\ntrain_step(w, x, y, opt1)\ntrain_step(w, x, y, opt2)\n",
        # Optimizers chosen in a loop.
        "import keras\nimport tensorflow as tf\nsgd = keras.optimizers.SGD()\nadam = keras.optimizers.Adam()\n"
        "@tf.function\ndef step(opt, x):\n    opt.apply_gradients([])\n"
        "for opt in (sgd, adam):\n    step(opt, 1.0)\n",
        # Two optimizers kept on the instance, passed to one tf.function method.
        "import tensorflow as tf\nclass Gan:\n    def __init__(self):\n"
        "        self.gen_opt = tf.keras.optimizers.Adam(1e-4)\n        self.disc_opt = tf.keras.optimizers.Adam(1e-4)\n"
        "    @tf.function\n    def step(self, opt, grads, variables):\n"
        "        opt.apply_gradients(zip(grads, variables))\n    def fit(self, g, gv, d, dv):\n"
        "        self.step(self.gen_opt, g, gv)\n        self.step(self.disc_opt, d, dv)\n",
        # Two unbuilt subclassed models.
        "import tensorflow as tf\nclass Net(tf.keras.Model):\n    def call(self, x):\n        return x\n"
        "@tf.function\ndef run(model, x):\n    return model(x)\na = Net()\nb = Net()\nrun(a, 1.0)\nrun(b, 1.0)\n",
    )
    must_not_flag = (
        # Reference: one tf.function per optimizer, through concrete functions.
        "import tensorflow as tf\nopt1 = tf.keras.optimizers.Adam(learning_rate = 1e-2)\n"
        "opt2 = tf.keras.optimizers.Adam(learning_rate = 1e-3)\ndef train_step(w, x, y, optimizer):\n"
        "   optimizer.apply_gradients(zip([x], [w]))\nw = tf.Variable(2.)\nx = tf.constant([-1.])\n"
        "y = tf.constant([2.])\n"
        "train_step_1 = tf.function(train_step).get_concrete_function(w, x, y, opt1)\n"
        "train_step_2 = tf.function(train_step).get_concrete_function(w, x, y, opt2)\n"
        "for i in range(10):\n  if i % 2 == 0:\n    train_step_1(w, x, y)\n  else:\n    train_step_2(w, x, y)\n",
        # The same optimizer twice; a second model that was built first.
        "import tensorflow as tf\nopt = tf.keras.optimizers.Adam()\n@tf.function\ndef step(o, x):\n"
        "    o.apply_gradients([])\nstep(opt, 1.0)\nstep(opt, 2.0)\n",
        "import tensorflow as tf\nclass Net(tf.keras.Model):\n    def call(self, x):\n        return x\n"
        "@tf.function\ndef run(model, x):\n    return model(x)\na = Net()\nb = Net()\nb.build((None, 3))\n"
        "run(a, 1.0)\nrun(b, 1.0)\n",
        # The same optimizer attribute every time.
        "import tensorflow as tf\nclass T:\n    def __init__(self):\n        self.opt = tf.keras.optimizers.Adam()\n"
        "    @tf.function\n    def step(self, opt, g, v):\n        opt.apply_gradients(zip(g, v))\n"
        "    def fit(self, g, v):\n        self.step(self.opt, g, v)\n        self.step(self.opt, g, v)\n",
        # Two different tf.function objects, one optimizer each.
        "import tensorflow as tf\nopt1 = tf.keras.optimizers.Adam()\nopt2 = tf.keras.optimizers.SGD()\n"
        "def step(o):\n    o.apply_gradients([])\nstep1 = tf.function(step)\nstep2 = tf.function(step)\n"
        "step1(opt1)\nstep2(opt2)\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for tf_call, parameter, kind in _second_stateful_arguments(facts):
            yield self.finding(
                facts, tf_call.call,
                f"`{tf_call.function.name}` is called with a second {kind} for `{parameter}`, which creates its "
                f"variables inside the already-traced function and raises; use one tf.function per {kind}"
                + (" (or call model.build(input_shape) first)" if kind != "optimizer" else ""))


def _second_stateful_arguments(facts: FileFacts) -> Iterator[tuple[TfFunctionCall, str, str]]:
    """Calls passing a tf.function parameter a different optimizer/unbuilt model than an earlier call."""
    def identities(tf_call: TfFunctionCall, parameter: str, argument: ast.expr) -> tuple[tuple[ast.AST, ...], ...] | None:
        found = _stateful_objects(facts, argument)
        return tuple(found[0]) if found is not None else None

    for tf_call, parameter, argument in facts.varying_arguments(facts.tf_function_calls, identities):
        found = _stateful_objects(facts, argument)
        assert found is not None
        yield tf_call, parameter, found[1]


def _stateful_objects(facts: FileFacts, argument: ast.expr) -> tuple[list[tuple[ast.AST, ...]], str] | None:
    """The identities (binding nodes) of the optimizers/unbuilt models an argument can be, with their kind.

    A name (or each name a `for opt in (a, b):` loop variable takes), or `self.opt`: an optimizer kept
    on the instance, identified by the statements that assign it.
    """
    if isinstance(argument, ast.Attribute) and facts.is_self_attribute(argument):
        cls = facts.class_of_self(argument)
        assigned = facts.self_attribute_values(cls, argument.attr) if cls is not None else []
        if assigned and facts.kinds(argument) == {kinds.OPTIMIZER}:
            return [tuple(node for node, _ in assigned)], "optimizer"
        return None
    if not isinstance(argument, ast.Name):
        return None
    identities: list[tuple[ast.AST, ...]] = []
    kind = None
    for name in _loop_alternatives(facts, argument) or [argument]:
        found = _stateful_kind(facts, name)
        if found is None:
            return None
        kind = kind or found
        identities.append(tuple(b.node for b in facts.bindings_of(name)))
    return (identities, kind) if kind is not None else None


def _stateful_kind(facts: FileFacts, name: ast.Name) -> str | None:
    found = facts.kinds(name)
    if any((facts.resolve(b.value.func) or "").startswith("keras.optimizers.schedules.")
           for b in facts.bindings_of(name) if isinstance(b.value, ast.Call)):
        return None  # a learning-rate schedule has no variables
    for kind, word in _STATEFUL_KINDS.items():
        if found == {kind}:
            return word if kind == kinds.OPTIMIZER or not _is_built(facts, name) else None
    return None


def _loop_alternatives(facts: FileFacts, name: ast.Name) -> list[ast.Name]:
    """`for opt in (a, b): f(opt)`: the names the loop variable takes, when it is such a loop."""
    bindings = facts.bindings_of(name)
    if len(bindings) != 1 or bindings[0].kind != "for":
        return []
    loop = facts.parent(bindings[0].node)
    if not (isinstance(loop, ast.For) and loop.target is bindings[0].node
            and isinstance(loop.iter, (ast.Tuple, ast.List))):
        return []
    elements = loop.iter.elts
    names = [e for e in elements if isinstance(e, ast.Name)]
    return names if elements and len(names) == len(elements) else []


def _is_built(facts: FileFacts, name: ast.Name) -> bool:
    """A model or layer whose weights exist before the tf.function sees it."""
    bindings = facts.bindings_of(name)
    if any(_built_when_created(facts, b.value) for b in bindings if b.value is not None):
        return True
    for call in facts.calls_on(name.id):
        func = call.func
        receiver = func.value if isinstance(func, ast.Attribute) and func.attr in _BUILDING_METHODS else func
        if isinstance(receiver, ast.Name) and receiver.id == name.id \
                and facts.bindings_of(receiver) == bindings and call.lineno < name.lineno:
            return True
    return False


def _built_when_created(facts: FileFacts, value: ast.expr) -> bool:
    """Functional models, pretrained applications and models given an input shape are built at once."""
    if not isinstance(value, ast.Call):
        return False
    qualified = facts.resolve(value.func) or ""
    if qualified.startswith("keras.applications.") or (qualified in ("keras.Model", "keras.models.Model")
                                                        and (value.args or value.keywords)):
        return True
    return any((isinstance(n, ast.keyword) and n.arg in ("input_shape", "batch_input_shape"))
               or (isinstance(n, ast.Call) and (facts.resolve(n.func) or "").endswith(("Input", "InputLayer")))
               for n in ast.walk(value))
