"""TFC027: a tf.function method taken from an object nothing keeps: `Model().apply(x)` raises."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_T = "import tensorflow as tf\n"
_MODEL = (_T + "class Model(tf.Module):\n    def __init__(self):\n        self.w = tf.Variable(2.0)\n"
          "    @tf.function\n    def apply(self, x):\n        return x * self.w\n")


class MethodOnTemporaryObject(Rule):
    """A tf.function method of an object that is made and dropped in one expression sees `self` as None.

    ## What it does
    Finds `Cls(...).method` where `method` is a method of a class of this file decorated with
    `tf.function` that reads `self`: called at once (`Model().apply(x)`), kept (`f = Model().apply`)
    or asked for a concrete function (`Model().apply.get_concrete_function(spec)`). A method that
    never reads `self` works on a temporary object and is not reported.

    ## Why is this bad
    A tf.function method holds only a weak reference to its instance (TensorFlow's
    `polymorphic_function.py`, `class_method_to_instance_method`), so that the function does not keep
    the object alive. When nothing else refers to the object, it is gone by the time the function
    traces, and the body runs with `self` as None: `AttributeError: 'NoneType' object has no attribute
    'w'` (TensorFlow 2.21). The same code without `@tf.function` works, which makes the error puzzling.

    ## Example
    ```python
    class Model(tf.Module):
        def __init__(self):
            self.w = tf.Variable(2.0)

        @tf.function
        def apply(self, x):
            return x * self.w

    y = Model().apply(tf.constant(1.0))
    ```

    ## Use instead
    ```python
    model = Model()
    y = model.apply(tf.constant(1.0))
    ```
    Keep the object in a name (or an attribute) for as long as its function is used.
    """

    code = "TFC027"
    name = "method-on-temporary-object"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        _MODEL + "y = Model().apply(tf.constant(1.0))\n",
        _MODEL + "f = Model().apply\ny = f(tf.constant(1.0))\n",
        _MODEL + "c = Model().apply.get_concrete_function(tf.TensorSpec([], tf.float32))\n",
        _MODEL + "def predict(x):\n    return Model().apply(x)\n",
    )
    must_not_flag = (
        _MODEL + "model = Model()\ny = model.apply(tf.constant(1.0))\n",
        _MODEL + "class Holder:\n    def __init__(self):\n        self.model = Model()\n"
        "    def run(self, x):\n        return self.model.apply(x)\n",
        # The method never reads `self`: it runs on a temporary object (checked in TensorFlow 2.21).
        _T + "class Doubler:\n    @tf.function\n    def run(self, x):\n        return x * 2\n"
        "y = Doubler().run(tf.constant(1.0))\n",
        # Not a tf.function method.
        _T + "class Model(tf.Module):\n    def __init__(self):\n        self.w = tf.Variable(2.0)\n"
        "    def apply(self, x):\n        return x * self.w\ny = Model().apply(tf.constant(1.0))\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        if not any(info.cls is not None and facts.decorated_tf_function(info) is not None for info in facts.functions):
            return  # no tf.function method in the file: nothing to take from a temporary object
        for call, _ in facts.calls:
            node = facts.parent(call)
            if isinstance(node, ast.Attribute) and node.value is call \
                    and (method := _tf_function_method_reading_self(facts, call, node.attr)) is not None:
                yield self.finding(
                    facts, node, f"`{method.qualname}` is a tf.function method of an object nothing keeps: the "
                    "function holds only a weak reference to `self`, so it runs with `self` as None and raises "
                    "AttributeError; keep the object in a name first")


def _tf_function_method_reading_self(facts: FileFacts, call: ast.Call, name: str) -> FunctionInfo | None:
    """The method `name` of the class `call` makes, when it is a tf.function that reads `self`."""
    cls = facts.called_class(call)
    method = facts.method_of(cls, name) if cls is not None else None
    if method is None or facts.decorated_tf_function(method) is None or not method.params:
        return None
    own = method.params[0]
    return method if any(isinstance(n, ast.Name) and n.id == own for n in method.nodes) else None
