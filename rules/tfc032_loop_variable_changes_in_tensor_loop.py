"""TFC032: a variable of a tensor loop changes dtype, shape, structure, or becomes None in the body, in
code AutoGraph converts."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

# Constructors whose result has the static shape their literal arguments give.
_SHAPED = frozenset({"tensorflow.zeros", "tensorflow.ones", "tensorflow.constant", "tensorflow.fill"})
_FLOAT_DTYPES = frozenset({"tensorflow.float16", "tensorflow.bfloat16", "tensorflow.float32", "tensorflow.float64"})
_ACCUMULATING = (ast.Add, ast.Sub, ast.Mult)


class LoopVariableChangesInTensorLoop(Rule):
    """A variable of a loop on a tensor must keep its dtype, shape and structure: tracing raises.

    ## What it does
    Finds, in code that AutoGraph converts (a tf.function, a function it calls, a function traced by
    `tf.data`), a `for` over a tensor (`tf.range`, a dataset) or a `while` on a tensor whose body
    - adds float arithmetic to a name that starts as a Python int (`total = 0`, then
      `total += 0.5 * x`, `total = total + x / n`, `+= tf.cast(x, tf.float32)`);
    - grows a tensor made with a literal shape (`acc = tf.zeros([0])`) with
      `acc = tf.concat([acc, ...], axis)`, without `tf.autograph.experimental.set_loop_options`;
    - rebinds a name with another nested structure than it had before the loop (a tuple of 1, then of
      2; a tensor, then a tuple), when the name is read;
    - sets a name to None last in the body, when the name is read after the loop or at the top of
      the body.
    A `while` that adds a float literal (`n += 0.5`) is TFC024's.

    ## Why is this bad
    AutoGraph turns the loop into `tf.while_loop`, and every name the body rebinds and something reads
    is a loop variable: a tensor whose dtype, shape and nested structure must be the same before the
    loop and after each iteration (None is no tensor). TensorFlow checks this while tracing, so the
    function fails for every input, although the same loop runs eagerly and as a Python loop.

    Checked against TensorFlow 2.21 (every example below run from a file): the must-flag examples
    raise `TypeError: Input 'y' of 'AddV2' Op has type float32 that does not match type int32 of
    argument 'x'.` (in a `for` over `tf.range` or a dataset and in a tensor `while`), `ValueError: 'acc' has shape
    (0,) before the loop, but shape (1,) after one iteration. Use
    tf.autograph.experimental.set_loop_options to set shape invariants.` (also (2, 0) and (2, 1), and
    (0,) and (None,)), `TypeError: 'state' does not have the same nested structure after one
    iteration.`, and `ValueError: 'last' is None at the end of the iteration.` The must-not-flag
    examples run: a float start, `set_loop_options(shape_invariants=…)`, a Python `range` loop (unrolled,
    where each iteration may differ), a name None before the loop (AutoGraph defines it), a None not
    read afterwards.

    ## Example
    ```python
    @tf.function
    def f(x, n):
        total = 0
        acc = tf.zeros([0])
        for i in tf.range(n):
            total += 0.5 * x                      # TypeError: ... float32 ... int32
            acc = tf.concat([acc, [x]], axis=0)   # ValueError: 'acc' has shape (0,) before the loop ...
        return total, acc
    ```

    ## Use instead
    ```python
    @tf.function
    def f(x, n):
        total = 0.0
        acc = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        for i in tf.range(n):
            total += 0.5 * x
            acc = acc.write(i, x)
        return total, acc.stack()
    ```
    Or keep `tf.concat` and declare the growing dimension:
    `tf.autograph.experimental.set_loop_options(shape_invariants=[(acc, tf.TensorShape([None]))])`
    as the first statement of the body.
    """

    code = "TFC032"
    name = "loop-variable-changes-in-tensor-loop"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # docs/coverage.md F6, F7, F10, F13 (issue 37).
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    total = 0\n    for i in tf.range(n):\n"
        "        total += 0.5 * x\n    return total\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    total = 0\n    for i in tf.range(n):\n"
        "        total = total + x / 2\n    return total\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f():\n    total = 0\n    for x in tf.data.Dataset.range(3):\n"
        "        total += 0.5 * tf.cast(x, tf.float32)\n    return total\nf()\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    total = 0\n    i = tf.constant(0)\n    while i < n:\n"
        "        total += 0.5 * x\n        i += 1\n    return total\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    acc = tf.zeros([0])\n    for i in tf.range(n):\n"
        "        acc = tf.concat([acc, [x]], axis=0)\n    return acc\nf(tf.constant(1.0), tf.constant(2))\n",
        # tensorflow/tensorflow#56296's loop (its reporter's `f`) without the set_loop_options call it needed.
        "import tensorflow as tf\n@tf.function(autograph=True)\ndef f():\n    v = tf.constant((0,))\n"
        "    for i in tf.range(3):\n        v = tf.concat((v, [i]), 0)\n    return v\nf()\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    acc = tf.constant([], dtype=tf.float32)\n"
        "    for i in tf.range(n):\n        acc = tf.concat([acc, x[:n]], 0)\n    return acc\n"
        "f(tf.constant([1.0, 2.0]), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    acc = tf.zeros([2, 0])\n    for i in tf.range(n):\n"
        "        acc = tf.concat([acc, tf.ones([2, 1])], axis=1)\n    return acc\nf(tf.constant(1.0), tf.constant(2))\n",
        # F11, checked in TF 2.21: ValueError "The two structures don't have the same nested structure".
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    state = (x, x)\n    for i in tf.range(n):\n"
        "        tf.autograph.experimental.set_loop_options(shape_invariants=[(state, tf.TensorShape([None]))])\n"
        "        state = (state[0] + 1.0, state[1])\n    return state\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    state = (x,)\n    for i in tf.range(n):\n"
        "        state = (x, x)\n    return state\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    last = tf.identity(x)\n    for i in tf.range(n):\n"
        "        last = None\n    return last\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    last = tf.identity(x)\n    for i in tf.range(n):\n"
        "        y = last * 2\n        last = None\n    return x\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    last = x\n    for i in tf.range(n):\n"
        "        last = None\n    return last\nf(tf.constant(1.0), tf.constant(2))\n",
    )
    must_not_flag = (
        # F11's invariant nested like its variable: runs (TF 2.21).
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    state = (x, x)\n    for i in tf.range(n):\n"
        "        tf.autograph.experimental.set_loop_options(\n"
        "            shape_invariants=[(state, (tf.TensorShape([None]), tf.TensorShape([None])))])\n"
        "        state = (state[0] + 1.0, state[1])\n    return state\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    total = 0.0\n    for i in tf.range(n):\n"
        "        total += 0.5 * x\n    return total\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    total = 0\n    for i in range(3):\n"
        "        total += 0.5 * x\n    return total\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    acc = tf.zeros([0])\n    for i in tf.range(n):\n"
        "        tf.autograph.experimental.set_loop_options(shape_invariants=[(acc, tf.TensorShape([None]))])\n"
        "        acc = tf.concat([acc, [x]], axis=0)\n    return acc\nf(tf.constant(1.0), tf.constant(2))\n",
        # tensorflow/tensorflow#56296 as written: the shape invariant declared.
        "import tensorflow as tf\n@tf.function(autograph=True)\ndef f():\n    v = tf.constant((0,))\n    for i in tf.range(3):\n"
        "        tf.autograph.experimental.set_loop_options(\n            shape_invariants=[(v, tf.TensorShape([None]))]\n"
        "        )\n        v = tf.concat((v, [i]), 0)\n    return v\nf()\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    acc = tf.zeros([0])\n    for i in range(3):\n"
        "        acc = tf.concat([acc, [x]], axis=0)\n    return acc\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    last = None\n    for i in tf.range(n):\n        last = x * 2\n"
        "    return last\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    last = None\n    for i in tf.range(n):\n        last = x * 2\n"
        "        last = None\n    return x\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    state = (x, x)\n    for i in tf.range(n):\n"
        "        state = (state[1], state[0] + x)\n    return state\nf(tf.constant(1.0), tf.constant(2))\n",
        # Keras 3 runs `call` unconverted: the loop over tf.range is a Python loop over a tensor there.
        "import tensorflow as tf\nimport keras\nclass L(keras.layers.Layer):\n    def call(self, x):\n        total = 0\n"
        "        for i in tf.range(3):\n            total += 0.5 * x\n        return total\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for loop, function in facts.graph_nodes(ast.For, ast.While):
            if not facts.autograph_converted(function) or not facts.surely_graph_loop(loop) \
                    or facts.in_eager_only_branch(loop, function):
                continue
            for statement in _rebindings(facts, loop, function):  # type: ignore[arg-type]
                target = statement.targets[0] if isinstance(statement, ast.Assign) else statement.target
                initial = _initial_value(facts, function, target.id, loop)  # type: ignore[attr-defined]
                if initial is None:
                    continue
                problem = _problem(facts, function, loop, statement, target.id, initial)  # type: ignore[attr-defined]
                if problem is not None:
                    yield self.finding(
                        facts, statement, f"`{target.id}` is a variable of the tensor loop at "  # type: ignore[attr-defined]
                        f"{facts.line_name(loop.lineno)} (a tf.while_loop once AutoGraph converts it), and {problem}",
                        function=function)
            yield from self._invariant_findings(facts, loop, function)

    def _invariant_findings(self, facts: FileFacts, loop: ast.For | ast.While,
                            function: FunctionInfo) -> Iterator[Finding]:
        """A `set_loop_options(shape_invariants=[(v, invariant)])` entry whose invariant is shaped unlike
        `v` before the loop: a `TensorShape` for a tuple, a tuple of another length (coverage F11)."""
        for name, invariant in _shape_invariants(facts, loop):
            initial = _initial_value(facts, function, name.id, loop)
            variable = facts.value_structure(initial) if initial is not None else None
            shape = _invariant_structure(facts, invariant)
            if variable is None or shape is None or not _nested_unlike(variable, shape):
                continue
            yield self.finding(
                facts, invariant, f"the shape invariant of `{name.id}` is {shape} where `{name.id}` is {variable} "
                "before the loop: tracing raises ValueError (The two structures don't have the same nested structure); "
                "give one TensorShape per tensor, nested like the variable",
                function=function)


def _rebindings(facts: FileFacts, loop: ast.For | ast.While, function: FunctionInfo) -> list[ast.Assign | ast.AugAssign]:
    """Assignments to a plain name in the loop's body, in `function`, outside any `if` on a tensor (TFC024's)."""
    found: list[ast.Assign | ast.AugAssign] = []
    for node in (n for statement in loop.body for n in ast.walk(statement)):
        if isinstance(node, ast.AugAssign):
            target = node.target
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        else:
            continue
        if isinstance(target, ast.Name) and facts.function_of(node) is function and not _under_tensor_if(facts, node, loop):
            found.append(node)
    return found


def _under_tensor_if(facts: FileFacts, node: ast.AST, loop: ast.AST) -> bool:
    for ancestor in facts.ancestors(node):
        if ancestor is loop:
            return False
        if isinstance(ancestor, (ast.If, ast.While)) and facts.is_single_tensor(ancestor.test):
            return True
    return False


_SEQUENCES = ("a tuple", "a list")


def _shape_invariants(facts: FileFacts, loop: ast.For | ast.While) -> Iterator[tuple[ast.Name, ast.expr]]:
    """(variable, invariant) of each `(name, invariant)` pair of a `set_loop_options(shape_invariants=[...])`
    call first in `loop`'s body."""
    first = loop.body[0] if loop.body else None
    call = first.value if isinstance(first, ast.Expr) else None
    if not (isinstance(call, ast.Call) and (facts.resolve(call.func) or "").endswith("set_loop_options")):
        return
    for keyword in call.keywords:
        if keyword.arg == "shape_invariants" and isinstance(keyword.value, (ast.List, ast.Tuple)):
            for pair in keyword.value.elts:
                if isinstance(pair, ast.Tuple) and len(pair.elts) == 2 and isinstance(pair.elts[0], ast.Name):
                    yield pair.elts[0], pair.elts[1]


