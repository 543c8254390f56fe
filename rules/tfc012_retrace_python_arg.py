"""TFC012: a tf.function called with changing Python numbers or new plain objects: one trace each."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine import kinds
from tfcheck.engine.facts import FileFacts, TfFunctionCall, ValueOf
from tfcheck.engine.scopes import ClassInfo, FunctionInfo
from tfcheck.findings import Finding, Fix, Severity
from tfcheck.edits import call_code, expression_code, replace_node
from tfcheck.rule import Rule

# Methods that give a class its own trace identity, so new instances need not retrace.
_TRACE_IDENTITY_METHODS = frozenset({"__tf_tracing_type__", "__eq__", "__hash__"})
_COUNTER_SOURCES = frozenset({"builtins.range", "builtins.enumerate"})
_NUMBER_CONVERSIONS = frozenset({"builtins.int", "builtins.float"})
# NumPy calls whose elements are np.float64, a subclass of Python float: traced by value like floats.
# (Rows of 2-D arrays are arrays, traced by shape like tensors, so other NumPy data does not count.)
_FLOAT_SEQUENCES = frozenset({"numpy.linspace", "numpy.geomspace", "numpy.logspace"})
# TensorFlow warns after 5 retraces in a row; a loop known to run fewer times retraces a bounded few.
FEW_TRACES = 5


class RetracePythonArg(Rule):
    """A tf.function called with Python values that change on every call retraces every time.

    ## What it does
    Finds calls of a tf.function without an `input_signature` that pass the counter of a Python loop
    (`for step in range(n): train_step(x, step)`), that pass different Python numbers in different
    calls to a parameter the function only feeds to TensorFlow ops, or that pass a new instance of a
    plain Python class on each call.

    ## Why is this bad
    A tf.function keys its traces on the values of Python arguments (and on the identity of plain
    objects). Each new number or object means a new trace: Python runs the whole function again and
    builds a new graph, which is slow and grows memory with every call, while the graphs are the same.
    It is a warning because results stay correct.

    ## Example
    ```python
    @tf.function
    def train(num_steps):
        for _ in tf.range(num_steps):
            train_one_step()

    train(num_steps=10)
    train(num_steps=20)  # traces again
    ```

    ## Use instead
    ```python
    train(num_steps=tf.constant(10))
    train(num_steps=tf.constant(20))  # reuses the trace
    ```
    Pass tensors, give the function an `input_signature`, or give the class a trace type
    (`tf.experimental.ExtensionType`, or `__tf_tracing_type__`). `--unsafe-fixes` wraps a changing
    number in `tf.constant(...)`; it is unsafe because the dtype becomes int32/float32 (`x * step` may
    then need a cast) and Python branches on the value become graph conditionals.
    """

    code = "TFC012"
    name = "retrace-python-arg"
    severity = Severity.WARNING
    must_flag = (
        # Reference: different Python numbers for a parameter only fed to TensorFlow ops.
        "import tensorflow as tf\ndef train_one_step():\n  pass\n\n@tf.function\ndef train(num_steps):\n"
        "  print(\"Tracing with num_steps = \", num_steps)\n  tf.print(\"Executing with num_steps = \", num_steps)\n"
        "  for _ in tf.range(num_steps):\n    train_one_step()\n\ntrain(num_steps=10)\ntrain(num_steps=20)\n",
        # Reference: new instances of plain classes on every call.
        "import tensorflow as tf\n@tf.function\ndef get_mixed_flavor(fruit_a, fruit_b):\n"
        "  return fruit_a.flavor + fruit_b.flavor\n\nclass Fruit:\n  flavor = tf.constant([0, 0])\n\n"
        "class Apple(Fruit):\n  flavor = tf.constant([1, 2])\n\nclass Mango(Fruit):\n"
        "  flavor = tf.constant([3, 4])\n\nget_mixed_flavor(Apple(), Mango())\nget_mixed_flavor(Apple(), Mango())\n",
        # Walking Python numbers, and a value computed from the loop variable.
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef sample(x, alpha):\n"
        "    return x + alpha * tf.random.normal(tf.shape(x))\nsigmas = np.geomspace(1.0, 0.01, 10)\n"
        "def generate(x, eps):\n    for sigma in sigmas:\n        alpha = eps * (sigma / sigmas[-1]) ** 2\n"
        "        x = sample(x, alpha)\n    return x\n",
        "import tensorflow as tf\n@tf.function\ndef train(x, lr):\n    return x * lr\n"
        "for lr in [0.1, 0.05, 0.01, 0.005, 0.001]:\n    train(1.0, lr)\n",
        # The counter of a Python loop (from a real training script: `epoch` is not even used).
        "import tensorflow as tf\n@tf.function\ndef train(images, labels, epoch, training_mode):\n"
        "    return tf.reduce_mean(images - labels)\nepochs = 10000\nfor epoch in range(epochs):\n"
        "    for train_images, train_labels in train_ds:\n"
        "        train(train_images, train_labels, epoch, 'latent')\n",
        "import tensorflow as tf\n@tf.function\ndef train_step(x, step):\n    return x * step\n"
        "for step in range(1000):\n    train_step(tf.ones(3), step)\n",
        "import tensorflow as tf\nclass Trainer:\n    @tf.function\n    def step(self, x, epoch):\n"
        "        return x + epoch\n    def fit(self, x):\n        for epoch, batch in enumerate(x):\n"
        "            self.step(batch, epoch)\n",
        "import tensorflow as tf\ndef step(x, i):\n    return x * i\nstep = tf.function(step)\n"
        "for i in range(100):\n    step(1.0, i)\n",
        "import tensorflow as tf\nf = tf.function(lambda x, i: x + i)\ni = 0\nwhile i < 10:\n    f(1.0, float(i))\n"
        "    i += 1\n",
        "import tensorflow as tf\nclass Config:\n    def __init__(self):\n        self.scale = 2.0\n"
        "@tf.function\ndef f(x, cfg):\n    return x * cfg.scale\nfor batch in range(3):\n    f(1.0, Config())\n",
    )
    must_not_flag = (
        # Reference: tensors instead of Python numbers; a fixed input_signature.
        "import tensorflow as tf\ndef train_one_step():\n  pass\n\n@tf.function\ndef train(num_steps):\n"
        "  for _ in tf.range(num_steps):\n    train_one_step()\n\n"
        "train(num_steps=tf.constant(10))\ntrain(num_steps=tf.constant(20))\n",
        "import tensorflow as tf\n@tf.function(input_signature=(tf.TensorSpec(shape=[None], dtype=tf.int32),))\n"
        "def g(x):\n  return x\nfor i in range(10):\n  g(tf.constant([i]))\n",
        # Python numbers that configure the graph; flags; one value.
        "import tensorflow as tf\n@tf.function\ndef f(x, num_layers):\n    for _ in range(num_layers):\n"
        "        x = tf.nn.relu(x)\n    return x\nf(1.0, 2)\nf(1.0, 3)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, training):\n    return tf.nn.dropout(x, 0.5) if training else x\n"
        "f(1.0, True)\nf(1.0, False)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    return x * tf.cast(n, tf.float32)\nf(1.0, 3)\nf(2.0, 3)\n",
        # The index selects a Python object: one trace per block is the design.
        "import tensorflow as tf\nclass Stack:\n    def __init__(self, blocks):\n        self.blocks = blocks\n"
        "    @tf.function\n    def run_block(self, x, i):\n        return self.blocks[i](x)\n"
        "    def __call__(self, x, n):\n        for i in range(n):\n            x = self.run_block(x, i)\n"
        "        return x\n",
        # Rows of a NumPy array are arrays: traced by shape and dtype, like tensors.
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(row):\n    return tf.reduce_sum(row)\n"
        "DATA = np.ones((100, 8))\nfor row in DATA:\n    f(row)\n",
        # A few settings; a value computed from something other than the loop variable.
        "import tensorflow as tf\n@tf.function\ndef train(x, lr):\n    return x * lr\n"
        "for lr in [0.1, 0.01]:\n    train(1.0, lr)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, scale):\n    return x * scale\nbase = 2.0\n"
        "for batch in dataset:\n    scale = base * 2\n    f(batch, scale)\n",
        # A handful of known iterations: a bounded number of traces (TensorFlow warns from 5 on).
        "import tensorflow as tf\n@tf.function\ndef f(i):\n    return tf.constant(i) + tf.constant(i)\n"
        "for step in range(3):\n    print(f(step).numpy())\n",
        # Not a counter: accumulating a tensor in a loop and passing it on.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return x * 2\ntotal = tf.zeros(3)\n"
        "for b in [tf.ones(3)] * 10:\n    total += b\n    f(total)\n",
        # The loop counter converted to a tensor; a loop inside graph code; an object made once.
        "import tensorflow as tf\n@tf.function\ndef step(x, i):\n    return x + i\nfor i in range(10):\n"
        "    step(1.0, tf.constant(i))\n",
        "import tensorflow as tf\n@tf.function\ndef inner(x, i):\n    return x * i\n@tf.function\ndef outer(x):\n"
        "    for i in range(3):\n        x = inner(x, i)\n    return x\n",
        "import tensorflow as tf\nclass Config:\n    pass\n@tf.function\ndef f(x, cfg):\n    return x\n"
        "cfg = Config()\nfor _ in range(3):\n    f(1.0, cfg)\n",
        # A class with its own trace type.
        "import tensorflow as tf\nclass Key:\n    def __eq__(self, other):\n        return True\n"
        "    def __hash__(self):\n        return 0\n@tf.function\ndef f(x, k):\n    return x\n"
        "for _ in range(3):\n    f(1.0, Key())\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        calls = [c for c in facts.tf_function_calls
                 if not c.has_signature and not facts.is_graph_function(c.caller)]
        tf_alias = facts.tensorflow_alias
        object_lines = _first_object_lines(facts, calls)
        for tf_call in calls:
            for parameter, argument in tf_call.arguments.items():
                counter = None if _indexes_python(facts, tf_call.function, parameter) \
                    else _loop_counter(facts, argument, tf_call.call)
                reason = counter or _new_plain_object(facts, argument, tf_call, object_lines)
                if reason is not None:
                    fix = _to_tensor_fix(facts, argument, tf_alias) if counter is not None else None
                    yield self.finding(facts, argument, f"`{tf_call.function.name}` is traced again for every "
                                       f"{reason} passed as `{parameter}`; pass a tensor (tf.constant) or give "
                                       "the tf.function an input_signature", fix)
        for tf_call, parameter, argument in facts.varying_arguments(calls, _number_for(facts)):
            yield self.finding(facts, argument, f"`{tf_call.function.name}` is called with different Python numbers "
                               f"for `{parameter}`, which it only uses as a tensor: each value is a new trace; "
                               "pass tf.constant(...) instead", _to_tensor_fix(facts, argument, tf_alias))


def _to_tensor_fix(facts: FileFacts, argument: ast.expr, tf_alias: str | None) -> Fix | None:
    """`f(x, step)` -> `f(x, tf.constant(step))`. Unsafe: the dtype becomes int32/float32 and a function
    that branches on the value in Python (`if step > 10:`) now builds a tf.cond instead."""
    if tf_alias is None:
        return None
    code = call_code(f"{tf_alias}.constant", expression_code(facts, argument))
    return Fix(f"Pass `{code}`", (replace_node(facts, argument, code),), safe=False)


def _parameter_uses(facts: FileFacts, function: FunctionInfo, parameter: str) -> list[ast.Name]:
    """The reads of a parameter in the function's own code (a nested function's use is its own business)."""
    return [use for use in facts.uses_of(parameter, function) if facts.function_of(use) is function]


def _indexes_python(facts: FileFacts, function: FunctionInfo, parameter: str) -> bool:
    """`self.blocks[i]`: the function needs the Python value, one trace per index is its design."""
    for use in _parameter_uses(facts, function, parameter):
        parent = facts.parent(use)
        if isinstance(parent, ast.Subscript) and parent.slice is use and kinds.TENSOR not in facts.kinds(parent.value):
            return True
    return False


def _loop_counter(facts: FileFacts, argument: ast.expr, call: ast.Call) -> str | None:
    """`i` (or `float(i)`, `i * 2`) where `i` changes on every iteration of a Python loop around the call.

    `i` counts (`range`, `enumerate`, `i += 1`), walks Python numbers (`for lr in np.geomspace(...)`),
    or is computed in the loop from one of those (`alpha = eps * (sigma / s0) ** 2`).
    """
    for name in _number_names(facts, argument):
        changing = _changing_name(facts, name, call, derived=True)
        if changing is not None:
            return changing
    return None


def _changing_name(facts: FileFacts, name: ast.Name, call: ast.Call, derived: bool) -> str | None:
    for binding in facts.bindings_of(name):
        loop = facts.common_loop(binding.node, call)
        if loop is None:
            continue
        if binding.kind == "augassign" and facts.kinds(name) == {kinds.NUMBER} or _counts(facts, loop, binding.node):
            return f"value of the loop counter `{name.id}` ({facts.line_name(loop.lineno)})"
        if _walks_numbers(facts, loop, binding.node):
            return f"value of the loop variable `{name.id}` ({facts.line_name(loop.lineno)})"
        if derived and binding.kind == "assign" and binding.value is not None \
                and _is_arithmetic(facts, binding.value):
            for source in _number_names(facts, binding.value):
                if _changing_name(facts, source, call, derived=False) is not None:
                    return f"value of `{name.id}`, computed from the loop variable `{source.id}` ({facts.line_name(loop.lineno)})"
    return None


def _walks_numbers(facts: FileFacts, loop: ast.AST, target: ast.AST) -> bool:
    """`for lr in np.geomspace(...)` / `for lr in [0.1, 0.05, ...]` (at least FEW_TRACES numbers)."""
    if not (isinstance(loop, (ast.For, ast.AsyncFor)) and loop.target is target):
        return False
    sequence = loop.iter
    if isinstance(sequence, ast.Name):
        bindings = facts.bindings_of(sequence)
        if len(bindings) == 1 and bindings[0].value is not None:
            sequence = bindings[0].value
    if isinstance(sequence, (ast.List, ast.Tuple)):
        return len(sequence.elts) >= FEW_TRACES and all(
            isinstance(e, ast.Constant) and type(e.value) in (int, float) for e in sequence.elts)
    return isinstance(sequence, ast.Call) and facts.resolve(sequence.func) in _FLOAT_SEQUENCES


def _is_arithmetic(facts: FileFacts, expr: ast.expr) -> bool:
    """Numbers, names, items and + - * / ** on them, int()/float(), and no tensor: still a Python number."""
    return not facts.kinds(expr) & {kinds.TENSOR, kinds.VARIABLE} and all(
        isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Subscript, ast.Load, ast.operator,
                       ast.unaryop))
        or (isinstance(n, ast.Call) and facts.resolve(n.func) in _NUMBER_CONVERSIONS)
        for n in ast.walk(expr))


def _number_names(facts: FileFacts, argument: ast.expr) -> list[ast.Name]:
    """The names whose Python value the argument is: `i`, `float(i)`, `i + 1`; not `tf.constant(i)`."""
    if isinstance(argument, ast.Name):
        return [argument]
    if isinstance(argument, ast.Call) and facts.resolve(argument.func) in _NUMBER_CONVERSIONS and argument.args:
        return _number_names(facts, argument.args[0])
    if isinstance(argument, ast.BinOp):
        return _number_names(facts, argument.left) + _number_names(facts, argument.right)
    return []


def _counts(facts: FileFacts, loop: ast.AST, target: ast.AST) -> bool:
    """`for i in range(...)` or the index of `for i, x in enumerate(...)`."""
    if not (isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.iter, ast.Call)):
        return False
    source = facts.resolve(loop.iter.func)
    if source == "builtins.range":
        return loop.target is target and not _few_iterations(loop.iter)
    return source == "builtins.enumerate" and isinstance(loop.target, ast.Tuple) \
        and bool(loop.target.elts) and loop.target.elts[0] is target


def _few_iterations(range_call: ast.Call) -> bool:
    """`range(3)`: fewer traces than TensorFlow's own retracing warning threshold; bounded, so fine."""
    numbers = [a.value for a in range_call.args if isinstance(a, ast.Constant) and type(a.value) is int]
    if len(numbers) != len(range_call.args) or not 1 <= len(numbers) <= 3:
        return False
    return len(range(*numbers)) < FEW_TRACES


