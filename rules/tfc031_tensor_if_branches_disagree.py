"""TFC031: the two branches of a tensor `if` disagree about a name or a return, in code AutoGraph converts."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_EXITS = (ast.Return, ast.Raise, ast.Break, ast.Continue)


class TensorIfBranchesDisagree(Rule):
    """The branches of an `if` on a tensor must define the same names, alike, and return alike.

    ## What it does
    Finds, in code that AutoGraph converts (a tf.function, a function it calls, a function traced by
    `tf.data`), an `if` whose test is surely a tensor where
    - a name is assigned in one branch only, was not bound before the `if`, and is read after it;
    - one branch ends in `return` and the other does not, and no `return` follows the `if` (the
      function falls off its end, returning None, on the other path);
    - both branches assign a name that is read after the `if`, with values of another nested
      structure (a tuple of 2 and a tensor, a list and a tuple), None and a value, or Python literals
      of two types (`1` and `2.5`, `True` and `0`, `1` and `x * 2.0`).

    ## Why is this bad
    AutoGraph turns the `if` into `tf.cond`, whose two branches are functions that must return the
    same things: every name the code after the `if` reads, each with one dtype and one nested
    structure, and a return value on both paths or on neither. TensorFlow checks this while tracing,
    so the function fails for every input, although it runs eagerly (`if` in Python only takes one
    branch).

    Checked against TensorFlow 2.21 (every example below run from a file): the must-flag examples
    raise `ValueError: 'y' must also be initialized in the else branch` (also from an `if` inside a
    Python or a `tf.range` loop), `ValueError: the else branch must also have a return statement.`
    (a bare `return` too), `TypeError: 'y' has dtype int32 in the main branch, but dtype float32 in
    the else branch`, `TypeError` for two structures (`(x, x)` and `x`; `[x, x]` and `(x, x)`), and
    `ValueError: 'y' is None at the end of the main branch.` The must-not-flag examples run: the name
    bound before the `if`, not read after it, or assigned again before the read; the other branch
    returning; a `return` after the `if`; a Python condition; code Keras 3 runs unconverted (which
    fails earlier, at the `if` itself).

    ## Example
    ```python
    @tf.function
    def f(x):
        if x > 0:
            y = x * 2
        return y          # ValueError: 'y' must also be initialized in the else branch
    ```

    ## Use instead
    ```python
    @tf.function
    def f(x):
        y = x             # or an `else:` that assigns it
        if x > 0:
            y = x * 2
        return y
    ```
    Give the name a value of the same dtype and structure on every path (`0.0`, not `0`, before a
    float; `tf.zeros_like(x)` rather than None), and return on every path or after the `if`.
    """

    code = "TFC031"
    name = "tensor-if-branches-disagree"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # docs/coverage.md F1, F2, F4, F5 (issue 37).
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = x * 2\n"
        "    return y\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        pass\n    else:\n"
        "        y = x * 2\n    return y\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    for i in tf.range(n):\n        if tf.reduce_sum(x) > 0:\n"
        "            with tf.name_scope('double'):\n                y = x * 2\n    return y\nf(tf.constant(1.0), tf.constant(2))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        return x\n    x = x + 1\n"
        "f(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        tf.print(x)\n        return\n"
        "    tf.print(-x)\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = (x, x)\n    else:\n"
        "        y = x\n    return y\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = [x, x]\n    else:\n"
        "        y = (x, x)\n    return y\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = 1\n    else:\n"
        "        y = tf.identity(x) * 2.0\n    return y\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = True\n    else:\n"
        "        y = 0\n    return y\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = None\n    else:\n"
        "        y = tf.identity(x)\n    return y\nf(tf.constant(1.0))\n",
    )
    must_not_flag = (
        # Bound before the `if`; not read after it; assigned again before the read.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    y = x\n    if tf.reduce_sum(x) > 0:\n        y = x * 2\n"
        "    return y\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = x * 2\n        x = y\n"
        "    return x\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = x\n    x = x + 1\n"
        "    y = x\n    return y\nf(tf.constant(1.0))\n",
        # The other branch returns; both paths return.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = 2 * x\n    else:\n"
        "        return x\n    return y\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        return x\n    x = x + 1\n"
        "    return -x\nf(tf.constant(1.0))\n",
        # A Python condition: only one branch is traced.
        "import tensorflow as tf\n@tf.function\ndef f(x, flag=True):\n    if flag:\n        y = x * 2\n    return y\n"
        "f(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, flag=True):\n    if flag:\n        y = (x, x)\n    else:\n"
        "        y = x\n    return y\nf(tf.constant(1.0))\n",
        # Same structure and dtype in both branches; a literal against a tensor of unknown dtype.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = (x, x)\n    else:\n"
        "        y = (x, -x)\n    return y\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = 1.0\n    else:\n"
        "        y = tf.reduce_sum(x)\n    return y\nf(tf.constant(1.0))\n",
        # Not read after the `if`: AutoGraph does not carry it.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    if tf.reduce_sum(x) > 0:\n        y = (x, x)\n    else:\n"
        "        y = x\n    return x\nf(tf.constant(1.0))\n",
        # Not converted: Keras 3 runs `call` as written (OperatorNotAllowedInGraphError at the `if`, TFC029).
        "import tensorflow as tf\nimport keras\nclass L(keras.layers.Layer):\n    def call(self, x):\n"
        "        if tf.reduce_sum(x) > 0:\n            y = x * 2\n        return y\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for node, function in facts.graph_nodes(ast.If):
            if not (facts.autograph_converted(function) and facts.is_single_tensor(node.test)  # type: ignore[attr-defined]
                    and not facts.in_eager_only_branch(node, function)):
                continue
            yield from self._one_branch_binds(facts, node, function)  # type: ignore[arg-type]
            yield from self._one_branch_returns(facts, node, function)  # type: ignore[arg-type]
            yield from self._branches_differ(facts, node, function)  # type: ignore[arg-type]

    def _one_branch_binds(self, facts: FileFacts, node: ast.If, function: FunctionInfo) -> Iterator[Finding]:
        """F1: a name assigned in one branch only, new at the `if`, and read after it."""
        for branch, other, missing in ((node.body, node.orelse, "else"), (node.orelse, node.body, "main")):
            if _exits(branch) or _exits(other):
                continue
            for name, binding in _direct_bindings(branch).items():
                if name in _stored_names(other) or _bound_before(facts, function, name, node):
                    continue
                read = facts.read_after(function, name, _end(node))
                if read is not None:
                    yield self.finding(
                        facts, binding, f"`{name}` is assigned in one branch of the tensor `if` at "
                        f"{facts.line_name(node.lineno)} only and read at {facts.line_name(read.lineno)}: AutoGraph "
                        f"makes the `if` a tf.cond, and tracing raises ValueError ('{name}' must also be initialized "
                        f"in the {missing} branch) for every input; give it a value before the `if`",
                        function=function)

    def _one_branch_returns(self, facts: FileFacts, node: ast.If, function: FunctionInfo) -> Iterator[Finding]:
        """F2: a `return` ending one branch, when the other path falls off the function's end."""
        if function.is_generator or not _only_under_ifs(facts, node, function) or _exit_follows(facts, node, function):
            return
        for branch, other, missing in ((node.body, node.orelse, "else"), (node.orelse, node.body, "main")):
            if branch and isinstance(branch[-1], ast.Return) and not _has(other, (ast.Return, ast.Raise)):
                yield self.finding(
                    facts, branch[-1], f"the tensor `if` at {facts.line_name(node.lineno)} returns in one branch "
                    "only and no `return` follows it: AutoGraph makes the `if` a tf.cond, and tracing raises "
                    f"ValueError (the {missing} branch must also have a return statement) for every input; return "
                    "after the `if` as well", function=function)

    def _branches_differ(self, facts: FileFacts, node: ast.If, function: FunctionInfo) -> Iterator[Finding]:
        """F4, F5: both branches assign a name read after the `if`, with values tf.cond cannot join."""
        if _exits(node.body) or _exits(node.orelse):
            return
        main, other = _direct_bindings(node.body), _direct_bindings(node.orelse)
        for name in main.keys() & other.keys():
            first, second = (facts.value_structure(b.value) for b in (main[name], other[name]))  # type: ignore[attr-defined]
            if first is None or second is None or not facts.structures_disagree(first, second):
                continue
            if facts.read_after(function, name, _end(node)) is None:
                continue
            error = "ValueError" if "None" in (first, second) else "TypeError"
            yield self.finding(
                facts, other[name], f"`{name}` is {first} in the main branch of the tensor `if` at "
                f"{facts.line_name(node.lineno)} and {second} in the else branch: AutoGraph makes the `if` a "
                f"tf.cond, whose branches must give one dtype and nested structure, and tracing raises {error} "
                "for every input", function=function)


