"""TFC030: a tf.function called in a loop with tensors or arrays whose shape changes per iteration."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import Binding
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

# Keywords of tf.function that stop a new shape from meaning a new trace.
_RELAXING = frozenset({"input_signature", "reduce_retracing", "experimental_relax_shapes"})
# NumPy calls whose result has as many rows as the Python list they are given has items (or more).
_FROM_LIST = frozenset(f"numpy.{name}" for name in (
    "array", "asarray", "vstack", "hstack", "stack", "concatenate", "row_stack", "column_stack"))
# Conversions that keep the shape of what they are given.
_SAME_SHAPE = frozenset({"tensorflow.convert_to_tensor", "tensorflow.constant", "numpy.float32", "numpy.asarray"})
# Dataset methods that keep the shapes of the batches they are given.
_SAME_BATCHES = frozenset({"prefetch", "shuffle", "repeat", "cache", "take", "skip", "filter", "with_options"})
_DEPTH = 10  # steps followed from an argument to the list behind it (the quantum tutorial needs 8)


class RetraceChangingShape(Rule):
    """A tf.function called in a loop with tensors whose shape changes traces again for every new shape.

    ## What it does
    Finds calls, in a Python loop of eager code, of a tf.function with no `input_signature` and no
    `reduce_retracing=True`, given a value whose shape changes from one iteration to the next:
    - a batch of a `padded_batch` dataset without fixed `padded_shapes` (each batch is padded to its
      own longest element, so its length changes), iterated by the loop;
    - a NumPy array (or a tensor made of one) built in the loop from a Python list that grows in a
      `while` loop or a loop ended by `break`: one row per step of an episode, a buffer flushed
      when an episode ends.

    A dataset with fixed shapes (`padded_shapes` given in full, `batch(drop_remainder=True)`) and a
    last partial batch (`batch()` without `drop_remainder`: two traces in all) are not reported.

    ## Why is this bad
    A tf.function keys its traces on the shapes of its tensor and array arguments. Without an
    `input_signature` or `reduce_retracing=True` it does not relax a shape that changes: every new
    length is a new trace (TensorFlow 2.21: a `padded_batch` of 199 sentences in batches of 8 traces
    24 times; 20 episodes of different lengths trace 20 times). Tracing runs the Python function
    again and builds a new graph, which is slow and keeps every graph in memory. Results are right,
    so the severity is WARNING.

    ## Example
    ```python
    @tf.function
    def train_step(inp, tar):
        ...

    dataset = examples.padded_batch(64)
    for inp, tar in dataset:
        train_step(inp, tar)
    ```

    ## Use instead
    ```python
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64),
                                  tf.TensorSpec([None, None], tf.int64)])
    def train_step(inp, tar):
        ...
    ```
    Or `@tf.function(reduce_retracing=True)`, or give the dataset fixed shapes
    (`padded_batch(64, padded_shapes=([MAX_LEN], [MAX_LEN]))`).
    """

    code = "TFC030"
    name = "retrace-changing-shape"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        # Batches of a padded_batch without padded_shapes (dragen1860/TensorFlow-2.x-Tutorials c3f3a2b
        # 21-CN-EN-Translation-BERT: the training loop of transformer_train.py:101-151 over the dataset of tokenizer.py:395).
        "import tensorflow as tf\n@tf.function\ndef train_step(inp, tar):\n    return tf.reduce_sum(inp) + tf.reduce_sum(tar)\n"
        "train_dataset = train_examples.map(encode)\n"
        "train_dataset = train_dataset.shuffle(20000).padded_batch(64, padded_shapes=([-1], [-1]), drop_remainder=True)\n"
        "train_dataset = train_dataset.prefetch(tf.data.experimental.AUTOTUNE)\nfor epoch in range(20):\n"
        "    for (batch, (inp, tar)) in enumerate(train_dataset):\n        train_step(inp, tar)\n",
        "import tensorflow as tf\ndef make_dataset(examples):\n    return examples.padded_batch(32)\n"
        "step = tf.function(lambda x: tf.reduce_sum(x))\nfor x in make_dataset(examples):\n    step(x)\n",
        # A buffer of one row per step, flushed every 10 steps or when the episode ends (tensorlayer/TensorLayer
        # 9d1e5a9 examples/reinforcement_learning/tutorial_A3C.py:195-239, cut down).
        "import numpy as np\nimport tensorflow as tf\nclass ACNet:\n    @tf.function\n"
        "    def update_global(self, buffer_s, buffer_a):\n        return tf.reduce_sum(buffer_s)\n"
        "class Worker:\n    def __init__(self):\n        self.AC = ACNet()\n    def work(self):\n"
        "        buffer_s, buffer_a = [], []\n        while not COORD.should_stop():\n            s = self.env.reset()\n"
        "            while True:\n                a = self.AC.get_action(s)\n                s_, r, done, _ = self.env.step(a)\n"
        "                buffer_s.append(s)\n                buffer_a.append(a)\n"
        "                if total_step % 10 == 0 or done:\n"
        "                    buffer_s = tf.convert_to_tensor(np.vstack(buffer_s))\n"
        "                    buffer_a = tf.convert_to_tensor(np.vstack(buffer_a))\n"
        "                    self.AC.update_global(buffer_s, buffer_a)\n                    buffer_s, buffer_a = [], []\n"
        "                s = s_\n                if done:\n                    break\n",
        # Episodes played until they end, their steps concatenated (tensorflow/quantum 0f2e9a4
        # docs/tutorials/quantum_reinforcement_learning.ipynb, cells 41, 49 and 52, cut down).
        "import numpy as np\nimport tensorflow as tf\nfrom collections import defaultdict\n"
        "def gather_episodes(model, n_episodes):\n    trajectories = [defaultdict(list) for _ in range(n_episodes)]\n"
        "    done = [False] * n_episodes\n    while not all(done):\n        for i in range(n_episodes):\n"
        "            trajectories[i]['states'].append(step(i))\n    return trajectories\n"
        "@tf.function\ndef reinforce_update(states, model):\n    return model(states)\n"
        "for batch in range(n_episodes // batch_size):\n    episodes = gather_episodes(model, batch_size)\n"
        "    states = np.concatenate([ep['states'] for ep in episodes])\n    reinforce_update(states, model)\n",
    )
    must_not_flag = (
        # Fixed shapes: padded_shapes given in full, batches of fixed elements without a remainder.
        "import tensorflow as tf\n@tf.function\ndef train_step(inp):\n    return tf.reduce_sum(inp)\n"
        "ds = examples.padded_batch(64, padded_shapes=[128], drop_remainder=True)\nfor inp in ds:\n    train_step(inp)\n",
        "import tensorflow as tf\n@tf.function\ndef train_step(inp):\n    return tf.reduce_sum(inp)\n"
        "ds = examples.batch(64, drop_remainder=True)\nfor inp in ds:\n    train_step(inp)\n",
        # Only the last batch is partial: two traces in all.
        "import tensorflow as tf\n@tf.function\ndef train_step(inp):\n    return tf.reduce_sum(inp)\n"
        "ds = tf.data.Dataset.from_tensor_slices(x).batch(64)\nfor inp in ds:\n    train_step(inp)\n",
        # A signature, or reduce_retracing: one relaxed trace.
        "import tensorflow as tf\n@tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64)])\n"
        "def train_step(inp):\n    return tf.reduce_sum(inp)\nfor inp in examples.padded_batch(64):\n    train_step(inp)\n",
        "import tensorflow as tf\n@tf.function(reduce_retracing=True)\ndef train_step(inp):\n    return tf.reduce_sum(inp)\n"
        "for inp in examples.padded_batch(64):\n    train_step(inp)\n",
        # A mapped padded batch may have any shape; the counter of enumerate is a number.
        "import tensorflow as tf\n@tf.function\ndef train_step(inp):\n    return tf.reduce_sum(inp)\n"
        "for inp in examples.padded_batch(64).map(crop_to_128):\n    train_step(inp)\n",
        # A list filled a fixed number of times, and a batch sampled from a growing buffer: fixed shapes.
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef update(states):\n    return tf.reduce_sum(states)\n"
        "for episode in range(100):\n    states = []\n    for t in range(200):\n        states.append(env.step(t))\n"
        "    update(np.array(states))\n",
        "import random\nimport numpy as np\nimport tensorflow as tf\n@tf.function\ndef update(batch):\n"
        "    return tf.reduce_sum(batch)\nbuffer = []\nwhile True:\n    buffer.append(env.step())\n"
        "    if len(buffer) > 64:\n        update(np.array(random.sample(buffer, 64)))\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        if not facts.tf_function_calls and all(facts.decorated_tf_function(info) is None for info in facts.functions):
            return  # no tf.function in the file (most files): no call of one to follow
        for call, _ in facts.calls:
            if facts.enclosing_loop(call) is None or facts.in_graph_code(call):
                continue
            name = _shape_keyed_function(facts, call)
            if name is None:
                continue
            for argument in [*call.args, *(k.value for k in call.keywords)]:
                reason = _changing_shape(facts, argument, 0)
                if reason is not None:
                    yield self.finding(facts, argument, f"`{name}` is traced again for every new shape of this "
                                       f"argument, {reason}; give the tf.function an input_signature with None "
                                       "for the changing axis, or reduce_retracing=True")
                    break


def _shape_keyed_function(facts: FileFacts, call: ast.Call) -> str | None:
    """The name of the tf.function `call` calls when a new shape means a new trace (no input_signature,
    no reduce_retracing): a decorated def or method (also on an object held on `self`), or a name
    bound to `tf.function(g)`."""
    found = facts.tf_function_object(call.func)
    if found is not None:
        function, identity, _ = found
        creation = facts.decorated_tf_function(function) if identity is function.node else identity
    else:
        targets = facts.function_target(call.func)
        if len(targets) != 1:
            return None
        function, creation = targets[0], facts.decorated_tf_function(targets[0])
        if creation is None:
            return None
    relaxed = isinstance(creation, ast.Call) and any(
        k.arg in _RELAXING and not (isinstance(k.value, ast.Constant) and not k.value.value) for k in creation.keywords)
    return None if relaxed else ast.unparse(call.func)


def _changing_shape(facts: FileFacts, expr: ast.expr, depth: int) -> str | None:
    """Why `expr`, an argument or what it was assigned, changes shape from one call to the next."""
    if depth > _DEPTH:
        return None
    if isinstance(expr, ast.Call):
        qualified = facts.resolve(expr.func)
        if qualified in _FROM_LIST and expr.args and _grows_in_open_loop(facts, expr.args[0], depth + 1):
            return f"a NumPy array of `{ast.unparse(expr.args[0])}`, a list as long as a loop that runs until the data ends it"
        if qualified in _SAME_SHAPE and expr.args or isinstance(expr.func, ast.Attribute) and expr.func.attr == "astype":
            return _changing_shape(facts, expr.args[0] if qualified in _SAME_SHAPE else expr.func.value, depth + 1)
        return None
    if not isinstance(expr, ast.Name):
        return None
    binding = _reaching(facts, expr)
    if binding is None:
        return None
    if binding.kind == "for":
        source = _iterated_dataset(facts, binding)
        if source is not None and _padded_to_each_batch(facts, source, depth + 1):
            return f"a batch of `{ast.unparse(source)}`, padded to the longest element of each batch"
        return None
    value = _assigned_value(facts, binding)
    return _changing_shape(facts, value, depth + 1) if value is not None else None


def _reaching(facts: FileFacts, name: ast.Name) -> Binding | None:
    """The last binding of `name` made before it is read, in the same function (source order: a
    rebinding later in a loop body is not the one this read sees on its first iteration)."""
    function = facts.function_of(name)
    earlier = [b for b in facts.bindings_of(name) if facts.function_of(b.node) is function
               and _position(b.node) < _position(name) and not (b.value is not None and facts.is_inside(name, b.value))]
    return max(earlier, key=lambda b: _position(b.node), default=None)


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)  # a parameter's `arguments` has none


def _assigned_value(facts: FileFacts, binding: Binding) -> ast.expr | None:
    """What an assignment gives the name: its value, or its item of `a, b = [], []`."""
    if binding.kind != "assign":
        return None
    if binding.value is not None:
        return binding.value
    target, statement = facts.parent(binding.node), facts.parent(facts.parent(binding.node))
    if isinstance(target, ast.Tuple) and isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Tuple) \
            and len(statement.value.elts) == len(target.elts) and binding.node in target.elts:
        return statement.value.elts[target.elts.index(binding.node)]  # type: ignore[arg-type]
    return None


def _iterated_dataset(facts: FileFacts, binding: Binding) -> ast.expr | None:
    """What a loop target iterates (`for x in ds`, `for i, x in enumerate(ds)`, `ds.take(n)` too),
    when the name is an element, not enumerate's counter."""
    loop = facts.parent(binding.node)
    while loop is not None and not isinstance(loop, (ast.For, ast.comprehension)):
        loop = facts.parent(loop)
    if loop is None:
        return None
    source = loop.iter
    if isinstance(source, ast.Call) and facts.resolve(source.func) == "builtins.enumerate" and source.args:
        counter = loop.target.elts[0] if isinstance(loop.target, ast.Tuple) and loop.target.elts else loop.target
        if facts.is_inside(binding.node, counter) or binding.node is counter:
            return None
        source = source.args[0]
    return source


