"""TFC016: graph code reads a plain Python attribute that is reassigned elsewhere."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cached_property

from tfcheck.engine import kinds
from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import ClassInfo, FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_T = "import tensorflow as tf\n"
# Methods that set attributes up before any trace (or, for Keras `compile`, drop the traced functions).
# What set-up may have given an attribute for a setter (`self.a = a`) to count as changing a traced
# constant: a number or a bool, perhaps None as well. None alone says nothing about what the setter
# stores (a tensor of the same trace, an object). Containers and objects passed in are another story (identity).
_SCALAR_KINDS = frozenset({kinds.NUMBER, kinds.NONE})


class MutableAttributeRead(Rule):
    """Graph code reads a plain Python attribute that is reassigned elsewhere: the trace keeps the old value.

    ## What it does
    Finds reads, in graph code, of an attribute of `self` or of an argument that holds a plain
    Python value (number, string, bool, None, list, dict) and is reassigned outside set-up code:
    in another method, or on an instance of the class from outside it (`model.bias += 5.0`). A setter
    (`def setup_window(self, front): self.front = front`) counts when set-up gave the attribute a
    number or a bool (not only None: then the setter may store anything, such as a tensor of the trace).
    Attributes of an object the instance holds count too (`self.memory.size` with
    `self.memory = ReplayBuffer(...)`, whose `store` counts `size` up), and so does code that graph
    code runs without calling it: the learning-rate callable of an optimizer that graph code applies
    (`Adam(self.get_lr)`, `SGD(learning_rate=lambda: self.lr)`), which the optimizer calls while tracing.
    An attribute holding a tensor is flagged when an eager method that is not set-up sets it to a new
    tensor computed from its arguments, and eager code of the file (a function, or the module) runs both
    that method and the graph code. And a test of whether an attribute is set (`getattr(self, "pre",
    None)`, `hasattr(self, "pre")`) is flagged when an eager method sets it for the time of a call and
    deletes it again (`del self.pre`).
    Attributes holding `tf.Variable`s, layers, models and other TensorFlow objects are not flagged,
    nor are attributes only set in `__init__`/`build` (of the class, or of the object holding it), nor
    reassignments under `tf.init_scope()` in the reading function itself.

    ## Why is this bad
    A plain Python attribute is read once, while tracing, and its value becomes a constant of the
    graph. Calling the function again with the same object does not retrace (objects are compared
    by identity), so after the attribute changes, the function silently keeps computing with the
    old value. Warning, not error: the linter cannot see whether the change happens before the
    first call.

    ## Example
    ```python
    class SimpleModel(tf.Module):
        def __init__(self):
            self.bias = 0.
            self.weight = 2.

    @tf.function
    def evaluate(model, x):
        return model.weight * x + model.bias

    simple_model = SimpleModel()
    simple_model.bias += 5.0  # evaluate(simple_model, x) does not see it
    ```

    ## Use instead
    ```python
    class BetterModel:
        def __init__(self):
            self.bias = tf.Variable(0.)
            self.weight = tf.Variable(2.)

    better_model.bias.assign_add(5.0)
    ```
    Keep values that change in `tf.Variable`s and `assign` to them, or pass them as arguments.
    """

    code = "TFC016"
    name = "mutable-attribute-read"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        _T + "class SimpleModel(tf.Module):\n    def __init__(self):\n        self.bias = 0.\n        self.weight = 2.\n"
        "@tf.function\ndef evaluate(model, x):\n    return model.weight * x + model.bias\n"
        "simple_model = SimpleModel()\nx = tf.constant(10.)\nprint(evaluate(simple_model, x))\n"
        "simple_model.bias += 5.0\nprint(evaluate(simple_model, x))\n",
        _T + "class Scaler(tf.Module):\n    def __init__(self):\n        self.scale = 1.0\n"
        "    def set_scale(self, value: float):\n        self.scale = float(value)\n    @tf.function\n"
        "    def __call__(self, x):\n        return x * self.scale\n",
        _T + "class Net(tf.Module):\n    def __init__(self):\n        self.training = False\n    def train(self):\n"
        "        self.training = True\n    @tf.function\n    def __call__(self, x):\n"
        "        return tf.nn.dropout(x, 0.5) if self.training else x\n",
        _T + "class Box(tf.Module):\n    def __init__(self):\n        self.k = 1\n    @tf.function\n    def f(self, x):\n"
        "        return x * self.k\nbox = Box()\nbox.k = 2\n",
        # TensorFlowTTS tensorflow_tts/models/tacotron2.py: a setter called between inferences; the traced
        # `inference` keeps the first maximum_iterations.
        _T + "class TFTacotron2(tf.keras.Model):\n    def __init__(self):\n        super().__init__()\n"
        "        self.use_window_mask = False\n        self.maximum_iterations = 4000\n"
        "    def setup_maximum_iterations(self, maximum_iterations):\n"
        "        self.maximum_iterations = maximum_iterations\n    @tf.function\n"
        "    def inference(self, input_ids):\n        return dynamic_decode(input_ids, maximum_iterations=self.maximum_iterations)\n",
        # lazyprogrammer/machine_learning_examples 9c35878 tf2.0/rl_trader.py:36-52,263,284 (cut down): the buffer's
        # size, counted up by `store` between calls, read through `self.memory`; the first trace saw an empty buffer.
        _T + "class ReplayBuffer:\n    def __init__(self, size):\n        self.ptr, self.size, self.max_size = 0, 0, size\n"
        "    def store(self, obs):\n        self.ptr = (self.ptr + 1) % self.max_size\n"
        "        self.size = min(self.size + 1, self.max_size)\nclass DQNAgent:\n    def __init__(self):\n"
        "        self.memory = ReplayBuffer(size=500)\n    def update_replay_memory(self, obs):\n"
        "        self.memory.store(obs)\n    @tf.function\n    def replay(self, batch_size=32):\n"
        "        if self.memory.size < batch_size:\n            return\n        train(batch_size)\n",
        # timsainb/tensorflow2-generative-models 9ef283b 6.0-VAE-GAN-fashion-mnist.ipynb cell 12 (cut down): the
        # discriminator's learning rate, a callable the optimizer calls while `apply_gradients` traces, reads a
        # tensor that `compute_loss` sets eagerly on every step; the trace keeps the first one.
        _T + "class VAEGAN(tf.keras.Model):\n    def __init__(self, lr_base_disc):\n        super().__init__()\n"
        "        self.lr_base_disc = lr_base_disc\n        self.disc_optimizer = tf.keras.optimizers.Adam(self.get_lr_d, beta_1=0.5)\n"
        "    def get_lr_d(self):\n        return self.lr_base_disc * self.D_prop\n    def compute_loss(self, x):\n"
        "        d_x = self.disc(x)\n        self.D_prop = tf.sigmoid(tf.reduce_mean(d_x))\n        return tf.reduce_mean(d_x)\n"
        "    def compute_gradients(self, x):\n        with tf.GradientTape() as tape:\n            loss = self.compute_loss(x)\n"
        "        return tape.gradient(loss, self.disc.trainable_variables)\n    @tf.function\n"
        "    def apply_gradients(self, disc_gradients):\n"
        "        self.disc_optimizer.apply_gradients(zip(disc_gradients, self.disc.trainable_variables))\n"
        "    def train(self, x):\n        self.apply_gradients(self.compute_gradients(x))\n",
        # The same with a lambda and a number that a method halves.
        _T + "class Trainer:\n    def __init__(self):\n        self.lr = 0.1\n"
        "        self.opt = tf.keras.optimizers.SGD(learning_rate=lambda: self.lr)\n    def decay(self):\n"
        "        self.lr = self.lr * 0.5\n    @tf.function\n    def step(self, grads, variables):\n"
        "        self.opt.apply_gradients(zip(grads, variables))\n",
        # NVIDIA-Merlin/models eb1e541 merlin/models/tf/models/base.py:1143,1410-1419 (cut down): `fit(pre=...)` sets
        # `train_pre` for one fit and deletes it; the cached train function keeps whether it was there.
        _T + "class BaseModel(tf.keras.Model):\n    def train_step(self, data):\n        x, y = data\n"
        "        if getattr(self, 'train_pre', None):\n            x = self.train_pre(x)\n        return self.step(x, y)\n"
        "    def fit(self, x, pre=None, **kwargs):\n        if pre:\n            self._reset_compile_cache()\n"
        "            self.train_pre = pre\n        out = super().fit(x, **kwargs)\n        if pre:\n"
        "            del self.train_pre\n        return out\n",
    )
    must_not_flag = (
        # google/edward2 ee02560 edward2/tensorflow/layers/dense.py:787-788,880 (cut down): the inner layer's
        # weights, given by the outer layer's `build` (set-up, once), not reassigned.
        _T + "class Inner(tf.keras.layers.Layer):\n    def __init__(self):\n        super().__init__()\n"
        "        self.alpha = None\nclass Outer(tf.keras.layers.Layer):\n    def __init__(self):\n"
        "        super().__init__()\n        self.dense = Inner()\n        self.delta_dense = Inner()\n"
        "    def build(self, shape):\n        self.dense.alpha = self._add_weight('alpha', shape)\n"
        "        self.delta_dense.alpha = self._add_weight('alpha_1', shape)\n    def call(self, x):\n"
        "        return x * self.dense.alpha + x * self.delta_dense.alpha\n",
        # tensorflow/privacy 03035d5 tensorflow_privacy/privacy/optimizers/dp_optimizer_keras_sparse.py:199,353 (cut
        # down): a tensor set by a method that Keras runs in the same trace as the reader; no eager code of the
        # file runs both.
        _T + "class DPOptimizer(tf.keras.optimizers.SGD):\n    def __init__(self, clip, noise):\n"
        "        super().__init__()\n        self._l2_norm_clip = clip\n        self._noise_multiplier = noise\n"
        "        self._noise_stddev = None\n    @tf.function\n    def _generate_noise(self, g):\n"
        "        return tf.random.normal(tf.shape(g), stddev=self._noise_stddev)\n"
        "    def _compute_gradients(self, loss, var_list):\n        num_microbatches = tf.shape(loss)[0]\n"
        "        self._noise_stddev = tf.divide(self._l2_norm_clip * self._noise_multiplier,\n"
        "                                       tf.cast(num_microbatches, tf.float32))\n        return var_list\n",
        # A learning-rate callable that reads only what set-up gave it.
        _T + "class Trainer:\n    def __init__(self):\n        self.base_lr = 0.1\n"
        "        self.opt = tf.keras.optimizers.SGD(learning_rate=lambda: self.base_lr * 2)\n    @tf.function\n"
        "    def step(self, grads, variables):\n        self.opt.apply_gradients(zip(grads, variables))\n",
        # An attribute deleted when the object is closed, not set and deleted around a call.
        _T + "class Runner(tf.Module):\n    def __init__(self, pre):\n        self.pre = pre\n    @tf.function\n"
        "    def __call__(self, x):\n        return self.pre(x) if getattr(self, 'pre', None) else x\n"
        "    def close(self):\n        del self.pre\n",
        # Lazy set-up on the first call, from the first input (tensorflow/gnn 5d7251e
        # tensorflow_gnn/keras/layers/map_features.py:255-263, cut down).
        "import tensorflow as tf\nclass MapFeatures(tf.keras.layers.Layer):\n    def __init__(self):\n"
        "        super().__init__()\n        self._is_initialized = False\n    def _init_from_spec(self, spec):\n"
        "        if not self._is_initialized:\n            self._models = {}\n            self._is_initialized = True\n"
        "    def call(self, graph):\n        self._init_from_spec(graph)\n        if not self._is_initialized:\n"
        "            raise ValueError('not initialized')\n        return graph\n",
        # OpenNMT-tf 2.32.0 opennmt/decoders/decoder.py:247: None at set-up says nothing about what the
        # setter stores; here the encoder's output, set by `initial_state` in the same trace before `call`.
        _T + "class Decoder(tf.keras.layers.Layer):\n    def __init__(self):\n        super().__init__()\n"
        "        self.memory = None\n    def initial_state(self, memory=None):\n        self.memory = memory\n"
        "        return tf.zeros([2])\n    def call(self, inputs, state):\n"
        "        return self.step(inputs, state, memory=self.memory)\n",
        _T + "class BetterModel:\n    def __init__(self):\n        self.bias = tf.Variable(0.)\n"
        "        self.weight = tf.Variable(2.)\n@tf.function\ndef evaluate(model, x):\n"
        "    return model.weight * x + model.bias\nbetter_model = BetterModel()\n"
        "better_model.bias.assign_add(5.0)\n",
        _T + "class SimpleModel(tf.Module):\n    def __init__(self):\n        self.bias = 0.\n        self.weight = 2.\n"
        "def evaluate(model, x):\n    return model.weight * x + model.bias\nx = tf.constant(10.)\n"
        "new_model = SimpleModel()\nevaluate_no_bias = tf.function(evaluate).get_concrete_function(new_model, x)\n"
        "new_model.bias += 5.0\nevaluate_with_bias = tf.function(evaluate).get_concrete_function(new_model, x)\n",
        _T + "class Model(tf.Module):\n    def __init__(self):\n        self.v = tf.Variable(0)\n"
        "        self.counter = 0\n    @tf.function\n    def __call__(self):\n        if self.counter == 0:\n"
        "            with tf.init_scope():\n                self.counter += 1\n                self.v.assign_add(1)\n"
        "        return self.v\n",
        _T + "class Count(tf.Module):\n    def __init__(self):\n        self.count = None\n    @tf.function\n"
        "    def __call__(self):\n        if self.count is None:\n            self.count = tf.Variable(0)\n"
        "        return self.count.assign_add(1)\n",
        _T + "class Dense(tf.keras.layers.Layer):\n    def __init__(self, units):\n        super().__init__()\n"
        "        self.units = units\n        self.built_once = False\n    def build(self, shape):\n"
        "        self.w = self.add_weight(shape=(shape[-1], self.units))\n        self.built_once = True\n"
        "    @tf.function\n    def call(self, x):\n        return tf.matmul(x, self.w) if self.built_once else x\n",
        _T + "class Net(tf.Module):\n    def __init__(self):\n        self.dense = tf.keras.layers.Dense(2)\n"
        "    def rebuild(self):\n        self.dense = tf.keras.layers.Dense(3)\n    @tf.function\n"
        "    def __call__(self, x):\n        return self.dense(x)\n",
        _T + "class Net(tf.Module):\n    def __init__(self):\n        self.rate = 0.1\n    @tf.function\n"
        "    def __call__(self, x):\n        return x * self.rate\n",
        _T + "class Fn:\n    def __init__(self):\n        self._config = None\n    def _initialize(self):\n"
        "        self._config = make_config()\n    @tf.function\n    def __call__(self, x):\n"
        "        return run(x, self._config)\n",
        _T + "class Model(tf.Module):\n    def __init__(self):\n        self._steps = None\n    def configure(self, n):\n"
        "        self._steps = variables.Variable(n)\n    @tf.function\n    def train(self, it):\n"
        "        for _ in tf.range(self._steps):\n            next(it)\n",
        _T + "class Ema(tf.Module):\n    def __init__(self):\n        self._average = None\n"
        "    def shadow_copy(self, model):\n        self._average = [v for v in model.variables]\n"
        "    @tf.function\n    def apply(self):\n        for v in self._average:\n            v.assign(0.0)\n",
        _T + "class Avg(tf.Module):\n    def __init__(self):\n        self._w = None\n    def _create_slots(self, vs):\n"
        "        self._w = [self.get_slot(v) for v in vs]\n    def shadow_copy(self, vs):\n"
        "        self._w = [self.get_slot(v) for v in vs]\n    @tf.function\n    def swap(self):\n"
        "        return merge(self._w)\n",
        _T + "class Contrastive(tf.keras.Model):\n    def __init__(self, backbone):\n        super().__init__()\n"
        "        self.backbone = backbone\n        self._create_loss_trackers()\n"
        "    def _create_loss_trackers(self):\n        self.reg_loss_len = len(self.backbone.losses)\n"
        "        self.reg_loss_len += 1\n    def train_step(self, data):\n"
        "        return {'n': data} if self.reg_loss_len else {}\n",
        _T + "class Attention(tf.Module):\n    def __init__(self, axes=None):\n        self._axes = axes\n"
        "    def _build_attention(self, rank):\n        if self._axes is None:\n"
        "            self._axes = tuple(range(1, rank - 2))\n    def _build_from_signature(self, q):\n"
        "        self._build_attention(len(q.shape))\n    @tf.function\n    def __call__(self, q):\n"
        "        return tf.reduce_sum(q, axis=self._axes)\n",
        _T + "class Task(tf.Module):\n    def __init__(self):\n        self._metrics = []\n"
        "    def set_metrics(self, value):\n        if not value:\n            value = []\n"
        "        self._metrics = value\n    @tf.function\n    def __call__(self, x):\n"
        "        return [m(x) for m in self._metrics]\n",
        _T + "class Other:\n    def __init__(self):\n        self.bias = 0.\nother = Other()\nother.bias = 1.\n"
        "@tf.function\ndef f(x, config):\n    return x + config.scale\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        writes = _AttributeWrites(facts)
        reported: set[tuple[FunctionInfo, str]] = set()
        reads: list[tuple[ast.AST, FunctionInfo, FunctionInfo, str]] = [
            (node, info, info, "") for node, info in facts.graph_nodes(ast.Attribute)]
        reads += _learning_rate_reads(facts)
        for node, info, traced_in, traced_by in reads:
            assert isinstance(node, ast.Attribute)
            key = (info, facts.text(node))
            if key in reported or not _is_plain_read(facts, node):
                continue
            write = writes.reassignment(node, info, traced_in)
            if write is not None:
                reported.add(key)
                message = _message(facts.text(node), facts.line_name(write.lineno), id(write) in writes.tensor_writes)
                if traced_by:
                    yield self.finding(facts, node, f"{message} [`{info.name}` is graph code: {traced_by}]")
                else:
                    yield self.finding(facts, node, message, function=info)
        yield from self._presence_tests(facts, writes)

    def _presence_tests(self, facts: FileFacts, writes: _AttributeWrites) -> Iterator[Finding]:
        """`getattr(self, "pre", None)` / `hasattr(self, "pre")` in graph code, where an eager method sets
        `self.pre` for the time of one call and deletes it again: the trace keeps whether it was there."""
        reported: set[tuple[FunctionInfo, str]] = set()
        for call, info in facts.graph_calls("builtins.getattr", "builtins.hasattr"):
            attr = _presence_test(facts, call)
            if attr is None or (info, attr) in reported:
                continue
            cls = facts.self_class(call.args[0])  # type: ignore[arg-type]
            deleted = writes.temporary(cls, attr, info) if cls is not None else None
            if deleted is not None:
                reported.add((info, attr))
                yield self.finding(
                    facts, call, f"whether `self.{attr}` is set is read while tracing, but it is set and deleted "
                    f"again by eager code ({facts.line_name(deleted.lineno)}): the graph keeps what the first trace "
                    "saw; pass it as an argument, or trace the function anew whenever it changes", function=info)


def _presence_test(facts: FileFacts, call: ast.Call) -> str | None:
    """The attribute `getattr(self, "a", default)` or `hasattr(self, "a")` asks about."""
    if len(call.args) < 2 or not isinstance(call.args[0], ast.Name) or facts.self_class(call.args[0]) is None:
        return None
    if facts.resolve(call.func) == "builtins.getattr" and len(call.args) < 3:
        return None  # no default: raises when missing, a read rather than a test
    name = call.args[1]
    return name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None


# Optimizer methods that call a callable learning rate (Keras 2 and 3, tf.compat.v1.train) while they run,
# so inside the trace of the graph code that calls them.
_APPLYING = frozenset({"apply_gradients", "minimize", "apply"})


def _learning_rate_reads(facts: FileFacts) -> list[tuple[ast.AST, FunctionInfo, FunctionInfo, str]]:
    """Attribute reads in a learning-rate callable (`Adam(lambda: self.lr)`, `Adam(self.get_lr)`) of an optimizer
    that graph code applies: the optimizer calls it inside the trace, which keeps what it returned then. Each
    with the graph function that applies the optimizer."""
    found: list[tuple[ast.AST, FunctionInfo, FunctionInfo, str]] = []
    seen: set[FunctionInfo] = set()
    for call, info in facts.graph_nodes(ast.Call):
        assert isinstance(call, ast.Call)
        if not (isinstance(call.func, ast.Attribute) and call.func.attr in _APPLYING):
            continue
        receiver = call.func.value
        for built in _assigned_values(facts, receiver):
            callable_ = _learning_rate_callable(facts, built)
            if callable_ is None or callable_ in seen or facts.is_graph_function(callable_):
                continue
            seen.add(callable_)
            why = (f"the learning rate of `{facts.text(receiver)}`, which `{call.func.attr}` ({facts.line_name(call.lineno)}) "
                   f"calls while tracing {info.qualname}")
            found += [(node, callable_, info, why) for node in callable_.nodes if isinstance(node, ast.Attribute)]
    return found


def _assigned_values(facts: FileFacts, receiver: ast.expr) -> list[ast.expr]:
    """What `self.opt` or `opt` was assigned."""
    if isinstance(receiver, ast.Attribute) and facts.is_self_attribute(receiver):
        cls = facts.class_of_self(receiver)
        return [value for _, value in facts.self_attribute_values(cls, receiver.attr) if value is not None] \
            if cls is not None else []
    if isinstance(receiver, ast.Name):
        return [b.value for b in facts.bindings_of(receiver) if b.value is not None]
    return []


def _learning_rate_callable(facts: FileFacts, built: ast.expr) -> FunctionInfo | None:
    """The function of this file an optimizer's construction takes as its learning rate, if any."""
    if not (isinstance(built, ast.Call) and facts.kinds(built) == {kinds.OPTIMIZER}):
        return None
    rate = next((k.value for k in built.keywords if k.arg in ("learning_rate", "lr")), None)
    if rate is None and built.args:
        rate = built.args[0]
    if isinstance(rate, ast.Lambda):
        return facts.function_info(rate)
    if isinstance(rate, ast.Attribute) and facts.is_self_attribute(rate):
        cls = facts.class_of_self(rate)
        return facts.method_of(cls, rate.attr) if cls is not None else None
    if isinstance(rate, ast.Name):
        targets = facts.function_target(rate)
        return targets[0] if len(targets) == 1 else None
    return None


