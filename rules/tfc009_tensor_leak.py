"""TFC009: a tensor created in graph code is stored where it outlives the call."""

from __future__ import annotations

from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.facts import OuterMutation
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_T = "import tensorflow as tf\n"
# sionna 0.19.2 fec/interleaving.py:153-194 (RowColumnInterleaver), cut down.
_INTERLEAVER = ("class Interleaver(tf.keras.layers.Layer):\n    def __init__(self):\n        super().__init__()\n"
                "        self._perm_seq = None\n    def _generate_perm_rc(self, n_seq):\n"
                "        ind = tf.range(n_seq, dtype=tf.int32)\n        perm_seq = tf.boolean_mask(ind, ind < n_seq)\n"
                "        perm_seq_inv = tf.argsort(perm_seq)\n        return perm_seq, perm_seq_inv\n"
                "    def build(self, input_shape):\n        p, pi = self._generate_perm_rc(input_shape[-1])\n"
                "        self._perm_seq = p\n        self._perm_seq_inv = pi\n")
# A helper that caches a tensor's shape between two of its methods (the batch-squash helper of issue 36's
# judged corpus, rewritten): built where it is used, per call, or kept at module level.
_SQUASH = ("class Squash:\n    def __init__(self, dims):\n        self._dims = dims\n        self._shape = None\n"
           "    def flatten(self, x):\n        self._shape = tf.shape(x)\n        return tf.reshape(x, [-1, 4])\n"
           "    def unflatten(self, y):\n        return tf.reshape(y, self._shape)\n")
# tensorflow/tpu 6ee6b42 models/official/efficientnet/efficientnet_model.py:430-470 and 700-760, cut down: each
# block's `call` starts `self.endpoints` afresh; the model's `call` reads `block.endpoints` in the same trace.
_BLOCK_ENDPOINTS = ("class Block(tf.keras.layers.Layer):\n    def call(self, inputs):\n        x = tf.nn.relu(inputs)\n"
                    "        self.endpoints = {'expansion_output': x}\n        return x\n"
                    "class Net(tf.keras.Model):\n    def __init__(self):\n        super().__init__()\n"
                    "        self._blocks = [Block(), Block()]\n    def call(self, inputs):\n        self.endpoints = {}\n"
                    "        outputs = inputs\n        for idx, block in enumerate(self._blocks):\n"
                    "            outputs = block(outputs)\n            for k, v in block.endpoints.items():\n"
                    "                self.endpoints['block_%s/%s' % (idx, k)] = v\n        return outputs\n")


