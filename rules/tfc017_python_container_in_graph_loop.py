"""TFC017: appending to or assigning into a Python list or dict inside a graph (AutoGraph) loop."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine import kinds
from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_GROWING_METHODS = {kinds.LIST: frozenset({"append", "extend", "insert"}),
                    kinds.DICT: frozenset({"update", "setdefault"})}
_EMPTY_CONSTRUCTORS = frozenset({"builtins.list", "builtins.dict", "collections.defaultdict",
                                 "collections.OrderedDict"})


class PythonContainerInGraphLoop(Rule):
    """Growing a Python list or dict inside a loop that AutoGraph turns into a graph loop.

    ## What it does
    Finds `lst.append(...)` (also `extend`, `insert`, `lst += [...]`), `d.update(...)`,
    `d.setdefault(...)`, and `container[key] = value` with a new key, inside a `for` over
    `tf.range`/a tensor/a dataset or a `while` on a tensor in graph code.

    ## Why is this bad
    AutoGraph turns such a loop into a `tf.while_loop` whose body is traced once. A Python list or
    dict is not part of the graph: the append happens once, while tracing, and the loop cannot carry a
    structure that grows, so the code raises or keeps only the traced placeholder instead of one value
    per iteration. This is reported as an error because the result is wrong or the function fails.

    ## Example
    ```python
    @tf.function
    def f(x):
        outputs = []
        for i in tf.range(x.shape[0]):
            outputs.append(x[i] * 2)
        return tf.stack(outputs)
    ```

    ## Use instead
    ```python
    @tf.function
    def f(x):
        outputs = tf.TensorArray(tf.float32, size=x.shape[0])
        for i in tf.range(x.shape[0]):
            outputs = outputs.write(i, x[i] * 2)
        return outputs.stack()
    ```
    """

    code = "TFC017"
    name = "python-container-in-graph-loop"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    outputs = []\n    for i in tf.range(10):\n"
        "        outputs.append(x * tf.cast(i, tf.float32))\n    return tf.stack(outputs)\n",
        "import tensorflow as tf\n@tf.function\ndef f():\n    seen = {}\n    for batch in tf.data.Dataset.range(6).batch(2):\n"
        "        seen[len(seen)] = batch\n    return seen\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    acc = list()\n    i = tf.constant(0)\n"
        "    while i < 10:\n        acc.extend([x])\n        i += 1\n    return acc\n",
        "import tensorflow as tf\nclass Rnn(tf.Module):\n    def __init__(self):\n        self.states = []\n"
        "    @tf.function\n    def __call__(self, x):\n        for t in tf.range(tf.shape(x)[0]):\n"
        "            self.states.append(x[t])\n        return x\n",
        "import tensorflow as tf\n@tf.function(input_signature=[tf.TensorSpec([None])])\ndef f(xs):\n"
        "    by_step = dict()\n    for i in tf.range(3):\n        by_step[i] = xs\n    return xs\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    ys = []\n    for i in tf.range(5):\n"
        "        ys += [x * 2]\n    return ys\n",
        # From a real issue: nested loops over a tensor, outer lists.
        "import tensorflow as tf\n@tf.function\ndef func():\n    A = tf.convert_to_tensor([[1,1.,1],[1,3,1]])\n"
        "    B = tf.convert_to_tensor([[1,1.,1]])\n    S = []\n    for b in B:\n        for a in A:\n"
        "            S.append(tf.reduce_sum(a * b))\n    return S\n",
    )
    must_not_flag = (
        # Reference: accumulate with tf.TensorArray.
        "import tensorflow as tf\n@tf.function\ndef dynamic_rnn(rnn_step, input_data, initial_state):\n"
        "  # [batch, time, features] -> [time, batch, features]\n  input_data = tf.transpose(input_data, [1, 0, 2])\n"
        "  max_seq_len = input_data.shape[0]\n\n  states = tf.TensorArray(tf.float32, size=max_seq_len)\n"
        "  state = initial_state\n  for i in tf.range(max_seq_len):\n    state = rnn_step(input_data[i], state)\n"
        "    states = states.write(i, state)\n  return tf.transpose(states.stack(), [1, 0, 2])\n",
        # A Python loop (unrolled at trace time) may build a list.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    outputs = []\n    for i in range(3):\n"
        "        outputs.append(x * i)\n    return tf.stack(outputs)\n",
        # Not graph code.
        "import tensorflow as tf\ndef f(ds):\n    out = []\n    for batch in ds:\n        out.append(batch)\n"
        "    return out\n",
        # A fixed structure updated in place keeps its shape: AutoGraph carries it as a loop variable.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    state = {'h': x}\n    for i in tf.range(3):\n"
        "        state['h'] = state['h'] * 2\n    return state['h']\n",
        # Loops over Python lists of tensors (TensorFlow internals, list-returning ops) are Python loops.
        "import tensorflow as tf\nfrom tensorflow.python.util import nest\n@tf.function\ndef f(x):\n    out = []\n"
        "    for o in nest.flatten(x):\n        out.append(tf.identity(o))\n    return out\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    out = []\n    for row in tf.unstack(x):\n"
        "        out.append(row * 2)\n    return tf.stack(out)\n",
        # A list made afresh in each iteration (a shape built by a Python loop, from a real Keras layer).
        "import tensorflow as tf\n@tf.function\ndef f(x, m, n):\n    out = tf.TensorArray(tf.float32, size=0, "
        "dynamic_size=True)\n    for b in tf.range(tf.shape(x)[0]):\n        c_shape = [1]\n"
        "        for d in range(1, n):\n            c_shape.insert(0, m)\n"
        "        out = out.write(b, tf.reshape(x[b], c_shape))\n    return out.stack()\n",
        # A `call` of a file written for Keras 3 is not converted: its `for` over a tensor is no graph loop
        # (it raises, TFC021).
        "import tensorflow as tf\nimport keras\nclass Rows(keras.layers.Layer):\n    def call(self, x):\n"
        "        out = []\n        for row in tf.identity(x):\n            out.append(row * 2)\n"
        "        return keras.ops.stack(out)\n",
        # A list built in a nested function defined in the loop is that function's business.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    for i in tf.range(3):\n"
        "        fns = lambda: [].append(i)\n    return x\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        reported: set[ast.AST] = set()  # nested graph loops: report at the outer one only (visited first)
        for loop, function in facts.graph_nodes(ast.For, ast.AsyncFor, ast.While):
            if facts.surely_runs_as_written(function) or not facts.surely_graph_loop(loop):
                continue  # without AutoGraph (a Keras 3 `call`) no loop is a graph loop
            for node, container, kind in _container_growth(facts, loop, function):
                if node in reported:
                    continue
                reported.add(node)
                yield self.finding(
                    facts, node, f"`{facts.text(container)}` is a Python {kind} grown inside a graph loop "
                    f"({facts.line_name(loop.lineno)}): the change happens once, while tracing; use tf.TensorArray",
                    function=function)


def _container_growth(facts: FileFacts, loop: ast.AST,
                      function: FunctionInfo) -> Iterator[tuple[ast.AST, ast.expr, str]]:
    """Appends/updates on Python lists and dicts, and subscript assignments with new keys, in the loop body."""
    body = [n for n in function.nodes if n is not loop and facts.in_loop_body(n, loop)]
    for node in body:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            kind = _container_kind(facts, node.func.value, loop)
            if kind is not None and node.func.attr in _GROWING_METHODS[kind]:
                yield node, node.func.value, kind
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) \
                and _container_kind(facts, node.target, loop) == kinds.LIST:
            yield node, node.target, kinds.LIST  # `outputs += [y]`
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and _new_key(facts, target, loop):
                    kind = _container_kind(facts, target.value, loop)
                    if kind is not None:
                        yield node, target.value, kind


def _container_kind(facts: FileFacts, expr: ast.expr, loop: ast.AST) -> str | None:
    """`list` or `dict` when every value the expression can hold is that kind of container, and the
    container lives across iterations (one made afresh inside the loop body is that iteration's own)."""
    if isinstance(expr, ast.Name) and all(facts.in_loop_body(b.node, loop) for b in facts.bindings_of(expr)):
        return None
    found = facts.kinds(expr)
    for kind in (kinds.LIST, kinds.DICT):
        if found == {kind}:
            return kind
    return None


def _new_key(facts: FileFacts, target: ast.Subscript, loop: ast.AST) -> bool:
    """A key that changes every iteration (a name the loop binds or increments, `len(d)`) or an empty container."""
    key_names = {n.id for n in ast.walk(target.slice) if isinstance(n, ast.Name)}
    loop_bound = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if key_names & loop_bound or any(isinstance(n, ast.Call) and facts.resolve(n.func) == "builtins.len"
                                     for n in ast.walk(target.slice)):
        return True
    return _starts_empty(facts, target.value)


def _starts_empty(facts: FileFacts, container: ast.expr) -> bool:
    if not isinstance(container, ast.Name):
        return False
    created = [b.value for b in facts.bindings_of(container) if b.value is not None]
    return bool(created) and all(
        (isinstance(v, (ast.List, ast.Dict)) and not (v.elts if isinstance(v, ast.List) else v.keys))
        or (isinstance(v, ast.Call) and not v.args and facts.resolve(v.func) in _EMPTY_CONSTRUCTORS)
        for v in created)
