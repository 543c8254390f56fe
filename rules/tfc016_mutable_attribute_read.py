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
    Attributes holding `tf.Variable`s, layers, models and other TensorFlow objects are not flagged,
    nor are attributes only set in `__init__`/`build`, nor reassignments under `tf.init_scope()` in
    the reading function itself.

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
    )
    must_not_flag = (
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
        for node, info in facts.graph_nodes(ast.Attribute):
            assert isinstance(node, ast.Attribute)
            key = (info, facts.text(node))
            if key in reported or not _is_plain_read(facts, node):
                continue
            write = writes.reassignment(node, info)
            if write is not None:
                reported.add(key)
                yield self.finding(facts, node, _message(facts.text(node), facts.line_name(write.lineno)), function=info)


def _is_plain_read(facts: FileFacts, node: ast.Attribute) -> bool:
    """A load of `x.attr` used as a value (not called, not the receiver of a further attribute)."""
    parent = facts.parent(node)
    if not isinstance(node.ctx, ast.Load) or not isinstance(node.value, ast.Name):
        return False
    if isinstance(parent, ast.Call) and parent.func is node:
        return False
    return not isinstance(parent, ast.Attribute)


class _AttributeWrites:
    """Where attributes of this file's classes are assigned, from inside methods and from outside."""

    def __init__(self, facts: FileFacts) -> None:
        self.facts = facts
        self._called_from_setup: dict[tuple[str, int], bool] = {}

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

    def reassignment(self, read: ast.Attribute, info: FunctionInfo) -> ast.stmt | None:
        """A statement that gives `read`'s attribute a new plain value after set-up, if any."""
        if self.facts.is_self_attribute(read):
            cls = self.facts.class_of_self(read)
            return self._for_class(cls, read.attr, info) if cls is not None else None
        if self._is_parameter(read.value, info) and self.facts.decorated_tf_function(info) is not None:
            for cls in self._external_classes.get(read.attr, []):
                found = self._for_class(cls, read.attr, info)
                if found is not None:
                    return found
        return None

    def _is_parameter(self, name: ast.expr, info: FunctionInfo) -> bool:
        return self.facts.is_parameter(name, info)

    def _for_class(self, cls: ClassInfo, attr: str, reader: FunctionInfo) -> ast.stmt | None:
        inside = self.facts.self_attribute_values(cls, attr)
        outside = self._external_by_base.get((cls, attr), [])
        found: set[str] = set()
        for _, value in inside:
            found |= _value_kinds(self.facts, value)
        for stmt in outside:
            found |= _value_kinds(self.facts, stmt.value)
        if found & kinds.TF_OBJECT_KINDS or not found & kinds.PLAIN_KINDS:
            return None
        later = [stmt for stmt, value in inside if self._is_reassignment(stmt, reader) and _new_plain_value(self.facts, stmt, value)]
        later += outside
        scalar = kinds.NUMBER in found and found <= _SCALAR_KINDS
        setters = [stmt for stmt, value in inside if scalar and self._is_reassignment(stmt, reader)
                   and _from_parameter(self.facts, stmt, value)]
        values_set = [value for stmt, value in inside if not _is_none(value)] + outside
        if len(values_set) < 2 and not setters and not any(isinstance(stmt, ast.AugAssign) for stmt in later):
            return None  # `None` at set-up, then one value: initialised late, once, not changed
        later += setters
        return min(later, key=lambda stmt: stmt.lineno) if later else None

    def _is_reassignment(self, stmt: ast.AST, reader: FunctionInfo) -> bool:
        """Assigned outside set-up methods, outside the reading function (TFC002 reports those) and not
        behind a first-call guard (tensorflow/gnn's `if not self._is_initialized:` lazy set-up)."""
        owner = self.facts.function_of(stmt)
        return owner is not None and owner is not reader and not self._is_setup(owner, 0) \
            and self.facts.first_call_guard(stmt) is None

    def _is_setup(self, method: FunctionInfo, depth: int) -> bool:
        """A set-up method, or a helper called only from set-up methods (`self._create_trackers()`) or
        behind a first-call guard (tensorflow/gnn's `if not self._is_initialized: self._init_from_updates(...)`)."""
        if self.facts.is_setup_method(method.name):
            return True
        if depth > 3 or method.cls is None:
            return False
        calls = self._self_method_calls.get(method.name, [])
        return bool(calls) and all(caller is not method for _, caller in calls) \
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


def _is_none(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Constant) and value.value is None


def _new_plain_value(facts: FileFacts, stmt: ast.AST, value: ast.expr | None) -> bool:
    """A known plain value other than None: a lazily set attribute (`None`, then an object) is not stale."""
    if isinstance(stmt, ast.AugAssign):
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


def _message(expression: str, line: str) -> str:
    return (f"`{expression}` is a plain Python value read while tracing, but it is reassigned at {line}: "
            "the graph keeps the old value; make it a tf.Variable and assign to it, or pass it as an argument")
