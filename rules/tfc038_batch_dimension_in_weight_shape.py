"""TFC038: the batch dimension, `input_shape[0]`, in the shape of a weight made in a Keras layer's `build`."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine import kinds
from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

# Keywords that give a Keras model a fixed batch size: then `input_shape[0]` is a number. `batch_size`
# fixes it only for an input (`keras.Input(shape, batch_size=8)`); `fit(batch_size=...)` does not.
_FIXED_BATCH_SHAPE = frozenset({"batch_shape", "batch_input_shape"})
_INPUTS = ("Input", "InputLayer")
_K = "import keras\n"


class BatchDimensionInWeightShape(Rule):
    """A weight shaped by the batch dimension cannot be made when the batch size is unknown.

    ## What it does
    Finds `self.add_weight(...)` in the `build(self, input_shape)` of a Keras layer or model of the
    file whose shape (a tuple or list written in the call, or a name bound once to one) holds
    `input_shape[0]`, or a name bound once to it. The parameter must not be bound again in `build`,
    nor be indexed twice (`input_shape[0][-1]`: a layer of several inputs, whose `input_shape[0]` is a
    shape), and the file must not fix a batch size (`batch_shape=`, `batch_input_shape=`, an input's
    `batch_size=`).

    ## Why is this bad
    `input_shape[0]` is the batch dimension, which is `None` whenever the layer is built from a
    symbolic input: in a functional model (`keras.Input((3,))`), under `model.build((None, 3))`, and
    under `fit` of a dataset without `drop_remainder`. Keras then raises `ValueError: Shapes used to
    initialize variables must be fully-defined (no None dimensions). Received: shape=(None, 3)`.
    Where the layer is built eagerly with a real batch it runs, but its weights then only fit that
    batch size. A weight per sample is almost always meant per feature: `input_shape[-1]`.

    Checked against TensorFlow 2.21 (Keras 3): the Example raises when a functional model is built
    with it, and runs when the layer is first called on `tf.ones((2, 3))`; with `input_shape[-1]` the
    functional model builds.

    ## Example
    ```python
    class PerSample(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[0], input_shape[-1]), initializer="ones")

        def call(self, x):
            return x * self.w
    ```

    ## Use instead
    ```python
    class PerFeature(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones")

        def call(self, x):
            return x * self.w
    ```
    """

    code = "TFC038"
    name = "batch-dimension-in-weight-shape"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        # Checked (docs/coverage.md B8): ValueError "Shapes used to initialize variables must be fully-defined".
        _K + "class PerSample(keras.layers.Layer):\n    def build(self, input_shape):\n"
        "        self.w = self.add_weight(shape=(input_shape[0], input_shape[-1]), initializer='ones')\n"
        "    def call(self, x):\n        return x * self.w\n",
        _K + "class PerSample(keras.layers.Layer):\n    def build(self, shape):\n        batch = shape[0]\n"
        "        self.w = self.add_weight(name='w', shape=[batch, 3])\n",
        _K + "class PerSample(keras.layers.Layer):\n    def build(self, input_shape):\n"
        "        size = (input_shape[0], 4)\n        self.w = self.add_weight(shape=size)\n",
        # `fit(batch_size=...)` leaves the functional model's batch dimension None.
        _K + "class PerSample(keras.layers.Layer):\n    def build(self, input_shape):\n"
        "        self.w = self.add_weight(shape=(input_shape[0], 3))\n    def call(self, x):\n        return x\n"
        "inp = keras.Input((3,))\nmodel = keras.Model(inp, PerSample()(inp))\nmodel.fit(x, y, batch_size=8)\n",
    )
    must_not_flag = (
        # Checked: the feature dimension builds in a functional model.
        _K + "class PerFeature(keras.layers.Layer):\n    def build(self, input_shape):\n"
        "        self.w = self.add_weight(shape=(input_shape[-1],), initializer='ones')\n",
        # Several inputs: `input_shape[0]` is the first input's shape.
        _K + "class Bilinear(keras.layers.Layer):\n    def build(self, input_shape):\n"
        "        self.w = self.add_weight(shape=(input_shape[0][-1], input_shape[1][-1]))\n",
        # The parameter bound again: its first item is a feature dimension.
        _K + "class Seq(keras.layers.Layer):\n    def build(self, input_shape):\n        input_shape = input_shape[1:]\n"
        "        self.w = self.add_weight(shape=(input_shape[0],))\n",
        # A fixed batch size.
        _K + "class PerSample(keras.layers.Layer):\n    def build(self, input_shape):\n"
        "        self.w = self.add_weight(shape=(input_shape[0], 3))\n"
        "inp = keras.Input(batch_shape=(8, 3))\ny = PerSample()(inp)\n",
        _K + "class PerSample(keras.layers.Layer):\n    def build(self, input_shape):\n"
        "        self.w = self.add_weight(shape=(input_shape[0], 3))\n"
        "inp = keras.Input((3,), batch_size=8)\ny = PerSample()(inp)\n",
        # Not a Keras layer.
        "import tensorflow as tf\nclass Thing(tf.Module):\n    def build(self, input_shape):\n"
        "        self.w = self.add_weight(shape=(input_shape[0], 3))\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        if _fixes_batch_size(facts):
            return
        for cls in facts.classes:
            build = facts.method_of(cls, "build")
            if build is None or build.cls is not cls or facts.class_kind(cls) not in (kinds.LAYER, kinds.MODEL):
                continue
            for node in _batch_dimensions_in_weights(facts, build):
                yield self.finding(
                    facts, node, f"`{facts.text(node)}` is the batch dimension, None when the layer is built "
                    "from a symbolic input (a functional model, `model.build((None, ...))`, `fit`): `add_weight` "
                    "raises `Shapes used to initialize variables must be fully-defined`; shape weights by "
                    "features (`input_shape[-1]`)")


def _fixes_batch_size(facts: FileFacts) -> bool:
    """A call of the file fixes a batch size (`keras.Input(batch_shape=...)`, `batch_size=` of an input)."""
    return any(k.arg in _FIXED_BATCH_SHAPE or (k.arg == "batch_size" and _is_input(facts, call))
               for call, _ in facts.calls for k in call.keywords)


def _is_input(facts: FileFacts, call: ast.Call) -> bool:
    return (facts.resolve(call.func) or "").rsplit(".", 1)[-1] in _INPUTS


def _batch_dimensions_in_weights(facts: FileFacts, build: FunctionInfo) -> Iterator[ast.AST]:
    """`shape[0]` items (or names bound once to them) of the shapes `self.add_weight` gets in `build`."""
    params = build.params
    if len(params) < 2 or build.node.args.vararg is not None:
        return
    batch_reads = _single_batch_reads(facts, build, params[1])
    if batch_reads is None:
        return
    for node in build.nodes:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_weight"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == params[0]):
            continue
        for shape in [*node.args, *(k.value for k in node.keywords if k.arg == "shape")]:
            for item in _shape_items(facts, shape):
                if item in batch_reads or (isinstance(item, ast.Name) and _bound_once_to(facts, item) in batch_reads):
                    yield item


def _single_batch_reads(facts: FileFacts, build: FunctionInfo, parameter: str) -> set[ast.AST] | None:
    """The `parameter[0]` reads of `build`; None when the parameter is bound again or read as a list of shapes."""
    reads: set[ast.AST] = set()
    for node in build.nodes:
        if not (isinstance(node, ast.Name) and node.id == parameter):
            continue
        if any(b.kind != "param" for b in facts.bindings_of(node)):
            return None
        parent = facts.parent(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            if isinstance(facts.parent(parent), ast.Subscript) and facts.parent(parent).value is parent:
                return None  # `input_shape[0][-1]`: a list of shapes
            if isinstance(parent.slice, ast.Constant) and parent.slice.value == 0:
                reads.add(parent)
    return reads


def _shape_items(facts: FileFacts, shape: ast.expr) -> list[ast.expr]:
    """The items of a tuple or list written here, or bound once to the name `shape`."""
    if isinstance(shape, ast.Name):
        bound = _bound_once_to(facts, shape)
        shape = bound if isinstance(bound, ast.expr) else shape
    return list(shape.elts) if isinstance(shape, (ast.Tuple, ast.List)) else []


def _bound_once_to(facts: FileFacts, name: ast.Name) -> ast.expr | None:
    """The value of a name with one plain assignment."""
    bindings = facts.bindings_of(name)
    return bindings[0].value if len(bindings) == 1 and bindings[0].kind == "assign" else None
