"""TFC024: a Python bool/int/None flag rebound under a tensor `if`/`while`, then used as a Python value."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule



class PythonFlagUnderTensorCondition(Rule):
    """A Python flag set under a tensor condition becomes a tensor; Python tests of it then go wrong.

    ## What it does
    Finds, in graph code, a name that starts as a Python literal (`holding = False`, `n = 0`,
    `best = None`) and is rebound inside an `if` or `while` whose test is surely a tensor, when the
    function then uses it in a way that only works for the Python value: an identity test
    (`holding is False`), the test of an enclosing Python `while`, or a value of another type than
    the literal it started as (`n = 0` then `n += 0.5`, `best = None` then `best = x`).

    ## Why is this bad
    AutoGraph turns an `if` or `while` on a tensor into `tf.cond`/`tf.while_loop`, and every Python
    variable the statement rebinds becomes an output of it: a tensor. Rebinding with a value of the
    same type works (the flag is a bool tensor afterwards). But `holding is False` then compares a
    tensor's identity and is never true, silently; a Python `while not done:` raises
    NotImplementedError once `done` turns into a tensor; and both branches (or the loop's start and
    body) must give the same dtype, so int and float, or None and a tensor, raise while tracing.

    Checked against TensorFlow 2.21 (every example below run): the identity example returns 1.1 for
    0.1 (0.1 eagerly), and the reporter's loop from tensorflow/tensorflow#43111 returns 4.0 under
    tf.function and 1.0 eagerly (and, called with NumPy arrays, 0.0034 where it returns 0.0623 eagerly,
    while Python lists give the eager 0.0623); the actions example returns 1.0 for a NumPy array (0.0
    eagerly and for a list); the Python `while` raises NotImplementedError ("The condition of while
    loop started as non-Tensor, then changed to Tensor"); int then float raises TypeError, in an `if`
    and in a `while`; None then a tensor raises ValueError ("'best' is None at the end of the else
    branch"). The must-not-flag examples (`==`, same-type rebinding, a flag not read afterwards, a flag
    starting as a tensor) all run and return what they return eagerly.

    ## Example
    ```python
    @tf.function
    def f(x):
        holding = False
        if x > 0.5:
            holding = True
        if holding is False:
            return x
        return x + 1
    ```

    ## Use instead
    ```python
    @tf.function
    def f(x):
        holding = tf.constant(False)
        if x > 0.5:
            holding = tf.constant(True)
        if tf.logical_not(holding):   # or `holding == False`; never `is`
            return x
        return x + 1
    ```
    """

    code = "TFC024"
    name = "python-flag-under-tensor-condition"
    severity = Severity.ERROR
    must_flag = (
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    holding = False\n    if x > 0.5:\n"
        "        holding = True\n    if holding is False:\n        return x\n    return x + 1\nf(tf.constant(0.1))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    done = False\n    while not done:\n        x = x - 1\n"
        "        if x < 0:\n            done = True\n    return x\nf(tf.constant(5))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    n = 0\n    if x > 0:\n        n += 1.5\n    return n\n"
        "f(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function(input_signature=[tf.TensorSpec([], tf.int32)])\ndef f(t):\n    n = 0\n"
        "    while t < 3:\n        n += 0.5\n        t += 1\n    return n\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    best = None\n    if x > 0:\n        best = x\n"
        "    return best\nf(tf.constant(1.0))\n",
        # tensorflow/tensorflow#43111's shape: the test reads a local taken from a parameter that every
        # call fills with a NumPy array, which tf.function turns into a tensor.
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(actions):\n    holding = False\n"
        "    act = actions[0]\n    if act > 0.5:\n        holding = True\n    if holding is False:\n        return 0.0\n"
        "    return 1.0\nf(np.array([0.1, 0.9]))\n",
    )
    must_not_flag = (
        # The same with a Python list: its elements stay Python floats, the `if` runs in Python.
        "import tensorflow as tf\n@tf.function\ndef f(actions):\n    holding = False\n"
        "    act = actions[0]\n    if act > 0.5:\n        holding = True\n    if holding is False:\n        return 0.0\n"
        "    return 1.0\nf([0.1, 0.9])\n",
        # Same type in every branch: the flag becomes a bool tensor and works.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    found = False\n    if x > 0:\n        found = True\n"
        "    return found\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    holding = False\n    if x > 0.5:\n"
        "        holding = True\n    if holding == False:\n        return x\n    return x + 1\nf(tf.constant(0.1))\n",
        # Not read after the `if`: AutoGraph does not carry it.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    best = None\n    if x > 0:\n        best = x\n"
        "        x = best * 2\n    return x\nf(tf.constant(1.0))\n",
        # Both branches assign; a flag that starts as a tensor; a Python condition.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    best = None\n    if x > 0:\n        best = x\n    else:\n"
        "        best = -x\n    return best\nf(tf.constant(1.0))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    done = tf.constant(False)\n    while not done:\n"
        "        x = x - 1\n        if x < 0:\n            done = True\n    return x\nf(tf.constant(5))\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    found = None\n    if n > 0:\n        found = 1.5\n"
        "    if found is None:\n        return x\n    return x * found\nf(tf.constant(1.0), 3)\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for node, function in facts.graph_nodes(ast.Assign, ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
            for target in targets:
                if not isinstance(target, ast.Name):
                    continue
                construct = _tensor_construct(facts, node, function)
                if construct is None:
                    continue
                problem = _problem(facts, function, node, target, construct)
                if problem is not None:
                    kind = "while" if isinstance(construct, ast.While) else "if"
                    yield self.finding(
                        facts, node, f"`{target.id}` is a Python value rebound under the tensor `{kind}` at "
                        f"{facts.line_name(construct.lineno)}, so AutoGraph makes it a tensor: {problem}",
                        function=function)


def _tensor_construct(facts: FileFacts, node: ast.AST, function: FunctionInfo) -> ast.If | ast.While | None:
    """The innermost `if`/`while` on a tensor whose body (or else branch) holds `node`, in `function`."""
    previous = node
    for ancestor in facts.ancestors(node):
        if ancestor is function.node:
            return None
        if isinstance(ancestor, (ast.If, ast.While)) and previous is not ancestor.test \
                and facts.is_single_tensor(ancestor.test):
            return ancestor
        previous = ancestor
    return None


def _problem(facts: FileFacts, function: FunctionInfo, rebinding: ast.AST, name: ast.Name,
             construct: ast.If | ast.While) -> str | None:
    """What goes wrong once `name` is a tensor, in words; None when nothing does."""
    initial = [b.value for b in facts.bindings_of(name) if b.kind == "assign" and b.value is not None
               and isinstance(b.value, ast.Constant) and _outside(facts, b.node, construct)
               and b.node.lineno < construct.lineno]  # type: ignore[attr-defined]
    if not initial:
        return None
    later = [load for load in facts.loads_under(function).get(name.id, ())
             if facts.function_of(load) is function and _reads_new_value(facts, load, construct)]
    for load in later:
        compare = facts.parent(load)
        if isinstance(compare, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in compare.ops):
            return (f"`{facts.text(compare)}` ({facts.line_name(compare.lineno)}) then tests a tensor's identity and "
                    "is never true (silently wrong); compare with `==` or tf.logical_not, never `is`")
    loop = _python_while_testing(facts, construct, name.id, function)
    if loop is not None:
        return (f"the Python `while` at {facts.line_name(loop.lineno)} tests it, and tracing raises "
                f"NotImplementedError (a loop condition that turns into a tensor); start it as a tensor, "
                f"`{name.id} = tf.constant(...)`")
    before = {type(value.value) for value in initial}  # type: ignore[attr-defined]
    after = _new_type(rebinding, before)
    if later and after is not None and len(before) == 1 and after not in before \
            and not (isinstance(construct, ast.If) and _assigned_in_both_branches(construct, name.id)):
        error = "ValueError" if type(None) in before else "TypeError"
        return (f"it holds {_describe(before.pop())} before and {_describe(after)} after, and both branches must give "
                f"a tensor of one dtype, so tracing raises {error}; start it with a value of the same type")
    return None


def _outside(facts: FileFacts, node: ast.AST, construct: ast.AST) -> bool:
    return all(ancestor is not construct for ancestor in facts.ancestors(node))


def _reads_new_value(facts: FileFacts, load: ast.Name, construct: ast.AST) -> bool:
    """A read that can see the value the construct produced: after it, or in a loop around both."""
    if load.lineno > (construct.end_lineno or construct.lineno):  # type: ignore[attr-defined]
        return True
    return facts.common_loop(construct, load) is not None


def _python_while_testing(facts: FileFacts, construct: ast.AST, name: str,
                          function: FunctionInfo) -> ast.While | None:
    """An enclosing `while` of `function` whose test reads `name` and is not a tensor to begin with."""
    for ancestor in facts.ancestors(construct):
        if ancestor is function.node:
            return None
        if isinstance(ancestor, ast.While) and not facts.is_single_tensor(ancestor.test) \
                and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(ancestor.test)):
            return ancestor
    return None


def _new_type(rebinding: ast.AST, before: set[type]) -> type | None:
    """The Python type the rebinding gives, where the source says: a literal, or `+= literal`."""
    if isinstance(rebinding, ast.Assign):
        value = rebinding.value
        if isinstance(value, ast.Constant):
            return type(value.value)
        return object if before == {type(None)} else None  # None, then anything that is not a literal
    if isinstance(rebinding, ast.AugAssign) and isinstance(rebinding.value, ast.Constant) and before == {int} \
            and isinstance(rebinding.value.value, float):
        return float
    return None


def _assigned_in_both_branches(construct: ast.If, name: str) -> bool:
    def assigns(statements: list[ast.stmt]) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                   for statement in statements for n in ast.walk(statement))
    return assigns(construct.body) and assigns(construct.orelse)


def _describe(kind: type) -> str:
    return {type(None): "None", bool: "a bool", int: "an int", float: "a float"}.get(kind, "a value of another type")