def _new_plain_object(facts: FileFacts, argument: ast.expr, tf_call: TfFunctionCall,
                      object_lines: dict[int, int]) -> str | None:
    """`f(Config())` repeated (in a loop, or at a second call site) with a plain Python class."""
    if not isinstance(argument, ast.Call):
        return None
    cls = facts.called_class(argument)
    if cls is None or not _plain_class(facts, cls, 0):
        return None
    in_loop = bool(facts.loops_around(tf_call.call))
    earlier = object_lines.get(id(tf_call.identity), tf_call.call.lineno) < tf_call.call.lineno
    return f"new `{cls.name}` instance (compared by identity)" if in_loop or earlier else None


def _first_object_lines(facts: FileFacts, calls: list[TfFunctionCall]) -> dict[int, int]:
    """For each tf.function object (by identity), the first line that calls it with a new instance of a
    class of this file: found once, not by scanning every call again for each argument."""
    lines: dict[int, int] = {}
    for call in calls:
        if any(facts.called_class(a) is not None for a in call.arguments.values() if isinstance(a, ast.Call)):
            key = id(call.identity)
            lines[key] = min(lines.get(key, call.call.lineno), call.call.lineno)
    return lines


def _plain_class(facts: FileFacts, cls: ClassInfo, depth: int) -> bool:
    """A class of this file with no trace type: not Keras/tf.Module, no decorators, no __eq__/__hash__."""
    if depth > 8 or cls.node.decorator_list or cls.node.keywords or facts.class_kind(cls) != kinds.OBJECT:
        return False
    if any(name in cls.methods for name in _TRACE_IDENTITY_METHODS):
        return False
    for base in cls.node.bases:
        if isinstance(base, ast.Name) and base.id == "object":
            continue
        local = [b for b in facts.bindings_of(base) if b.kind == "class"] if isinstance(base, ast.Name) else []
        base_info = facts.class_info(local[0].node) if local else None
        if base_info is None or not _plain_class(facts, base_info, depth + 1):
            return False
    return True