def _is_plain_read(facts: FileFacts, node: ast.Attribute) -> bool:
    """A load of `x.attr` or `self.x.attr` used as a value (not called, not the receiver of a further attribute)."""
    parent = facts.parent(node)
    if not isinstance(node.ctx, ast.Load) or not (isinstance(node.value, ast.Name) or facts.is_self_attribute(node.value)):
        return False
    if isinstance(parent, ast.Call) and parent.func is node:
        return False
    return not isinstance(parent, ast.Attribute)


class _AttributeWrites:
    """Where attributes of this file's classes are assigned, from inside methods and from outside."""

    def __init__(self, facts: FileFacts) -> None:
        self.facts = facts
        self._called_from_setup: dict[tuple[str, int], bool] = {}
        self.tensor_writes: set[int] = set()  # the statements `_eager_tensor_write` found
        self._callers_memo: dict[tuple[FunctionInfo, bool], set[FunctionInfo | None]] = {}

    @cached_property
    def external(self) -> dict[tuple[ClassInfo, str], list[ast.stmt]]:
        """`obj.attr = ...` / `obj.attr += ...` where `obj` is an instance of a class of this file."""
        found: dict[tuple[ClassInfo, str], list[ast.stmt]] = {}
        for node, _ in self.facts.all_nodes():
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Attribute) and not self.facts.is_self_attribute(target):
                        cls = self.facts.instance_class(target.value)
                        if cls is not None:
                            found.setdefault((cls, target.attr), []).append(node)
        return found

    @cached_property
    def _external_by_base(self) -> dict[tuple[ClassInfo, str], list[ast.stmt]]:
        """`external`, each write also listed under every local base class of the instance's class."""
        found: dict[tuple[ClassInfo, str], list[ast.stmt]] = {}
        for (owner, attr), stmts in self.external.items():
            for cls in self.facts.class_chain(owner):
                found.setdefault((cls, attr), []).extend(stmts)
        return found

    @cached_property
    def _external_classes(self) -> dict[str, list[ClassInfo]]:
        """The classes in `external` by attribute name."""
        found: dict[str, list[ClassInfo]] = {}
        for cls, attr in self.external:
            found.setdefault(attr, []).append(cls)
        return found

    @cached_property
    def _self_method_calls(self) -> dict[str, list[tuple[ast.Call, FunctionInfo | None]]]:
        """The calls `self.<name>(...)`, with the function each is in, by name."""
        found: dict[str, list[tuple[ast.Call, FunctionInfo | None]]] = {}
        for call, caller in self.facts.calls:
            if isinstance(call.func, ast.Attribute) and self.facts.is_self_attribute(call.func):
                found.setdefault(call.func.attr, []).append((call, caller))
        return found

    def reassignment(self, read: ast.Attribute, info: FunctionInfo, traced_in: FunctionInfo) -> ast.stmt | None:
        """A statement that gives `read`'s attribute a new plain value after set-up, if any. `traced_in` is
        the graph function whose trace runs `info` (`info` itself, or what applies a learning-rate callable)."""
        if self.facts.is_self_attribute(read):
            cls = self.facts.class_of_self(read)
            return self._for_class(cls, read.attr, info, traced_in) if cls is not None else None
        if self.facts.is_self_attribute(read.value):
            # `self.memory.size` with `self.memory = ReplayBuffer(...)`: an attribute of an object of a
            # class of this file, which that class's own methods (or code outside it) reassign.
            held = self.facts.instance_class(read.value)
            return self._for_class(held, read.attr, info, traced_in) if held is not None else None
        if self._is_parameter(read.value, info) and self.facts.decorated_tf_function(info) is not None:
            for cls in self._external_classes.get(read.attr, []):
                found = self._for_class(cls, read.attr, info, traced_in)
                if found is not None:
                    return found
        return None

    def _is_parameter(self, name: ast.expr, info: FunctionInfo) -> bool:
        return self.facts.is_parameter(name, info)

    @cached_property
    def _unpacked(self) -> dict[tuple[ClassInfo, str], list[tuple[ast.AST, ast.expr | None]]]:
        """`self.ptr, self.size = 0, 0` in the methods of the file's classes: each element's value, by (class, attr)."""
        found: dict[tuple[ClassInfo, str], list[tuple[ast.AST, ast.expr | None]]] = {}
        for info in self.facts.functions:
            if info.cls is None:
                continue
            for node in info.nodes:
                if not (isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.List))):
                    continue
                for target in node.targets:
                    if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == len(node.value.elts):
                        for element, value in zip(target.elts, node.value.elts):
                            if isinstance(element, ast.Attribute) and self.facts.is_self_attribute(element):
                                found.setdefault((info.cls, element.attr), []).append((node, value))
        return found

    def _for_class(self, cls: ClassInfo, attr: str, reader: FunctionInfo, traced_in: FunctionInfo) -> ast.stmt | None:
        inside = self.facts.self_attribute_values(cls, attr)
        inside += [found for c in self.facts.class_chain(cls) for found in self._unpacked.get((c, attr), [])]
        outside = self._external_by_base.get((cls, attr), [])
        found: set[str] = set()
        for _, value in inside:
            found |= _value_kinds(self.facts, value)
        for stmt in outside:
            found |= _value_kinds(self.facts, stmt.value)
        if found & kinds.TF_OBJECT_KINDS:
            return None
        tensor_write = self._eager_tensor_write(inside, found, reader, traced_in)
        if tensor_write is not None:
            return tensor_write
        if not found & kinds.PLAIN_KINDS:
            return None
        later = [stmt for stmt, value in inside if self._is_reassignment(stmt, reader) and _new_plain_value(self.facts, stmt, value)]
        # Writes from outside the class count where they are not set-up themselves (`self.inner.k = 2` in `build`).
        later += [stmt for stmt in outside if self._is_outside_reassignment(stmt, reader)]
        scalar = kinds.NUMBER in found and found <= _SCALAR_KINDS
        setters = [stmt for stmt, value in inside if scalar and self._is_reassignment(stmt, reader)
                   and _from_parameter(self.facts, stmt, value)]
        values_set = [value for stmt, value in inside if not _is_none(value)] + outside
        if len(values_set) < 2 and not setters and not any(_updates_itself(self.facts, stmt) for stmt in later):
            return None  # `None` at set-up, then one value: initialised late, once, not changed
        later += setters
        return min(later, key=lambda stmt: stmt.lineno) if later else None

    def _eager_tensor_write(self, inside: list[tuple[ast.AST, ast.expr | None]], found: set[str],
                            reader: FunctionInfo, traced_in: FunctionInfo) -> ast.stmt | None:
        """A tensor attribute that an eager method (not set-up) sets anew on each call, from its arguments
        (`self.D_prop = sigmoid(loss(x))`), where the same eager code (a function, or the module) runs both
        that method and the graph code that reads it (`train` calls `compute_gradients`, which sets it, then
        the tf.function `apply_gradients`): the trace captured the tensor it found and keeps it."""
        if kinds.TENSOR not in found or not found <= {kinds.TENSOR, kinds.NONE}:
            return None
        tracers: set[FunctionInfo | None] | None = None
        for stmt, value in inside:
            owner = self.facts.function_of(stmt)
            if owner is None or self.facts.is_graph_function(owner) or not isinstance(stmt, ast.Assign) \
                    or not self._is_reassignment(stmt, reader) or self.facts.kinds(value) != {kinds.TENSOR} \
                    or not _from_arguments(self.facts, value, owner):
                continue
            if tracers is None:
                tracers = self._eager_callers(traced_in, graph=True)
            if self._eager_callers(owner, graph=False) & tracers:
                self.tensor_writes.add(id(stmt))
                return stmt
        return None

    @cached_property
    def _deletions(self) -> dict[tuple[ClassInfo, str], list[tuple[ast.AST, FunctionInfo]]]:
        """`del self.a` and `delattr(self, "a")` in the methods of the file's classes, by (class, attr)."""
        found: dict[tuple[ClassInfo, str], list[tuple[ast.AST, FunctionInfo]]] = {}
        for info in self.facts.functions:
            if info.cls is None:
                continue
            for node in info.nodes:
                targets: list[str] = []
                if isinstance(node, ast.Delete):
                    targets = [t.attr for t in node.targets if isinstance(t, ast.Attribute) and self.facts.is_self_attribute(t)]
                elif isinstance(node, ast.Call) and self.facts.resolve(node.func) == "builtins.delattr" \
                        and len(node.args) == 2 and isinstance(node.args[0], ast.Name) \
                        and self.facts.self_class(node.args[0]) is not None \
                        and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                    targets = [node.args[1].value]
                for attr in targets:
                    found.setdefault((info.cls, attr), []).append((node, info))
        return found

    def temporary(self, cls: ClassInfo, attr: str, reader: FunctionInfo) -> ast.AST | None:
        """A deletion of `self.<attr>` in an eager method (not set-up, not the reader) of `cls` or a local base
        that also sets it: an attribute there only for the time of a call."""
        for c in self.facts.class_chain(cls):
            for node, owner in self._deletions.get((c, attr), []):
                sets = any(self.facts.function_of(stmt) is owner for stmt, _ in self.facts.self_attribute_values(c, attr))
                if sets and owner is not reader and not self.facts.is_graph_function(owner) \
                        and not self._is_setup(owner, 0):
                    return node
        return None

    def _eager_callers(self, start: FunctionInfo, graph: bool) -> set[FunctionInfo | None]:
        key = (start, graph)
        if key not in self._callers_memo:
            self._callers_memo[key] = _eager_callers(self.facts, [start], graph)
        return self._callers_memo[key]

    def _is_outside_reassignment(self, stmt: ast.AST, reader: FunctionInfo) -> bool:
        owner = self.facts.function_of(stmt)
        return owner is None or (owner is not reader and not self._is_setup(owner, 0)
                                 and self.facts.first_call_guard(stmt) is None)

    def _is_reassignment(self, stmt: ast.AST, reader: FunctionInfo) -> bool:
        """Assigned outside set-up methods, outside the reading function (TFC002 reports those) and not
        behind a first-call guard (tensorflow/gnn's `if not self._is_initialized:` lazy set-up)."""
        owner = self.facts.function_of(stmt)
        return owner is not None and owner is not reader and not self._is_setup(owner, 0) \
            and self.facts.first_call_guard(stmt) is None

    @cached_property
    def _self_method_callers(self) -> dict[str, set[FunctionInfo | None]]:
        """The functions each `self.<name>(...)` is in, by name: classes share method names (`_reset`), so a
        method asks whether it calls itself in one look, not by scanning every class's calls."""
        return {name: {caller for _, caller in calls} for name, calls in self._self_method_calls.items()}

    def _is_setup(self, method: FunctionInfo, depth: int) -> bool:
        """A set-up method, or a helper called only from set-up methods (`self._create_trackers()`) or
        behind a first-call guard (tensorflow/gnn's `if not self._is_initialized: self._init_from_updates(...)`)."""
        if self.facts.is_setup_method(method.name):
            return True
        if depth > 3 or method.cls is None:
            return False
        return method.name in self._self_method_calls and method not in self._self_method_callers[method.name] \
            and self._only_called_to_set_up(method.name, depth)

    def _only_called_to_set_up(self, name: str, depth: int) -> bool:
        """Every `self.<name>(...)` is in a set-up method or behind a first-call guard; once per name, as
        classes share method names."""
        key = (name, depth)
        if key not in self._called_from_setup:
            self._called_from_setup[key] = all(
                caller is not None and (self._is_setup(caller, depth + 1) or self.facts.first_call_guard(call) is not None)
                for call, caller in self._self_method_calls[name])
        return self._called_from_setup[key]


