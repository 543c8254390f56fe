"""TFC002: graph code mutates Python state that outlives the call."""

from __future__ import annotations

from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.facts import OuterMutation
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_T = "import tensorflow as tf\n"
# retinanet-tensorflow2.x 0df3de0 retinanet/model/backbone/efficientnet.py:783-854 (TensorFlow's reference
# EfficientNet): `call` empties `self.endpoints`, fills it and returns what it stored, every trace.
_ENDPOINTS = ("class Backbone(tf.keras.Model):\n    def call(self, inputs):\n        self.endpoints = {}\n"
              "        outputs = self._stem(inputs)\n        self.endpoints['stem'] = outputs\n"
              "        for idx, block in enumerate(self._blocks):\n            outputs = block(outputs)\n"
              "            self.endpoints['block_%s' % idx] = outputs\n")
# tf-models-official 2.20.0 official/nlp/modeling/layers/transformer_scaffold_test.py:51-68, cut down:
# a test layer records its calls in a list the constructor gets.
_RECORDER = ("class Recorder(tf.keras.layers.Layer):\n    def __init__(self, call_list, activation, **kwargs):\n"
             "        super().__init__(**kwargs)\n        self.list = call_list\n        self.activation = activation\n"
             "    def call(self, inputs):\n        self.list.append(True)\n        return inputs\n")