def _padded_to_each_batch(facts: FileFacts, expr: ast.expr, depth: int) -> bool:
    """A dataset whose batches come from `padded_batch` without fixed `padded_shapes`, through methods that
    keep batch shapes, names and functions of this file that return it."""
    if depth > _DEPTH:
        return False
    if isinstance(expr, ast.Name):
        binding = _reaching(facts, expr)
        value = _assigned_value(facts, binding) if binding is not None else None
        return value is not None and _padded_to_each_batch(facts, value, depth + 1)
    if not isinstance(expr, ast.Call):
        return False
    if isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "padded_batch":
            return _open_padded_shapes(expr)
        if expr.func.attr in _SAME_BATCHES:
            return _padded_to_each_batch(facts, expr.func.value, depth + 1)
    return any(_padded_to_each_batch(facts, value, depth + 1) for value in _returned(facts, expr))


def _returned(facts: FileFacts, call: ast.Call) -> list[ast.expr]:
    """What the function of this file that `call` calls returns (nothing for any other call)."""
    function = facts.called_function(call)
    return [] if function is None else [node.value for node in function.nodes if isinstance(node, ast.Return)
                                         and node.value is not None and facts.function_of(node) is function]


def _open_padded_shapes(call: ast.Call) -> bool:
    """`padded_batch(n)` or `padded_batch(n, padded_shapes=([-1], [None]))`: some axis padded per batch."""
    shapes = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "padded_shapes"), None)
    if shapes is None:
        return True
    return any(isinstance(node, ast.Constant) and (node.value is None or node.value == -1)
               or isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) for node in ast.walk(shapes))