def _from_parameter(facts: FileFacts, stmt: ast.AST, value: ast.expr | None) -> bool:
    """`self.a = a` in a method that takes `a`: a setter, which can be called again with another value."""
    owner = facts.function_of(stmt)
    return owner is not None and facts.is_parameter(value, owner)


_CALLER_DEPTH = 4


def _eager_callers(facts: FileFacts, start: list[FunctionInfo], graph: bool) -> set[FunctionInfo | None]:
    """The eager functions (None: the module) that call `start`, directly or through functions of the file up
    to a few calls away: through graph functions (`graph`: the eager code that runs a trace), or through eager
    ones (the eager code that runs a method); `start` itself included when eager."""
    found: set[FunctionInfo | None] = set()
    frontier, seen = list(start), set(start)
    for _ in range(_CALLER_DEPTH):
        following: list[FunctionInfo] = []
        for info in frontier:
            in_graph = facts.is_graph_function(info)
            if not in_graph:
                found.add(info)
            if in_graph != graph:
                continue
            for _, caller in facts.callers(info):
                if caller is None:
                    found.add(None)
                elif caller not in seen:
                    seen.add(caller)
                    following.append(caller)
        frontier = following
    return found


def _from_arguments(facts: FileFacts, value: ast.expr | None, owner: FunctionInfo) -> bool:
    """Whether `value` is computed from the arguments (other than `self`) of the function it is assigned in,
    through its local names: data of the call, new on every call."""
    pending = [value] if value is not None else []
    seen: set[int] = set()
    while pending and len(seen) < 200:
        node = pending.pop()
        for name in ast.walk(node):
            if not isinstance(name, ast.Name) or id(name) in seen:
                continue
            seen.add(id(name))
            if facts.function_of(name) is not owner:
                continue
            for binding in facts.bindings_of(name):
                if binding.kind == "param" and owner.params[:1] != [name.id]:
                    return True
                if facts.function_of(binding.node) is not owner:
                    continue
                if binding.value is not None:
                    pending.append(binding.value)
                elif binding.kind == "assign":  # `a, b = f(x)`: the statement's value
                    statement = facts.enclosing_statement(binding.node)
                    if isinstance(statement, ast.Assign):
                        pending.append(statement.value)
    return False