def _invariant_structure(facts: FileFacts, invariant: ast.expr) -> str | None:
    """`a TensorShape`, or a tuple or list display of n, for a shape invariant; None when unknown."""
    if isinstance(invariant, ast.Call) and facts.resolve(invariant.func) == "tensorflow.TensorShape":
        return "a TensorShape"
    if isinstance(invariant, (ast.Tuple, ast.List)):
        return f"a {'tuple' if isinstance(invariant, ast.Tuple) else 'list'} of {len(invariant.elts)}"
    return None


def _nested_unlike(variable: str, shape: str) -> bool:
    """Whether a loop variable (`value_structure`) and its invariant nest differently: a sequence against a
    TensorShape, a tensor against a sequence, or sequences of other lengths (a tuple and a list of one
    length nest alike)."""
    if variable.startswith(_SEQUENCES):
        return shape == "a TensorShape" or variable.rsplit(" ", 1)[-1] != shape.rsplit(" ", 1)[-1]
    return variable.endswith("tensor") and shape.startswith(_SEQUENCES)  # "a tensor", "a float tensor"


def _initial_value(facts: FileFacts, function: FunctionInfo, name: str, loop: ast.AST) -> ast.expr | None:
    """The value of the last plain assignment to `name` before `loop`, outside it."""
    writes = [ref for ref in facts.references(function, name)
              if not ref.is_load and ref.position < (loop.lineno, loop.col_offset)]  # type: ignore[attr-defined]
    if not writes:
        return None
    statement = facts.parent(writes[-1].node)
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and not facts.is_inside(statement, loop):
        return statement.value
    return None