def _grows_in_open_loop(facts: FileFacts, expr: ast.expr, depth: int) -> bool:
    """A Python list (or the items of one) appended to in a `while` loop or in a loop that may `break`:
    its length is decided by the data (the steps of an episode). Followed through subscripts,
    comprehensions over it, and functions of this file that return it."""
    if depth > _DEPTH:
        return False
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
        return _grows_in_open_loop(facts, expr.elt, depth + 1)
    if isinstance(expr, ast.Subscript):
        return _grows_in_open_loop(facts, expr.value, depth + 1)
    if isinstance(expr, ast.Call):
        return any(_grows_in_open_loop(facts, value, depth + 1) for value in _returned(facts, expr))
    if not isinstance(expr, ast.Name):
        return False
    for binding in facts.bindings_of(expr):
        if binding.kind == "for" and isinstance(facts.parent(binding.node), ast.comprehension):
            if _grows_in_open_loop(facts, facts.parent(binding.node).iter, depth + 1):  # type: ignore[union-attr]
                return True
            continue
        value = _assigned_value(facts, binding)
        if _new_list(facts, value) and _appended_in_open_loop(facts, expr) \
                or isinstance(value, ast.Call) and _grows_in_open_loop(facts, value, depth + 1):
            return True
    return False


def _new_list(facts: FileFacts, value: ast.expr | None) -> bool:
    """`[]`, `list()`, or a comprehension of `[]` / `defaultdict(list)` (one list per episode)."""
    if isinstance(value, ast.List):
        return not value.elts
    if isinstance(value, ast.ListComp):
        return _new_list(facts, value.elt)
    return isinstance(value, ast.Call) and facts.resolve(value.func) in ("builtins.list", "collections.defaultdict") \
        and (not value.args or facts.resolve(value.args[0]) == "builtins.list")


def _appended_in_open_loop(facts: FileFacts, name: ast.Name) -> bool:
    """Some `name.append(...)` (or `name[i][k].append(...)`) of the same binding runs in a `while` loop or
    in a `for` loop with a `break`."""
    scope = facts.binding_scope(name)
    for use in facts.loads_under(facts.function_of(name)).get(name.id, ()):
        if facts.binding_scope(use) is not scope:
            continue
        node, parent = use, facts.parent(use)
        while isinstance(parent, ast.Subscript) and parent.value is node:
            node, parent = parent, facts.parent(parent)
        if isinstance(parent, ast.Attribute) and parent.attr in ("append", "extend", "insert") \
                and any(_open_loop(facts, loop) for loop in facts.loops_around(use)):
            return True
    return False


def _open_loop(facts: FileFacts, loop: ast.AST) -> bool:
    """A `while` loop, or a `for` loop whose own body can `break`: it runs as long as the data says."""
    return isinstance(loop, ast.While) or any(
        isinstance(node, ast.Break) and facts.enclosing_loop(node) is loop for node in ast.walk(loop))