def _number_for(facts: FileFacts) -> ValueOf:
    """The Python number an argument is, for a parameter the function only uses as a tensor (else None)."""
    def number(tf_call: TfFunctionCall, parameter: str, argument: ast.expr) -> tuple[object] | None:
        value = _number_literal(argument)
        if value is None or not _only_tensor_uses(facts, tf_call.function, parameter):
            return None
        return (value,)
    return number


def _number_literal(expr: ast.expr) -> object | None:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        inner = _number_literal(expr.operand)
        return -inner if isinstance(inner, (int, float)) else None  # type: ignore[operator]
    if isinstance(expr, ast.Constant) and type(expr.value) in (int, float):
        return expr.value
    return None


def _only_tensor_uses(facts: FileFacts, function: FunctionInfo, parameter: str) -> bool:
    """The parameter is given to a TensorFlow op and never needs its Python value (range, if, layer sizes)."""
    tensor_use = False
    for use in _parameter_uses(facts, function, parameter):
        parent = facts.parent(use)
        while isinstance(parent, (ast.UnaryOp, ast.BinOp)):  # `tf.exp(-rate)`: the op still gets it
            parent = facts.parent(parent)
        if isinstance(parent, ast.keyword):
            parent = facts.parent(parent)
        if isinstance(parent, ast.Call) and use is not parent.func:
            qualified = facts.resolve(parent.func) or ""
            if qualified == "tensorflow.print" or kinds.TENSOR in facts.kinds(parent):
                tensor_use = tensor_use or qualified != "tensorflow.print"
                continue
            if qualified != "builtins.print":
                return False
        elif isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Subscript, ast.Compare, ast.BoolOp)):
            return False
    return tensor_use
