"""TFC004: tf.Variable (or a Keras optimizer or layer with weights) created in graph code on every trace."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine import kinds
from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

VARIABLE_CONSTRUCTORS = ("tensorflow.Variable", "keras.Variable", "keras.backend.variable",
                         "tensorflow.python.ops.variables.Variable",
                         "tensorflow.python.ops.resource_variable_ops.ResourceVariable")
_OPTIMIZER_PREFIXES = ("keras.optimizers.", "tensorflow.optimizers.")
# Keras layers that own no weights: making one per trace costs nothing.
_WEIGHTLESS_LAYERS = frozenset({
    "Activation", "ActivityRegularization", "Add", "Average", "AveragePooling1D",
    "AveragePooling2D", "AveragePooling3D", "Concatenate", "Cropping1D", "Cropping2D", "Cropping3D", "Dot",
    "ELU", "Flatten", "GlobalAveragePooling1D",
    "GlobalAveragePooling2D", "GlobalAveragePooling3D", "GlobalMaxPooling1D", "GlobalMaxPooling2D",
    "GlobalMaxPooling3D", "Identity", "InputLayer", "Lambda", "LeakyReLU", "Masking", "MaxPooling1D",
    "MaxPooling2D", "MaxPooling3D", "Maximum", "Minimum", "Multiply", "Permute", "ReLU", "RepeatVector",
    "Rescaling", "Reshape", "Softmax", "Subtract",
    "ThresholdedReLU", "UpSampling1D", "UpSampling2D", "UpSampling3D", "ZeroPadding1D", "ZeroPadding2D",
    "ZeroPadding3D", "CenterCrop", "Resizing", "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D",
    "AvgPool3D", "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D", "GlobalMaxPool1D", "GlobalMaxPool2D",
    "GlobalMaxPool3D",
})
# Random layers: in Keras 3 each keeps a seed generator whose state is a variable (keras-cv's
# TransformerEncoder built `Dropout(0.1)` in `call`: `fit` raises, checked in TensorFlow 2.21); in Keras 2
# they own none.
_RANDOM_LAYERS = frozenset({"AlphaDropout", "Dropout", "GaussianDropout", "GaussianNoise", "SpatialDropout1D",
                            "SpatialDropout2D", "SpatialDropout3D"})
_MAX_CALL_DEPTH = 6
_T = "import tensorflow as tf\n"


class VariableInGraph(Rule):
    """A `tf.Variable` created in graph code on every trace raises on the second trace.

    ## What it does
    Finds `tf.Variable(...)` (and `keras.Variable`, `K.variable`) or a Keras optimizer created in
    graph code without a first-call guard in the function or at every graph call site of it: a test
    that something is not yet set whose branch sets it (`if self.v is None:`, `if not self.built:`
    with `self.build()` setting it, `if not hasattr(self, "v"):`, `self.v = self.v or ...`), or the
    `except KeyError:` of a cache lookup. An `if` on a setting or an argument (`if self.use_bias:`)
    is no guard: a later trace with another value creates the variable anew. A Keras layer with
    weights (a library layer other than pooling, dropout, reshaping and merge layers, or a layer class
    of the file whose code makes weights) constructed in graph code is the same mistake: a helper of
    `call` that builds `Conv2D(...)(x)` makes new weights on every trace. (Calls that pass a tf.function a
    second optimizer or an unbuilt model were part of this rule; they are TFC018
    second-stateful-argument now.) So is `self.add_weight(...)` in graph code of a Keras layer or model
    (`call` or a helper it reaches) in Keras 3 code: Keras has built the layer before `call` runs.

    ## Why is this bad
    A tf.function may create variables only on its first trace; it traces again to check that no new
    ones appear, so an unguarded `tf.Variable(...)` raises `ValueError: tf.function only supports
    singleton tf.Variables created on the first call`. An optimizer made in the function creates its
    variables (iterations, slots) on first use in every trace, with the same error. This is an
    error, not a warning: the function cannot run (or be compiled) at all.

    ## Example
    ```python
    @tf.function
    def f(x):
        v = tf.Variable(1.0)
        return v + x
    ```

    ## Use instead
    ```python
    class Count(tf.Module):
        def __init__(self):
            self.count = None

        @tf.function
        def __call__(self):
            if self.count is None:
                self.count = tf.Variable(0)
            return self.count.assign_add(1)
    ```
    Create variables and optimizers outside the function (or once, behind an `is None` guard).
    """

    code = "TFC004"
    name = "variable-in-graph"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # Reference: creating tf.Variables.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n  v = tf.Variable(1.0)\n  return v\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n  v = tf.Variable(1.0)\n  v.assign_add(x)\n  return v\n",
        # An attribute set on every trace, no guard.
        "import tensorflow as tf\nclass M(tf.Module):\n    @tf.function\n    def __call__(self, x):\n"
        "        self.v = tf.Variable(x)\n        return self.v\n",
        # Created in a helper that graph code calls unconditionally.
        "import tensorflow as tf\ndef make():\n    return tf.Variable(0.0)\n"
        "@tf.function\ndef f(x):\n    return make() + x\n",
        # An optimizer (or a Keras backend variable) created inside the function.
        "import tensorflow as tf\n@tf.function\ndef train_one_step(model, x):\n"
        "    optim = tf.keras.optimizers.Adam(0.001)\n    with tf.GradientTape() as tape:\n"
        "        loss = model(x)\n    grads = tape.gradient(loss, model.trainable_variables)\n"
        "    optim.apply_gradients(zip(grads, model.trainable_variables))\n",
        "import tensorflow as tf\ny_N = tf.Variable([1., 2., 3.])\n@tf.function\ndef run(loss):\n"
        "    tf.keras.optimizers.Adam(0.5).minimize(loss, var_list=[y_N])\n",
        "from tensorflow.keras import backend as K\nimport tensorflow as tf\n@tf.function\n"
        "def weighted_log_loss(y_true, y_pred):\n    weights = K.variable([1.0, 2.0])\n"
        "    return y_pred * weights\n",
        # tensorflow/tensorflow#33689, the reporter's `bar` under tf.function: a test of an argument is no
        # first-call guard; `bar(1)` then `bar()` creates the variable on the second trace and raises.
        "import tensorflow as tf\n@tf.function\ndef bar(value=None):\n    if value is not None:\n"
        "        result = tf.constant(value)\n    else:\n        result = tf.Variable(1)\n    return result\n",
        # A check of a setting: another instance (or a changed flag) traces again and creates the variable.
        "import tensorflow as tf\nclass Scale(tf.Module):\n    def __init__(self, use_bias):\n"
        "        self.use_bias = use_bias\n    @tf.function\n    def __call__(self, x):\n"
        "        if self.use_bias:\n            self.b = tf.Variable(0.0)\n            x = x + self.b\n"
        "        return x\n",
        # google/automl 6a54c87 efficientdet/tf2/train_lib.py:516-530 (cut down): a loss that Keras's train_step
        # reaches creates a variable under a check of the config, on every trace. (There the model's Keras base
        # class is defined in another file, efficientdet_keras.py, which graph-code discovery does not follow.)
        _T + "class EfficientDetNetTrain(tf.keras.Model):\n    def _detection_loss(self, labels):\n"
        "        num_positives_sum = tf.reduce_sum(labels['mean_num_positives']) + 1.0\n"
        "        positives_momentum = self.config.positives_momentum or 0\n        if positives_momentum > 0:\n"
        "            moving_normalizer_var = tf.Variable(0.0, name='moving_normalizer', trainable=False)\n"
        "            num_positives_sum = tf.keras.backend.moving_average_update(\n"
        "                moving_normalizer_var, num_positives_sum, momentum=self.config.positives_momentum)\n"
        "        return num_positives_sum\n    def train_step(self, data):\n        images, labels = data\n"
        "        with tf.GradientTape() as tape:\n            loss = self._detection_loss(labels)\n"
        "        return {'loss': loss}\n",
        # calmiLovesAI/Basic_CNNs_TensorFlow2#13 (models/densenet.py, cut down): a layer of the file made in
        # a helper of `call`; and a library layer with weights made in a helper (the issue-37 shape).
        _T + "class BottleNeck(tf.keras.layers.Layer):\n    def __init__(self, growth_rate):\n        super().__init__()\n"
        "        self.conv = tf.keras.layers.Conv2D(growth_rate, 3, padding='same')\n    def call(self, x):\n"
        "        return self.conv(x)\nclass DenseBlock(tf.keras.layers.Layer):\n    def _make_layer(self, x):\n"
        "        return BottleNeck(32)(x)\n    def call(self, inputs):\n        return self._make_layer(inputs)\n",
        _T + "def conv_block(x, filters):\n    x = tf.keras.layers.Conv2D(filters, 3, padding='same')(x)\n"
        "    return tf.keras.layers.BatchNormalization()(x)\nclass Net(tf.keras.Model):\n    def call(self, x):\n"
        "        return conv_block(x, 16)\n",
        # keras-team/keras-cv keras_cv/src/layers/transformer_encoder.py:112 (cut down): a Keras 3 Dropout
        # keeps its seed in a variable, made anew on every trace.
        _T + "class TransformerEncoder(tf.keras.layers.Layer):\n    def call(self, inputs):\n"
        "        x = self.attention(inputs, inputs)\n        x = tf.keras.layers.Dropout(0.1)(x)\n        return x\n",
        # docs/coverage.md B5 (checked in TensorFlow 2.21: "You cannot add new elements of state ... already built"
        # when called eagerly, and when the functional model is built).
        _T + "import keras\nclass Scale(keras.layers.Layer):\n    def call(self, x):\n"
        "        w = self.add_weight(shape=(3,), initializer='ones')\n        return x * w\n",
    )
    must_not_flag = (
        # A demonstration: the function is only called where the error is expected (tensorflow/docs 7c36502
        # site/en/guide/function.ipynb, cell 121).
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    v = tf.Variable(1.0)\n    return v\n"
        "with assert_raises(ValueError):\n    f(1.0)\n",
        # A None guard on an item, set in the branch (dm-sonnet 2.0.2 src/distribute/replicator_test.py:180).
        "import tensorflow as tf\ndef test():\n    variables = [None, None]\n    def f():\n"
        "        if variables[0] is None:\n            v1 = tf.Variable(tf.ones([]))\n"
        "            variables[0] = v1\n    tf.function(f)()\n",
        # Reference: the None guard.
        "import tensorflow as tf\nclass Count(tf.Module):\n  def __init__(self):\n    self.count = None\n\n"
        "  @tf.function\n  def __call__(self):\n    if self.count is None:\n      self.count = tf.Variable(0)\n"
        "    return self.count.assign_add(1)\n",
        # Variables outside graph code, and under tf.init_scope.
        "import tensorflow as tf\nv = tf.Variable(1.0)\n@tf.function\ndef f(x):\n    return v.assign_add(x)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    with tf.init_scope():\n        v = tf.Variable(1.0)\n"
        "    return x\n",
        # A cache lookup guard, and a helper only called behind a guard.
        "import tensorflow as tf\nclass C:\n    def __init__(self):\n        self.v = None\n"
        "    def make(self):\n        return tf.Variable(0.0)\n    @tf.function\n    def f(self, x):\n"
        "        if self.v is None:\n            self.v = self.make()\n        return self.v + x\n",
        "import tensorflow as tf\nclass C:\n    @tf.function\n    def f(self, x):\n"
        "        self.v = self.v if self.v is not None else tf.Variable(x)\n        return self.v\n",
        # A learning-rate schedule is not an optimizer; an optimizer made once, behind a guard.
        "import tensorflow as tf\n@tf.function\ndef f(step):\n"
        "    return tf.keras.optimizers.schedules.ExponentialDecay(0.1, 100, 0.9)(step)\n",
        "import tensorflow as tf\nclass T:\n    opt = None\n    @tf.function\n    def step(self, grads, vs):\n"
        "        if self.opt is None:\n            self.opt = tf.keras.optimizers.SGD()\n"
        "        self.opt.apply_gradients(zip(grads, vs))\n",
        # tensorflow/tensorflow#33689 (the version that works): a global created once behind `is None`.
        "import tensorflow as tf\nfoo = None\n@tf.function\ndef bar(value=None):\n    global foo\n"
        "    if foo is None:\n        foo = tf.Variable(1)\n    return foo\n",
        # Not-yet-built flags, set by the method the guard calls.
        "import tensorflow as tf\nclass L(tf.Module):\n    def __init__(self):\n        self.built = False\n"
        "    def build(self):\n        self.w = tf.Variable(1.0)\n        self.built = True\n    @tf.function\n"
        "    def __call__(self, x):\n        if not self.built:\n            self.build()\n        return x * self.w\n",
        "import tensorflow as tf\nclass L(tf.Module):\n    @tf.function\n    def __call__(self, x):\n"
        "        if not hasattr(self, 'w'):\n            self.w = tf.Variable(1.0)\n        return x * self.w\n",
        # Layers without weights, and functional helpers, made in `call` (ageron/handson-ml2
        # 10_neural_nets_with_keras.ipynb cell 94; calmisential/TensorFlow2.0_ResNet
        # models/residual_block.py:36; SeldonIO/alibi-detect cd_text_amazon.ipynb cell 21), and a layer
        # made once behind a guard.
        _T + "class WideAndDeep(tf.keras.Model):\n    def call(self, inputs):\n        a, b = inputs\n"
        "        x = tf.keras.layers.concatenate([a, b])\n        x = tf.keras.layers.add([x, x])\n"
        "        return tf.keras.layers.MaxPool1D(2)(tf.keras.layers.Flatten()(x))\n",
        _T + "class Head(tf.keras.layers.Layer):\n    def __init__(self):\n        super().__init__()\n"
        "        self.dense = None\n    def call(self, x):\n        if self.dense is None:\n"
        "            self.dense = tf.keras.layers.Dense(3)\n        return self.dense(x)\n",
        # A Dropout built in `call` in code written for Keras 2, where it keeps no variable (google/automl
        # efficientnetv2/effnetv2_model.py:298, which uses `optimizers.legacy`).
        _T + "opt = tf.keras.optimizers.legacy.Adam()\nclass Block(tf.keras.layers.Layer):\n    def call(self, x):\n"
        "        return tf.keras.layers.Dropout(0.2)(x)\n",
        # A layer of the file with no weights (an activation) made per call.
        # The weight added in `build` (checked: the functional model builds and runs).
        _T + "import keras\nclass Scale(keras.layers.Layer):\n    def build(self, input_shape):\n"
        "        self.w = self.add_weight(shape=(input_shape[-1],), initializer='ones')\n"
        "    def call(self, x):\n        return x * self.w\n",
        _T + "class Mish(tf.keras.layers.Layer):\n    def call(self, x):\n        return x * tf.tanh(tf.nn.softplus(x))\n"
        "class Block(tf.keras.layers.Layer):\n    def call(self, x):\n        return Mish()(x)\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for call, function in facts.graph_calls(*VARIABLE_CONSTRUCTORS):
            if not _guarded_path(facts, call, function, 0):
                yield self.finding(
                    facts, call, "tf.Variable created in graph code on every trace raises on the second trace; "
                    "create it outside the function, or once behind `if self.v is None:`", function=function)
        for call, function in facts.graph_nodes(ast.Call):
            assert isinstance(call, ast.Call)
            if _creates_optimizer(facts, call) and not _guarded_path(facts, call, function, 0):
                yield self.finding(
                    facts, call, "optimizer created in graph code makes its variables (iterations, slots) on "
                    "first use in every trace, which raises; create it once outside the function",
                    function=function)
            elif _adds_keras_weight(facts, call) and not _guarded_path(facts, call, function, 0):
                yield self.finding(
                    facts, call, "`self.add_weight(...)` in graph code adds a weight after the layer is built: Keras "
                    "raises `You cannot add new elements of state ... to a layer that is already built`; create "
                    "the weight in `build` (or `__init__`)", function=function)
            elif _creates_weighted_layer(facts, call) and not _guarded_path(facts, call, function, 0):
                yield self.finding(
                    facts, call, f"Keras layer `{facts.text(call.func)}` created in graph code makes new weights "
                    "on every trace: a tf.function raises on its second trace, and under `fit` they are never "
                    "trained; create the layer once in `__init__` and call it here", function=function)


def _creates_weighted_layer(facts: FileFacts, call: ast.Call) -> bool:
    """A Keras layer or model with weights constructed here: a library layer not known to be weightless,
    or a Keras class of this file whose code or library base makes weights (calmiLovesAI/Basic_CNNs_TensorFlow2#13:
    a `BottleNeck` made in a `DenseBlock`'s call)."""
    if not ({kinds.LAYER, kinds.MODEL} & facts.kinds(call)):
        return False
    cls = facts.called_class(call)
    if cls is None:
        return _weighted_library_layer(facts, facts.resolve(call.func))
    chain = list(facts.class_chain(cls))
    return any(_weighted_library_layer(facts, facts.resolve(base)) for c in chain for base in c.node.bases) or any(
        isinstance(node, ast.Call) and _makes_weights(facts, node) for c in chain for node in ast.walk(c.node))


def _adds_keras_weight(facts: FileFacts, call: ast.Call) -> bool:
    """`self.add_weight(...)` in a method of a Keras layer or model of the file, in Keras 3 code (where a
    built layer refuses new state; Keras 2 code was not checked)."""
    func = call.func
    if facts.keras_2 or not (isinstance(func, ast.Attribute) and func.attr == "add_weight" and isinstance(func.value, ast.Name)):
        return False
    function = facts.function_of(call)
    if function is None or function.cls is None or not function.params or func.value.id != function.params[0] \
            or not facts.is_parameter(func.value, function):
        return False
    return facts.class_kind(function.cls) in (kinds.LAYER, kinds.MODEL)


def _weighted_library_layer(facts: FileFacts, name: str | None) -> bool:
    """A Keras library layer with state: not a weightless one, nor a random one in Keras 2 code, nor the
    bare `Layer`/`Wrapper` bases."""
    last = (name or "").rsplit(".", 1)[-1]
    weightless = _WEIGHTLESS_LAYERS | (_RANDOM_LAYERS if facts.keras_2 else frozenset())
    return ".layers." in (name or "") and last[:1].isupper() and last not in weightless \
        and last not in ("Layer", "Wrapper")


def _makes_weights(facts: FileFacts, call: ast.Call) -> bool:
    """A call inside a layer class that gives it weights: a variable, `add_weight`, a library layer with weights."""
    name = facts.resolve(call.func)
    if name in VARIABLE_CONSTRUCTORS or (isinstance(call.func, ast.Attribute) and call.func.attr == "add_weight"):
        return True
    return facts.called_class(call) is None and _weighted_library_layer(facts, name)


def _creates_optimizer(facts: FileFacts, call: ast.Call) -> bool:
    name = facts.resolve(call.func) or ""
    return name.startswith(_OPTIMIZER_PREFIXES) and ".schedules." not in name \
        and name.rsplit(".", 1)[-1][:1].isupper()


def _guarded_path(facts: FileFacts, node: ast.AST, function: FunctionInfo, depth: int) -> bool:
    """Whether `node` runs only behind a guard, in its function or at every graph call site of it."""
    if _guarded_in(facts, node, function):
        return True
    if not facts.graph_functions.get(function, "").startswith("called from ") or depth >= _MAX_CALL_DEPTH:
        return False
    callers = [(call, caller) for call, caller in facts.callers(function)
               if caller is not None and facts.in_graph_code(call)]
    # Called from graph code in another file (or in a way not resolved here): the guard is not visible.
    return not callers or all(_guarded_path(facts, call, caller, depth + 1) for call, caller in callers)


def _guarded_in(facts: FileFacts, node: ast.AST, function: FunctionInfo) -> bool:
    """Behind a first-call guard of `function` (tfcheck.engine.guards): not any `if`, since a test of a
    setting or an argument lets a later trace with another value create the variable anew."""
    guard = facts.first_call_guard(node)
    return guard is not None and facts.function_of(guard) is function