def _end(node: ast.AST) -> tuple[int, int]:
    return node.end_lineno or node.lineno, node.end_col_offset or 0  # type: ignore[attr-defined]


def _start(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def _exits(block: list[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], _EXITS)


def _direct_bindings(block: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a branch surely assigns (statements of its own or in a `with` of it), each with its last
    assignment to a plain name."""
    found: dict[str, ast.stmt] = {}
    for statement in block:
        if isinstance(statement, (ast.With, ast.AsyncWith)):
            found.update(_direct_bindings(statement.body))
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name):
            found[statement.targets[0].id] = statement
    return found


def _stored_names(block: list[ast.stmt]) -> set[str]:
    return {n.id for statement in block for n in ast.walk(statement)
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}


def _has(block: list[ast.stmt], kinds: tuple[type, ...]) -> bool:
    return any(isinstance(n, kinds) for statement in block for n in ast.walk(statement))


def _bound_before(facts: FileFacts, function: FunctionInfo, name: str, node: ast.If) -> bool:
    """Whether `name` may hold a value when the `if` starts: a parameter, a global, a write before it, or
    one in a loop around it (the previous iteration's)."""
    scope = function.scope
    if name in function.params or name in scope.global_names or name in scope.nonlocal_names:
        return True
    loops = facts.loops_around(node, function.node)
    for ref in facts.references(function, name):
        if ref.is_load or facts.is_inside(ref.node, node):
            continue
        if ref.position < _start(node) or any(facts.is_inside(ref.node, loop) for loop in loops):
            return True
    return False


def _only_under_ifs(facts: FileFacts, node: ast.If, function: FunctionInfo) -> bool:
    """Whether nothing but `if` and `with` statements lie between the function and `node` (in a loop,
    a `return` is TFC033's, and in a `try` the `except` may return)."""
    for ancestor in facts.ancestors(node):
        if ancestor is function.node:
            return True
        if not isinstance(ancestor, (ast.If, ast.With, ast.AsyncWith)):
            return False
    return False


def _exit_follows(facts: FileFacts, node: ast.If, function: FunctionInfo) -> bool:
    """Whether a `return` or `raise` of `function` comes after the `if`."""
    after = _end(node)
    return any(isinstance(n, (ast.Return, ast.Raise)) and _start(n) >= after for n in function.nodes)