class OuterMutationRule(Rule):
    """Graph code changes Python state that outlives the call: it changes only while tracing.

    ## What it does
    Finds, in graph code, writes to Python state that lives longer than one call: rebinding a
    `global` or `nonlocal` name, assigning (or augmented-assigning) an attribute of `self`, of an
    outer object or of a plain object every call in the file passes as an argument, calling a mutating method (`append`, `update`, `add`, `pop`, ...) of an outer
    list, dict or set, and assigning or deleting items of one. `tf.Variable` methods, Keras metrics
    and optimizers, local containers, the lazy-creation pattern `if self.v is None: self.v = ...`
    (or `global v; if v is None: v = ...`, `if not box[0]: box[0] = ...`)
    and code under `with tf.init_scope():` are not flagged, nor is set-up work (`__init__`, `build`,
    also a `build` that `call` runs again for a new shape). A list, dict or set is known from the
    file: a display, or a constructor parameter that every instantiation the file shows passes one
    (`Recorder(call_list=[])`, a `get_config` entry, a default). An attribute of `self` that the
    function empties at its top (`self.endpoints = {}`) and reads back after filling it is a
    scratch pad each trace fills and uses itself: not flagged. Storing a tensor is reported as
    TFC009 tensor-leak instead.

    ## Why is this bad
    Python code in a `tf.function` runs once per trace, not once per call. The counter is
    incremented, the list appended to, the flag set only when the function is traced; later calls
    run the graph and skip them, so the state silently stops matching the number of calls (or
    changes again on a retrace). Severity is warning, not error: the graph itself computes what it
    should, and the pattern is sometimes used on purpose (trace counters, caches).

    ## Example
    ```python
    external_list = []

    @tf.function
    def side_effect(x):
        external_list.append(x)
    ```

    ## Use instead
    ```python
    @tf.function
    def f(x):
        accumulated = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        accumulated = accumulated.write(0, x)
        return accumulated.stack()
    ```
    Return values, keep state in `tf.Variable`s (`v.assign_add(1)`), or lift deliberate one-time
    Python work out of the graph with `with tf.init_scope():`.
    """

    code = "TFC002"
    name = "outer-mutation"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        # A counter written in a method only a subclass defines, run by the base class's `call`
        # (issue 37's shape 6: 1 after 3 calls under fit, checked in TensorFlow 2.21).
        _T + "class Base(tf.keras.layers.Layer):\n    def call(self, x):\n        return self.forward(x)\n"
        "class Child(Base):\n    def __init__(self):\n        super().__init__()\n        self.calls = 0\n"
        "    def forward(self, x):\n        self.calls += 1\n        return x * 2\n",
        _T + "external_list = []\n@tf.function\ndef side_effect(x):\n    print('Python side effect')\n"
        "    external_list.append(x)\n",
        _T + "counter = 0\n@tf.function\ndef f(x):\n    global counter\n    counter += 1\n    return x\n",
        _T + "class Model(tf.Module):\n    def __init__(self):\n        self.v = tf.Variable(0)\n"
        "        self.counter = 0\n    @tf.function\n    def __call__(self):\n        if self.counter == 0:\n"
        "            self.counter += 1\n            self.v.assign_add(1)\n        return self.v\n",
        _T + "cache = {}\n@tf.function\ndef f(x, key):\n    cache[key] = 1\n    return x\n",
        _T + "def make():\n    calls = 0\n    @tf.function\n    def f(x):\n        nonlocal calls\n"
        "        calls = calls + 1\n        return x\n    return f\n",
        _T + "class Trainer:\n    def __init__(self):\n        self.history = []\n        self.steps = 0\n"
        "    @tf.function\n    def step(self, x):\n        self.history.append('step')\n"
        "        self.steps = self.steps + 1\n        return x\n",
        _T + "class Box:\n    pass\nbox = Box()\n@tf.function\ndef f(x):\n    box.flag = True\n    return x\n",
        _T + "seen = set()\ndef helper(x):\n    seen.add('x')\n    return x\n@tf.function\ndef f(x):\n"
        "    return helper(x)\n",
        _T + "import keras\ndef test_retracing():\n    tracing_count = [0]\n"
        "    class TracingCounterModel(keras.Model):\n        def train_step(self, *args):\n"
        "            tracing_count[0] = tracing_count[0] + 1\n            return super().train_step(*args)\n",
        _T + "registry = {}\n@tf.function\ndef f(x):\n    del registry['a']\n    return x\n",
        # tensorflow/tensorflow#31362: an attribute of a plain object passed in as an argument.
        _T + "class MyObj:\n    def __init__(self):\n        self.value = 0\nobj = MyObj()\n@tf.function\n"
        "def with_py_side_effect(tensorflow_stuff, o):\n    o.value += 1\n    return tensorflow_stuff\n"
        "for i in range(5):\n    a = with_py_side_effect(None, obj)\n",
        # A list the constructor gets, known from the file's instantiation through a dict display and the
        # layer's get_config (tf-models-official 2.20.0 official/vision/modeling/layers/nn_blocks_test.py:540).
        _T + _RECORDER + "    def get_config(self):\n        config = super().get_config()\n"
        "        config['call_list'] = []\n        return config\ndef test():\n    feedforward_call_list = []\n"
        "    cfg = {'activation': 'relu', 'call_list': feedforward_call_list}\n    layer = Recorder(**cfg)\n",
        # A closure made by each trace, over the trace's tensors, kept on the layer (tensorflow-addons 0.23.0
        # seq2seq/attention_wrapper.py:296-307).
        _T + "class Mechanism(tf.keras.layers.Layer):\n    def call(self, memory, mask):\n"
        "        def _mask_probability_fn(score):\n            return tf.where(mask, score, score.dtype.min)\n"
        "        self.probability_fn = _mask_probability_fn\n        return memory\n",
        _T + _RECORDER + "layer = Recorder([], 'relu')\n",
        _T + _RECORDER + "layer = Recorder(call_list=[], activation='relu')\n",
        # Scratch read outside graph code, after the trace (tensorflow/tpu's EfficientNet blocks, cut down).
        _T + "class Block(tf.keras.layers.Layer):\n    def call(self, inputs):\n"
        "        self.endpoints = {'expansion_output': inputs}\n        return inputs\n"
        "def features(block, x):\n    block(x)\n    return block.endpoints\n",
        # Emptied at the top of the call but never read back in it: kept for someone else.
        _T + _ENDPOINTS.replace("self.endpoints = {}", "self.endpoints = dict()") + "        return outputs\n",
        _T + _RECORDER.replace("call_list, activation", "activation, call_list=[]") + "layer = Recorder('relu')\n",
    )
    must_not_flag = (
        # Set up once behind a test of emptiness (NVIDIA/DeepLearningExamples 729963d
        # TensorFlow2/LanguageModeling/BERT/optimization.py:246, cut down).
        _T + "class Accumulator:\n    def __init__(self):\n        self._gradients = []\n    @tf.function\n"
        "    def __call__(self, gradients):\n        if not self._gradients:\n"
        "            self._gradients.extend([tf.Variable(tf.zeros_like(g)) for g in gradients])\n"
        "        return self._gradients\n",
        # A flag the first run clears (google-research/deeplab2 64bc1c1 model/layers/axial_block_groups.py:455-462).
        _T + "class Group(tf.keras.layers.Layer):\n    def __init__(self):\n        super().__init__()\n"
        "        self._first_building_call = True\n    def call(self, x):\n        if self._first_building_call:\n"
        "            self._blocks = [tf.keras.layers.Dense(2)]\n            self._first_building_call = False\n"
        "        return self._blocks[0](x)\n",
        # A weight drawn anew by each call, of the shape of the last one (google/edward2 ee02560
        # edward2/tensorflow/layers/dense.py:70-80, cut down).
        _T + "class DenseReparameterization(tf.keras.layers.Dense):\n    def call_weights(self):\n"
        "        self.bias = self.bias_initializer(self.bias.shape, self.dtype)\n    def call(self, inputs):\n"
        "        self.call_weights()\n        return inputs + self.bias\n",
        # Lazy creation in a container item (dm-sonnet 2.0.2 src/conformance/optimizer_test.py:46).
        _T + "def test(module_fn, x):\n    mod = [None]\n    @tf.function(autograph=False)\n    def f():\n"
        "        if not mod[0]:\n            mod[0] = module_fn()\n        return mod[0](x)\n    f()\n",
        _T + "@tf.function\ndef f(x):\n    acc = []\n    acc.append(x)\n    return tf.stack(acc)\n",
        _T + "v = tf.Variable(0)\n@tf.function\ndef f(x):\n    v.assign_add(1)\n    return x\n",
        _T + "class Count(tf.Module):\n    def __init__(self):\n        self.count = None\n    @tf.function\n"
        "    def __call__(self):\n        if self.count is None:\n            self.count = tf.Variable(0)\n"
        "        return self.count.assign_add(1)\n",
        _T + "class Model(tf.Module):\n    def __init__(self):\n        self.v = tf.Variable(0)\n"
        "        self.counter = 0\n    @tf.function\n    def __call__(self):\n        if self.counter == 0:\n"
        "            with tf.init_scope():\n                self.counter += 1\n                self.v.assign_add(1)\n"
        "        return self.v\n",
        _T + "external_list = []\ndef f(x):\n    external_list.append(x)\n",
        _T + "class M(tf.keras.Model):\n    def __init__(self):\n        super().__init__()\n"
        "        self.tracker = tf.keras.metrics.Mean()\n        self.opt = tf.keras.optimizers.Adam()\n"
        "    def train_step(self, data):\n        self.tracker.update_state(data)\n"
        "        self.opt.apply_gradients([])\n        return {}\n",
        _T + "names = ['a']\n@tf.function\ndef f(x):\n    out = dict()\n    out['y'] = x\n    names.index('a')\n"
        "    return out\n",
        _T + "x = None\n@tf.function\ndef leaky_function(a):\n    global x\n    x = a + 1\n    return a + 2\n",
        _T + "@tf.function\ndef f(x):\n    state = {'n': 0}\n    def body(i):\n        state['n'] += 1\n"
        "        return i + 1\n    return tf.while_loop(lambda i: i < 3, body, [x])\n",
        _T + "class C:\n    def __init__(self):\n        self._cache = None\n    @tf.function\n    def f(self, x):\n"
        "        if self._cache is None:\n            self._cache = {}\n        return x\n",
        _T + "def convert(x):\n    stacked = [None]\n    def body(i):\n        stacked[0] = True\n        return i + 1\n"
        "    out = tf.while_loop(lambda i: i < 3, body, [x])\n    return out, stacked[0]\n",
        _T + "class L(tf.Module):\n    @tf.function\n    def adapt(self, data):\n"
        "        shape = getattr(self, '_batch_input_shape', None)\n        if shape is None:\n"
        "            self._batch_input_shape = (None,)\n        return data\n",
        _T + "def static_shapes(fn, *args):\n    result_shapes_container = [None]\n    @tf.function\n"
        "    def shape_reporting_wrapper(*args):\n        result = fn(*args)\n"
        "        result_shapes_container[0] = tf.nest.map_structure(lambda x: x.shape.as_list(), result)\n"
        "        return result\n    shape_reporting_wrapper.get_concrete_function(*args)\n"
        "    return result_shapes_container[0]\n",
        _T + "class Lazy(tf.Module):\n    def __init__(self):\n        self.built = False\n    @tf.function\n"
        "    def __call__(self, x):\n        if not self.built:\n            self.w = make_weights(x)\n"
        "            self.built = True\n        return x * self.w\n",
        _T + "class Box:\n    def __init__(self, v):\n        self.v = v\n        self.items = []\n"
        "class L(tf.Module):\n    def __init__(self):\n        self.n = 0\n    def build(self, shape):\n"
        "        self.k = make_kernel(shape)\n    @tf.function\n    def __call__(self, x):\n"
        "        self.build(x.shape)\n        return Box(x).v * self.k\n",
        _T + "class C(tf.Module):\n    @tf.function\n    def f(self, x):\n        self.layer = tf.keras.layers.Dense(2)\n"
        "        return x\n",
        # tensorflow/tensorflow#33689 (tests/lint/real_world): a global created once, lazily; it works.
        _T + "foo = None\n@tf.function\ndef bar(value=None):\n    if value is not None:\n"
        "        return tf.constant(value)\n    else:\n        global foo\n        if foo is None:\n"
        "            foo = tf.Variable(1)\n        return foo\n",
        # tensorflow/tensorflow#57756: a TensorArray kept on `self` is a leak of the trace, TFC009's to report.
        _T + "class Outer(tf.keras.Model):\n    def __init__(self):\n        super().__init__()\n"
        "        self.mem = None\n    @tf.function\n    def gradient(self, x):\n"
        "        self.mem = tf.TensorArray(tf.float32, size=10)\n        self.mem = self.mem.write(0, x)\n",
        # A function of the module, not a closure of the trace: the same object on every trace.
        _T + "def softmax(score):\n    return tf.nn.softmax(score)\nclass Mechanism(tf.keras.layers.Layer):\n"
        "    def call(self, memory):\n        self.probability_fn = softmax\n        return memory\n",
        # What the file does not pin down stays unknown: instantiations that disagree, or pass it unseen.
        _T + _RECORDER + "a = Recorder([], 'relu')\nb = Recorder(make_recorder(), 'relu')\n",
        _T + _RECORDER + "def make(*args):\n    return Recorder(*args)\n",
        _T + _RECORDER.replace("call_list, activation", "activation, call_list=[]")
        + "layer = Recorder('relu', call_list=make_recorder())\n",
        # A `build` that `call` re-runs for a new static shape stores plain values on purpose (sionna 0.19.2
        # fec/turbo/decoding.py; the tensors such a rebuild stores are TFC009's).
        _T + "class Decoder(tf.keras.layers.Layer):\n    def build(self, input_shape):\n"
        "        self._num_bits = input_shape[-1]\n        self._built_for = tuple(input_shape)\n"
        "    def call(self, x):\n        if x.shape[-1] != self._num_bits:\n            self.build(x.shape)\n"
        "        return x\n",
        # Scratch that each block starts afresh and the model reads in the same trace (tensorflow/tpu 6ee6b42
        # models/official/efficientnet/efficientnet_model.py, cut down).
        _T + "class Block(tf.keras.layers.Layer):\n    def call(self, inputs):\n"
        "        self.endpoints = {'expansion_output': inputs}\n        return inputs\n"
        "class Net(tf.keras.Model):\n    def call(self, inputs):\n        block = self._block\n"
        "        outputs = block(inputs)\n        return outputs, block.endpoints\n",
        # A scratch pad each trace empties, fills and reads back itself (`tfcheck.engine.lifetime`).
        _T + _ENDPOINTS + "        return [outputs, self.endpoints.get('stem')]\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for mutation in facts.outer_mutations:
            if mutation.rebuilt:
                continue  # set-up work a trace redoes on purpose (a `build` for a new shape): TFC009's if a tensor
            if not facts.may_hold_tensor(mutation.value, mutation.function):
                yield self.finding(facts, mutation.node, _message(mutation), function=mutation.function)


def _message(mutation: OuterMutation) -> str:
    what = {
        "rebind": f"rebinds {mutation.owner} `{mutation.target}`",
        "attribute": f"assigns `{mutation.target}`",
        "subscript": f"changes an item of the {mutation.owner_phrase}container `{mutation.target}`",
        "method": f"mutates the {mutation.owner_phrase}container `{mutation.target}`",
    }.get(mutation.how, f"deletes from `{mutation.target}`")
    return (f"graph code {what}: this runs only while tracing, not on every call; return the value, keep state "
            "in a tf.Variable, or move one-time work under `with tf.init_scope():`")