class TensorLeak(Rule):
    """A tensor computed in graph code is kept in a global, an outer container or an object attribute.

    ## What it does
    Finds tensors created in graph code (results of TensorFlow operations, arithmetic on the
    function's inputs, outputs of layers and models) that are stored where they outlive the call:
    a `global` or `nonlocal` name, an outer list, dict or set (`append`, item assignment), or an
    attribute of `self` or of an outer object. A `tf.TensorArray` counts as a tensor here: it holds
    the trace's tensors, and so does what a function of the file returns when its `return`s are
    tensors (tuple elements followed through `a, b = self._helper(x)`). A `build` that graph code
    runs again (`if x.shape[-1] != self._n: self.build(x.shape)`) stores in that trace. A
    dict or list on `self` that the function empties at its top and reads back after filling it
    (TensorFlow's reference EfficientNet's `self.endpoints`) is that trace's scratch pad: not flagged.

    ## Why is this bad
    A tensor made while tracing is a symbolic tensor of that trace's graph. Outside the function it
    has no value (`.numpy()` fails) and using it from another function raises
    `TypeError: ... is out of scope and cannot be used here`. The store itself also runs only while
    tracing, so the leaked tensor is never updated by later calls. Severity is error: the leaked
    value raises as soon as it is used.

    ## Example
    ```python
    x = None

    @tf.function
    def leaky_function(a):
        global x
        x = a + 1  # leaks a tensor of the trace
        return a + 2
    ```

    ## Use instead
    ```python
    @tf.function
    def function(a):
        x = a + 1
        return a + 2, x  # return every output
    ```
    Return every value the caller needs; keep state that must persist in a `tf.Variable` and
    `assign` to it.
    """

    code = "TFC009"
    name = "tensor-leak"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # A tensor stored on an object `self` holds (issue 37's shape 3: in Keras 3 a Dense's `kernel`
        # has no setter; a plain attribute keeps the trace's tensor, out of scope when read later).
        _T + "class Scaled(tf.keras.layers.Layer):\n    def __init__(self, inner):\n        super().__init__()\n"
        "        self.inner = inner\n    def call(self, x):\n        self.inner.scale = tf.reduce_mean(x)\n"
        "        return self.inner(x)\n",
        _T + "x = None\n@tf.function\ndef leaky_function(a):\n    global x\n    x = a + 1\n    return a + 2\n",
        _T + "@tf.function\ndef leaky_function(a):\n    global x\n    x = a + 1\n    return x\n",
        _T + "class MyClass:\n    def __init__(self):\n        self.field = None\nexternal_list = []\n"
        "external_object = MyClass()\n@tf.function\ndef leaky_function():\n    a = tf.constant(1)\n"
        "    external_list.append(a)\n    external_object.field = a\n",
        _T + "class M(tf.Module):\n    def __init__(self):\n        self.dense = tf.keras.layers.Dense(2)\n"
        "        self.last = None\n    @tf.function\n    def __call__(self, x):\n        y = self.dense(x)\n"
        "        self.last = y\n        return y\n",
        _T + "outputs = {}\n@tf.function\ndef f(x):\n    outputs['y'] = tf.reduce_sum(x)\n    return x\n",
        _T + "def make():\n    last = None\n    @tf.function\n    def f(x):\n        nonlocal last\n"
        "        last = tf.square(x)\n        return x\n    return f\n",
        _T + "class Normalizer:\n    def __init__(self):\n        self._n = tf.Variable(0.0)\n"
        "        self._var = tf.Variable(0.0)\n    @tf.function\n    def observe(self, x):\n"
        "        self._n.assign_add(1)\n        self._var = tf.clip_by_value(x / self._n, 1e-2, 1e+2)\n",
        # tensorflow/tensorflow#57756: TensorArrays of the trace kept on `self` (not TFC002: a leak).
        _T + "class Outer(tf.keras.Model):\n    def __init__(self, model):\n        super().__init__()\n"
        "        self.model = model\n        self.mem = None\n    @tf.function\n    def gradient(self, x):\n"
        "        self.mem = tf.TensorArray(tf.float32, size=10)\n        for i in tf.range(10):\n"
        "            out_i = self.model.call(x)\n            self.mem = self.mem.write(i, out_i)\n",
        # tensorflow/tensorflow#31363: a method called through a parameter annotated with its class.
        _T + "class First:\n    def __init__(self, initial: int):\n        self.value = tf.constant(initial)\n"
        "    def increment(self):\n        self.value += 1\n@tf.function\ndef increment(obj: First):\n"
        "    obj.increment()\n",
        # sionna 0.19.2 fec/interleaving.py:193-194: `call` re-runs `build` for a new static shape, which
        # stores the tensors a method returns (a tuple, unpacked) on the layer.
        _T + _INTERLEAVER + "    def call(self, inputs):\n        if inputs.shape[-1] != self._perm_seq.shape[0]:\n"
        "            self.build(inputs.shape)\n        return tf.gather(inputs, self._perm_seq, axis=-1)\n",
        # The same helper held at module level outlives every trace.
        _T + _SQUASH + "squash = Squash(2)\n@tf.function\ndef encode(x):\n    return squash.flatten(x)\n"
        "@tf.function\ndef decode(y):\n    return squash.unflatten(y)\n",
        # Emptied at the top of the call, filled with the trace's tensors, never read back in it.
        _T + "class Head(tf.keras.layers.Layer):\n    def call(self, x):\n        self.endpoints = {}\n"
        "        self.endpoints['pooled'] = tf.reduce_mean(x, [1, 2])\n        return x\n",
    )
    must_not_flag = (
        _T + "@tf.function\ndef f(a):\n    x = a + 1\n    return a + 2, x\n",
        _T + "external_list = []\n@tf.function\ndef side_effect(x):\n    external_list.append(x)\n",
        _T + "v = tf.Variable(0)\n@tf.function\ndef f(x):\n    v.assign(tf.reduce_sum(x))\n    return x\n",
        _T + "class Count(tf.Module):\n    def __init__(self):\n        self.count = None\n    @tf.function\n"
        "    def __call__(self):\n        if self.count is None:\n            self.count = tf.Variable(0)\n"
        "        return self.count.assign_add(1)\n",
        _T + "@tf.function\ndef f(x):\n    parts = []\n    parts.append(tf.square(x))\n    return tf.add_n(parts)\n",
        _T + "class Attention(tf.keras.layers.Layer):\n    def _build_from_signature(self, query):\n"
        "        self._built_from_signature = True\n        self._query_shape = tf.TensorShape(query.shape)\n"
        "    @tf.function\n    def __call__(self, query):\n        if not self._built_from_signature:\n"
        "            self._build_from_signature(query)\n        return query\n",
        _T + "results = []\ndef f(x):\n    results.append(tf.square(x))\n",
        _T + "class M(tf.Module):\n    @tf.function\n    def __call__(self, x):\n        self.calls = 1 + 2\n"
        "        return x\n",
        _T + "class M(tf.Module):\n    def __init__(self):\n        self.cache = None\n    @tf.function\n"
        "    def __call__(self, x):\n        with tf.init_scope():\n            self.cache = tf.constant(1.0)\n"
        "        return x\n",
        # The same `build` run once, behind a first-call guard (and by Keras, outside the trace).
        _T + _INTERLEAVER + "    def call(self, inputs):\n        if self._perm_seq is None:\n"
        "            self.build(inputs.shape)\n        return tf.gather(inputs, self._perm_seq, axis=-1)\n",
        # A method whose returns the file cannot tell (a cycle between two helpers) stays unknown.
        _T + "class L(tf.keras.layers.Layer):\n    def _a(self, n):\n        return self._b(n)\n"
        "    def _b(self, n):\n        if n:\n            return self._a(n - 1)\n        return n, n\n"
        "    def call(self, x):\n        p, q = self._b(3)\n        self.p = p\n        return x\n",
        # An object made per call, in a local: its state lives as long as the trace.
        _T + _SQUASH + "@tf.function\ndef apply(x):\n    squash = Squash(2)\n    return squash.unflatten(squash.flatten(x))\n",
        # A scratch pad each block starts afresh and the model reads in the same trace.
        _T + _BLOCK_ENDPOINTS,
        # google/automl 6a54c87 efficientdet/backbone/efficientnet_model.py:360-400, 530-600 and 766-778, cut
        # down: the block stores it in a closure of `call`; the head stores items into the dict of `__init__`.
        _T + "class Block(tf.keras.layers.Layer):\n    def call(self, inputs):\n        def _call(x):\n"
        "            self.endpoints = {'expansion_output': x}\n            return x\n        return _call(inputs)\n"
        "class Head(tf.keras.layers.Layer):\n    def __init__(self):\n        super().__init__()\n"
        "        self.endpoints = {}\n    def call(self, x):\n        self.endpoints['head'] = tf.reduce_mean(x)\n"
        "        return x\nclass Net(tf.keras.Model):\n    def call(self, inputs):\n        self.endpoints = {}\n"
        "        x = self._block(inputs)\n        self.endpoints['block'] = self._block.endpoints\n"
        "        x = self._head(x)\n        self.endpoints.update(self._head.endpoints)\n"
        "        return [x, self.endpoints.get('head')]\n",
        # A scratch pad each trace empties, fills and reads back itself (retinanet-tensorflow2.x 0df3de0
        # retinanet/model/backbone/efficientnet.py:783-854, TensorFlow's reference EfficientNet).
        _T + "class Backbone(tf.keras.Model):\n    def call(self, x):\n        self.endpoints = {}\n"
        "        self.endpoints['pooled'] = tf.reduce_mean(x, [1, 2])\n"
        "        return [x, self.endpoints.get('pooled')]\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for mutation in facts.outer_mutations:
            if facts.may_hold_tensor(mutation.value, mutation.function):
                yield self.finding(facts, mutation.node, _message(mutation), function=mutation.function)


def _message(mutation: OuterMutation) -> str:
    where = {
        "rebind": f"in the {mutation.owner} name `{mutation.target}`",
        "attribute": f"in `{mutation.target}`",
    }.get(mutation.how, f"in the {mutation.owner_phrase}container `{mutation.target}`")
    return (f"a tensor of the traced graph is stored {where}, where it outlives the call and cannot be used "
            "(out of scope); return it instead, or assign it to a tf.Variable")
