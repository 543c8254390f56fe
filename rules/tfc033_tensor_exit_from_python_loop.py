"""TFC033: a Python loop whose exit depends on a tensor (`break`/`return` under a tensor `if`, or a
`while` counter rebound to a tensor), in code AutoGraph converts."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_ITERATION_BUILTINS = ("builtins.enumerate", "builtins.zip", "builtins.reversed")


class TensorExitFromPythonLoop(Rule):
    """A Python loop cannot stop on a tensor: tracing raises.

    ## What it does
    Finds, in code that AutoGraph converts (a tf.function, a function it calls, a function traced by
    `tf.data`), a Python loop that the source shows stays a Python loop (a `for` over `range()` of
    Python numbers, over a list or tuple display, or `enumerate`/`zip` of those; a `while` whose test
    reads only names that start as Python literals) where
    - a `break` or `return` lies under an `if` whose test is surely a tensor, or
    - a name the `while` tests is rebound in the loop body to a tensor (`n = n + tf.cast(x, tf.int32)`).

    ## Why is this bad
    AutoGraph keeps a loop over Python values a Python loop, unrolled while tracing, and turns an `if`
    on a tensor into `tf.cond`. A `break` or `return` inside that `tf.cond` would have to stop the
    Python loop with a value only the graph knows, so tracing raises, for every input:
    `NotImplementedError: break and return statements which depend on a TF condition are not supported
    in Python for loops`, for a `while` `The condition of while loop started as non-Tensor, then changed
    to Tensor`, and for a `return` followed by one after the loop `ValueError: the else branch must also
    have a return statement.`

    Checked against TensorFlow 2.21 (every example below run from a file): each must-flag example
    raises one of those errors; the must-not-flag examples run: `continue` under the tensor `if`, a
    `break` in a `tf.range` loop (a graph loop), a `break` under a Python condition, a `while` counter
    that stays a Python int.

    ## Example
    ```python
    @tf.function
    def first_positive_sum(x):
        total = tf.constant(0.0)
        for i in range(3):
            if x[i] > 0:
                break          # NotImplementedError while tracing
            total += x[i]
        return total
    ```

    ## Use instead
    ```python
    @tf.function
    def first_positive_sum(x):
        total = tf.constant(0.0)
        for i in tf.range(3):  # a graph loop: AutoGraph supports `break` on a tensor there
            if x[i] > 0:
                break
            total += x[i]
        return total
    ```
    Or keep the Python loop and replace the exit with a mask (`tf.where`), or a `tf.while_loop`.
    """

    code = "TFC033"
    name = "tensor-exit-from-python-loop"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # docs/coverage.md F15 and F14 (issue 37).
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    total = tf.constant(0.0)\n    for i in range(3):\n"
        "        if tf.gather(x, i) > 0:\n            break\n        total += x[i]\n    return total\n"
        "f(tf.constant([1.0, -1.0, 2.0]))\n",
        "import tensorflow as tf\nN = 3\n@tf.function\ndef f(x):\n    for i in range(N):\n        if tf.gather(x, i) > 0:\n"
        "            return x[i]\n    return x[0]\nf(tf.constant([1.0, -1.0, 2.0]))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    total = tf.constant(0.0)\n    for v in [1.0, 2.0]:\n"
        "        if tf.reduce_sum(x) > v:\n            if v > 1.5:\n                break\n        total += v\n    return total\n"
        "f(tf.constant([1.0, -1.0, 2.0]))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    i = 0\n    while True:\n        if tf.gather(x, i) > 0:\n"
        "            break\n        i += 1\n    return x\nf(tf.constant([1.0, -1.0, 2.0]))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    n = 0\n    while n < 3:\n        n = n + tf.cast(x, tf.int32)\n"
        "    return n\nf(tf.constant(1.0))\n",
    )
    must_not_flag = (
        # `continue` is fine; a graph loop supports `break`; a Python condition; a counter that stays Python.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    total = tf.constant(0.0)\n    for i in range(3):\n"
        "        if tf.gather(x, i) > 0:\n            continue\n        total += x[i]\n    return total\n"
        "f(tf.constant([1.0, -1.0, 2.0]))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    for i in tf.range(3):\n        if tf.gather(x, i) > 0:\n"
        "            break\n    return x\nf(tf.constant([1.0, -1.0, 2.0]))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, limit=2):\n    total = tf.constant(0.0)\n    for i in range(3):\n"
        "        if i >= limit:\n            break\n        total += x[i]\n    return total\nf(tf.constant([1.0, -1.0, 2.0]))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    n = 0\n    while n < 3:\n        x = x + tf.cast(n, tf.float32)\n"
        "        n += 1\n    return x\nf(tf.constant(1.0))\n",
        # The loop over a parameter may be a tensor (then a graph loop that supports `break`).
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    for i in range(n):\n        if tf.gather(x, i) > 0:\n"
        "            break\n    return x\nf(tf.constant([1.0, -1.0, 2.0]), tf.constant(3))\n",
        # Eager code: the `if` is a Python `if` on an eager tensor.
        "import tensorflow as tf\ndef f(x):\n    for i in range(3):\n        if x[i] > 0:\n            return x[i]\n"
        "    return x[0]\nf(tf.constant([1.0, -1.0, 2.0]))\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for node, function in facts.graph_nodes(ast.Break, ast.Return):
            if not facts.autograph_converted(function) or facts.in_eager_only_branch(node, function):
                continue
            loop = _loop_exited(facts, node, function)
            if loop is None or not _python_loop(facts, loop, function):
                continue
            condition = _tensor_if_between(facts, node, loop)
            if condition is not None:
                statement = "break" if isinstance(node, ast.Break) else "return"
                yield self.finding(
                    facts, node, f"`{statement}` under the tensor `if` at {facts.line_name(condition.lineno)} inside the "
                    f"Python loop at {facts.line_name(loop.lineno)}: AutoGraph keeps that loop a Python loop and "
                    "cannot stop it on a tensor, so tracing raises for every input; loop over tf.range (a graph "
                    "loop) or replace the exit with a mask", function=function)
        for loop, function in facts.graph_nodes(ast.While):
            if facts.autograph_converted(function) and _python_loop(facts, loop, function):  # type: ignore[arg-type]
                yield from self._counter_becomes_tensor(facts, loop, function)  # type: ignore[arg-type]

    def _counter_becomes_tensor(self, facts: FileFacts, loop: ast.While, function: FunctionInfo) -> Iterator[Finding]:
        """F14: a name of the test rebound in the body to a tensor, outside any tensor `if` (TFC024's)."""
        tested = {n.id for n in ast.walk(loop.test) if isinstance(n, ast.Name)}
        for statement in ast.walk(loop):
            if not isinstance(statement, (ast.Assign, ast.AugAssign)) or facts.function_of(statement) is not function:
                continue
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names = [t.id for t in targets if isinstance(t, ast.Name) and t.id in tested]
            if names and facts.is_single_tensor(statement.value) and facts.enclosing_loop(statement) is loop \
                    and _tensor_if_between(facts, statement, loop) is None:
                yield self.finding(
                    facts, statement, f"`{names[0]}` starts as a Python value and the Python `while` at "
                    f"{facts.line_name(loop.lineno)} tests it, but this makes it a tensor: tracing raises "
                    "NotImplementedError (the condition of while loop started as non-Tensor, then changed to "
                    f"Tensor); start it as a tensor, `{names[0]} = tf.constant(...)`", function=function)


def _loop_exited(facts: FileFacts, node: ast.stmt, function: FunctionInfo) -> ast.For | ast.While | None:
    """The loop a `break` leaves (the innermost), or the outermost loop a `return` leaves, in `function`."""
    loops = [loop for loop in facts.loops_around(node, function.node) if facts.in_loop_body(node, loop)]
    if not loops:
        return None
    loop = loops[0] if isinstance(node, ast.Break) else loops[-1]
    return loop if isinstance(loop, (ast.For, ast.While)) else None


def _tensor_if_between(facts: FileFacts, node: ast.AST, loop: ast.AST) -> ast.If | None:
    """The `if` on a tensor that holds `node` in a branch, inside `loop`."""
    previous = node
    for ancestor in facts.ancestors(node):
        if ancestor is loop:
            return None
        if isinstance(ancestor, ast.If) and previous is not ancestor.test and facts.is_single_tensor(ancestor.test):
            return ancestor
        previous = ancestor
    return None


def _python_loop(facts: FileFacts, loop: ast.For | ast.While, function: FunctionInfo) -> bool:
    """Whether the source shows that AutoGraph keeps `loop` a Python loop: it iterates Python values, or
    its test starts as a Python value."""
    if isinstance(loop, ast.For):
        return not facts.may_be_graph_loop(loop) and _python_values(facts, loop.iter, 0)
    return all(_python_literal_before(facts, name, loop, function) for name in ast.walk(loop.test)
               if isinstance(name, ast.Name)) and \
        not any(isinstance(n, (ast.Call, ast.Attribute, ast.Subscript)) for n in ast.walk(loop.test))


def _python_values(facts: FileFacts, expr: ast.expr, depth: int) -> bool:
    """A list or tuple display, `range()` of Python numbers, `len()` of a display, `enumerate`/`zip` of
    those, or a name bound only to one of them."""
    if depth > 3:
        return False
    if isinstance(expr, (ast.List, ast.Tuple)):
        return True
    if isinstance(expr, ast.Constant):
        return type(expr.value) is int
    if isinstance(expr, ast.BinOp):
        return _python_values(facts, expr.left, depth + 1) and _python_values(facts, expr.right, depth + 1)
    if isinstance(expr, ast.Name):
        bindings = facts.bindings_of(expr)
        return bool(bindings) and all(b.kind == "assign" and b.value is not None
                                      and _python_values(facts, b.value, depth + 1) for b in bindings)
    if isinstance(expr, ast.Call) and not expr.keywords and expr.args:
        called = facts.resolve(expr.func)
        if called in ("builtins.range", "builtins.len", *_ITERATION_BUILTINS):
            return all(_python_values(facts, argument, depth + 1) for argument in expr.args)
    return False


def _python_literal_before(facts: FileFacts, name: ast.Name, loop: ast.While, function: FunctionInfo) -> bool:
    """Whether `name` is a local whose last write before `loop` assigns a Python literal."""
    if name.id in function.params:
        return False
    before = [ref for ref in facts.references(function, name.id)
              if not ref.is_load and ref.position < (loop.lineno, loop.col_offset)]
    if not before:
        return False
    statement = facts.parent(before[-1].node)
    return isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant) \
        and not facts.is_inside(statement, loop)