def _updates_itself(facts: FileFacts, stmt: ast.AST) -> bool:
    """`self.n += 1`, or arithmetic on the attribute's own value (`self.size = min(self.size + 1, self.max_size)`):
    a new value every time it runs, not a value set once."""
    if isinstance(stmt, ast.AugAssign):
        return True
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Attribute):
        return False
    target = stmt.targets[0]
    return any(isinstance(node, ast.BinOp) and any(
        isinstance(side, ast.Attribute) and side.attr == target.attr and facts.is_self_attribute(side)
        and facts.is_self_attribute(target) for side in (node.left, node.right)) for node in ast.walk(stmt.value))


def _is_none(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Constant) and value.value is None


def _new_plain_value(facts: FileFacts, stmt: ast.AST, value: ast.expr | None) -> bool:
    """A known plain value other than None: a lazily set attribute (`None`, then an object) is not stale."""
    if _updates_itself(facts, stmt):
        return True
    found = _value_kinds(facts, value)
    return bool(found) and found <= kinds.PLAIN_KINDS and found != {kinds.NONE}


def _value_kinds(facts: FileFacts, value: ast.expr | None) -> set[str]:
    """The kinds of an assigned value; a container counts as plain only when it holds constants.

    `[self.get_slot(v) for v in weights]` is a list of variables, not plain Python data.
    """
    if value is None or isinstance(value, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return set()
    if isinstance(value, ast.Name) and any(b.kind == "param" for b in facts.bindings_of(value)):
        return set()  # a parameter can hold anything; its default or a fallback says little
    if isinstance(value, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
        elements = [e for e in ast.walk(value) if e is not value and not isinstance(e, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.expr_context))]
        if not all(isinstance(e, ast.Constant) for e in elements):
            return set()
    return facts.kinds(value)


def _message(expression: str, line: str, tensor: bool = False) -> str:
    if tensor:
        return (f"`{expression}` is read while tracing, but eager code sets it to a new tensor at {line}: the graph "
                "captured the tensor of its first trace and keeps it; make it a tf.Variable and assign to it, or "
                "pass it as an argument")
    return (f"`{expression}` is a plain Python value read while tracing, but it is reassigned at {line}: "
            "the graph keeps the old value; make it a tf.Variable and assign to it, or pass it as an argument")