def _problem(facts: FileFacts, function: FunctionInfo, loop: ast.For | ast.While,
             statement: ast.Assign | ast.AugAssign, name: str, initial: ast.expr) -> str | None:
    """What tracing raises about this rebinding, in words; None when nothing is sure."""
    if _int_gets_float(facts, loop, statement, name, initial):
        return (f"it starts as the Python int `{facts.text(initial)}` but the body adds float values: the loop carries "
                "an int32 tensor and tracing raises TypeError (… has type float32 that does not match type int32); "
                "start it as a float")
    if isinstance(statement, ast.AugAssign):
        return None
    if _grows_known_shape(facts, loop, statement, name, initial):
        return (f"`tf.concat` grows it from the static shape of `{facts.text(initial)}`: tracing raises ValueError "
                f"('{name}' has shape … before the loop, but shape … after one iteration); use a tf.TensorArray, or "
                "declare the growing dimension with tf.autograph.experimental.set_loop_options(shape_invariants=…)")
    before, after = facts.value_structure(initial), facts.value_structure(statement.value)
    if after is None or not _read(facts, function, loop, name):
        return None
    if after == "None":  # None before the loop raises too ('… is not allowed to be None before the loop')
        return _last_write(facts, function, loop, statement, name)
    if before not in (None, "None") and facts.structures_disagree(before, after):
        return (f"it is {before} before the loop and {after} after the body: tracing raises TypeError ('{name}' does "
                "not have the same nested structure after one iteration); keep one structure")
    return None


def _int_gets_float(facts: FileFacts, loop: ast.AST, statement: ast.Assign | ast.AugAssign, name: str,
                    initial: ast.expr) -> bool:
    """`n = 0` before the loop, then `n += <float>` or `n = n + <float>` in it."""
    if not (isinstance(initial, ast.Constant) and type(initial.value) is int):
        return False
    if isinstance(statement, ast.AugAssign):
        if isinstance(loop, ast.While) and isinstance(statement.value, ast.Constant):
            return False  # TFC024 reports a literal added in a tensor `while`
        return isinstance(statement.op, _ACCUMULATING) and _float(facts, statement.value)
    value = statement.value
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, _ACCUMULATING)):
        return False
    sides = (value.left, value.right)
    return any(isinstance(side, ast.Name) and side.id == name for side in sides) \
        and any(_float(facts, side) for side in sides)


def _float(facts: FileFacts, expr: ast.expr) -> bool:
    """Float arithmetic (`0.5 * x`, `x / n`) or a cast to a float dtype."""
    if facts.value_structure(expr) in ("a Python float", "a float tensor"):
        return True
    if isinstance(expr, ast.BinOp):
        return isinstance(expr.op, ast.Div) or _float(facts, expr.left) or _float(facts, expr.right)
    if isinstance(expr, ast.Call) and facts.resolve(expr.func) == "tensorflow.cast":
        dtype = expr.args[1] if len(expr.args) > 1 else next((k.value for k in expr.keywords if k.arg == "dtype"), None)
        return dtype is not None and facts.resolve(dtype) in _FLOAT_DTYPES
    return False


def _grows_known_shape(facts: FileFacts, loop: ast.AST, statement: ast.Assign, name: str, initial: ast.expr) -> bool:
    """`acc = tf.zeros([0])` (literal arguments) before the loop, `acc = tf.concat([acc, ...], axis)` in it, and
    no `set_loop_options` in the body."""
    if not (isinstance(initial, ast.Call) and facts.resolve(initial.func) in _SHAPED and _literal_arguments(initial)):
        return False
    value = statement.value
    if not (isinstance(value, ast.Call) and facts.resolve(value.func) == "tensorflow.concat"):
        return False
    pieces = value.args[0] if value.args else next((k.value for k in value.keywords if k.arg == "values"), None)
    if not isinstance(pieces, (ast.List, ast.Tuple)) or not any(
            isinstance(piece, ast.Name) and piece.id == name for piece in pieces.elts):
        return False
    return not any(isinstance(node, ast.Call) and (facts.resolve(node.func) or "").endswith("set_loop_options")
                   for node in ast.walk(loop))


def _literal_arguments(call: ast.Call) -> bool:
    """The shape (or value) argument is made of literals only: the result's static shape is known."""
    shaping = [*call.args[:1], *(k.value for k in call.keywords if k.arg in ("shape", "dims", "value"))]
    return bool(shaping) and all(isinstance(node, (ast.Constant, ast.List, ast.Tuple, ast.UnaryOp, ast.USub, ast.Load))
                                 for argument in shaping for node in ast.walk(argument))


def _read(facts: FileFacts, function: FunctionInfo, loop: ast.AST, name: str) -> bool:
    """Whether the loop carries `name`: read after the loop, or in the body before its first write there."""
    loop_end = (loop.end_lineno or loop.lineno, loop.end_col_offset or 0)  # type: ignore[attr-defined]
    if facts.read_after(function, name, loop_end) is not None:
        return True
    body_start = (loop.body[0].lineno, loop.body[0].col_offset)  # type: ignore[attr-defined]
    return facts.read_after(function, name, (body_start[0], body_start[1] - 1)) is not None


def _last_write(facts: FileFacts, function: FunctionInfo, loop: ast.AST, statement: ast.Assign, name: str) -> str | None:
    """The finding's words for `name = None` when it is the body's last write of `name`, directly in the body."""
    if facts.enclosing_loop(statement) is not loop or facts.parent(statement) is not loop:
        return None
    loop_end = (loop.end_lineno or loop.lineno, loop.end_col_offset or 0)  # type: ignore[attr-defined]
    later = [ref for ref in facts.references(function, name)
             if not ref.is_load and (statement.end_lineno, statement.end_col_offset) < ref.position <= loop_end]
    if later:
        return None
    return (f"the body sets it to None last: tracing raises ValueError ('{name}' is None at the end of the "
            "iteration); keep a tensor in it (a mask, tf.zeros_like) rather than None")
