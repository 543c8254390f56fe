"""TFC003: graph code reads an outer name that is rebound later: the trace keeps the old value."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine import kinds
from tfcheck.engine.facts import LOOPS, FileFacts
from tfcheck.engine.scopes import Binding, FunctionInfo, Scope
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_T = "import tensorflow as tf\n"
# Bindings that define code rather than data: a function redefined or re-wrapped is not stale data.
_CODE_BINDINGS = frozenset({"def", "class", "import"})


class StaleCapture(Rule):
    """Graph code reads a module-level or closure name that is rebound later: the value is frozen.

    ## What it does
    Finds names read in graph code that are bound outside the function (module level, or a closure
    of an eager function) and get a new value after the function is defined: rebound later at module
    level, in a loop, or through `global`/`nonlocal` in some function. Names bound once are constants
    and are not flagged, and neither are `tf.Variable`s, functions, classes and imports. A module-level
    tf.function that the module itself runs only before a rebinding or only after it (a script or
    notebook read top to bottom: calls, `get_concrete_function`, through module-level functions, and only
    while the name is bound to this definition) is not flagged for that rebinding: no trace made with the
    old value runs with the new one. Functions that only `tf.data` traces are left alone: a pipeline
    traces its function when it is built, and keeps the values it was built with.

    ## Why is this bad
    `tf.function` captures the value a global or closure variable has when the function is traced
    and bakes it into the graph as a constant. Unlike Python arguments, a new value of a captured
    name does not cause a retrace, so later calls silently keep computing with the old value. It is
    a warning because the linter cannot see whether the name changes before or after the first call.

    ## Example
    ```python
    @tf.function
    def buggy_add():
        return 1 + foo

    foo = 1
    buggy_add()
    foo = 100
    buggy_add()  # still returns 2
    ```

    ## Use instead
    ```python
    @tf.function
    def recommended_add(foo):
        return 1 + foo
    ```
    Pass the value as an argument, or make it a `tf.Variable` and `assign` new values to it.
    """

    code = "TFC003"
    name = "stale-capture"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        _T + "@tf.function\ndef buggy_add():\n    return 1 + foo\nfoo = 1\nprint(buggy_add())\nfoo = 100\n"
        "print(buggy_add())\n",
        _T + "x = None\n@tf.function\ndef leaky_function(a):\n    global x\n    x = a + 1\n    return a + 2\n"
        "@tf.function\ndef captures_leaked_tensor(b):\n    b += x\n    return b\n",
        _T + "scale = 1.0\ndef set_scale(value):\n    global scale\n    scale = value\n@tf.function\n"
        "def f(x):\n    return x * scale\n",
        _T + "def train(data):\n    lr = 0.1\n    @tf.function\n    def step(x):\n        return x * lr\n"
        "    step(data)\n    lr = 0.01\n    step(data)\n",
        _T + "def train(data, rates):\n    lr = 0.1\n    @tf.function\n    def step(x):\n        return x * lr\n"
        "    for rate in rates:\n        step(data)\n        lr = rate\n",
        _T + "def trainer():\n    lr = 0.1\n    @tf.function\n    def step(x):\n        return x * lr\n"
        "    def set_lr(value):\n        nonlocal lr\n        lr = value\n    return step, set_lr\n",
        _T + "@tf.function\ndef f(x):\n    return x * factor\nfor factor in [1, 2, 3]:\n    f(tf.constant(1.0))\n",
        _T + "threshold = 0.5\ndef helper(x):\n    return x > threshold\n@tf.function\ndef f(x):\n"
        "    return helper(x)\nthreshold = 0.9\n",
    )
    must_not_flag = (
        # A notebook section rebinds the model and defines a new train_step, as each section does
        # (sayakpaul/Supervised-Contrastive-Learning-in-TensorFlow-2 9c67014, Contrastive_Training_Imagenet_subset_Adam.ipynb,
        # cells 22 and 32, cut down).
        _T + "encoder = make_encoder()\n@tf.function\ndef train_step(images):\n    return encoder(images)\n"
        "def train(data):\n    for images in data:\n        train_step(images)\ntrain(batches)\n"
        "encoder = make_encoder(width=2)\n@tf.function\ndef train_step(images):\n    return encoder(images)\n"
        "train(batches)\n",
        # A pipeline traces its map function when it is built; a later pipeline uses the new vectorizer
        # (fchollet/deep-learning-with-python-notebooks dea84a4 chapter14_text-classification.ipynb, cells 49 and 58).
        _T + "vectorize = make_vectorizer(1)\nds1 = raw.map(lambda x, y: (vectorize(x), y))\n"
        "vectorize = make_vectorizer(2)\nds2 = raw.map(lambda x, y: (vectorize(x), y))\n",
        # The optimizer is rebound before the first call traces (tensorflow/docs 7c36502
        # site/en/tutorials/generative/style_transfer.ipynb, cells 74-78, cut down).
        _T + "@tf.function\ndef train_step(image):\n    opt.apply_gradients([(image, image)])\n"
        "opt = tf.keras.optimizers.Adam(0.02)\nopt = tf.keras.optimizers.Adam(0.01)\nfor n in range(10):\n"
        "    train_step(image)\n",
        _T + "@tf.function\ndef recommended_add(foo):\n    return 1 + foo\nfoo = 1\nprint(recommended_add(foo))\n"
        "foo = 100\nprint(recommended_add(foo))\n",
        _T + "@tf.function\ndef variable_add():\n    return 1 + foo\nfoo = tf.Variable(1)\nprint(variable_add())\n"
        "foo.assign(100)\nprint(variable_add())\n",
        _T + "SCALE = 2.0\n@tf.function\ndef f(x):\n    return x * SCALE\n",
        _T + "try:\n    import numpy as np\nexcept ImportError:\n    np = None\n@tf.function\ndef f(x):\n"
        "    return x if np is None else x + 1\n",
        _T + "def helper(x):\n    return x\n@tf.function\ndef f(x):\n    return helper(x)\nhelper = tf.function(helper)\n",
        _T + "counter = 0\n@tf.function\ndef f(x):\n    global counter\n    counter += 1\n    return x + counter\n",
        _T + "mode = 'a'\nmode = 'b'\n@tf.function\ndef f(x):\n    return x if mode == 'a' else -x\n",
        _T + "@tf.function\ndef f(x):\n    total = 0\n    for i in range(3):\n        total = total + i\n"
        "    g = lambda: total\n    return x + g()\n",
        _T + "def report(x):\n    return x\ncount = 0\nfor i in range(3):\n    count += 1\n",
        _T + "class DatasetV1:\n    pass\nclass DatasetV2:\n    pass\nDataset = DatasetV1\ndef make(f):\n"
        "    return tf.data.Dataset.range(3).map(lambda x: Dataset(x))\nif f():\n    Dataset = DatasetV2\n",
        _T + "def make():\n    lr = 0.1\n    @tf.function\n    def step(x):\n        return x * lr\n"
        "    lr = 0.01\n    return step\n",
        _T + "def conv(inputs, data_format=None):\n    @tf.function(jit_compile=True)\n    def _conv_xla():\n"
        "        return tf.nn.convolution(inputs, 1, data_format=data_format)\n"
        "    data_format = standardize(data_format)\n    return _conv_xla()\n",
        _T + "def diagonal(x, offset):\n    x = moveaxis(x)\n    def _zeros():\n        return tf.zeros([0], dtype=x.dtype)\n"
        "    if offset:\n        x = _zeros()\n    else:\n        x = tf.cond(offset > 0, lambda: _zeros(), lambda: x)\n"
        "    return x\n",
        _T + "def for_stmt(it, body):\n    has_next = True\n    def get_state():\n        return (has_next,)\n"
        "    def aug_body():\n        nonlocal has_next\n        has_next = it.has_value()\n"
        "        return get_state()\n    return tf.while_loop(lambda: has_next, aug_body, [])\n",
        _T + "def convert(x):\n    seen = None\n    def body(i):\n        return i + seen\n    seen = 1\n"
        "    return tf.while_loop(lambda i: i < 3, body, [x])\n",
        # The guide's buggy_add (TensorFlow guide "Better performance with tf.function", "Depending on Python
        # global and free variables") as scripts use it: called between two bindings, never after the last.
        _T + "@tf.function\ndef buggy_add():\n    return 1 + foo\nfoo = 1\nprint(buggy_add())\nfoo = 100\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        reported: set[tuple[FunctionInfo, str]] = set()
        for node, info in facts.graph_nodes(ast.Name):
            assert isinstance(node, ast.Name)
            if not isinstance(node.ctx, ast.Load) or (info, node.id) in reported:
                continue
            rebinding = _later_rebinding(facts, node, info)
            if rebinding is not None:
                reported.add((info, node.id))
                yield self.finding(facts, node, _message(node.id, facts.line_name(rebinding.node.lineno)), function=info)


def _later_rebinding(facts: FileFacts, name: ast.Name, info: FunctionInfo) -> Binding | None:
    """The binding that gives an outer name a new value after `info` is defined, if any."""
    if name.id in info.scope.global_names or name.id in info.scope.nonlocal_names:
        return None  # the function rebinds it itself: TFC002 reports that
    if facts.outer_name_owner(name, info) is None:
        return None
    if facts.input_pipeline_only(info):
        return None  # `Dataset.map` traces it when the pipeline is built: each pipeline keeps the value it was built with
    scope = facts.binding_scope(name)
    assert scope is not None
    bindings = scope.bindings.get(name.id, [])
    if any(b.kind in _CODE_BINDINGS for b in bindings) or not facts.is_rebound(scope, name.id):
        return None
    if any(_holds_code_or_variable(facts, b.value) for b in bindings if b.value is not None):
        return None
    if scope is not facts.module_scope and not _is_tf_function(facts, info):
        return None  # a helper closure traced inside the call that defines it (control flow, tf.data)
    defined_at = facts.statement_in(info.node, scope.node).end_lineno or info.node.lineno
    for binding in bindings:
        if binding.kind in ("del", "param"):
            continue
        if facts.bound_in_other_function(binding, scope):
            return binding
        later = _in_loop_after(facts, binding, scope, defined_at) or binding.node.lineno > defined_at
        if later and (scope is facts.module_scope and not _calls_on_one_side(facts, info, binding)
                      or scope is not facts.module_scope and _called_before(facts, info, binding, scope)):
            return binding
    return None


def _calls_on_one_side(facts: FileFacts, info: FunctionInfo, binding: Binding) -> bool:
    """A module-level function whose every run the module starts itself, all in statements before the
    one rebinding the name, or all after it (a script or notebook read top to bottom): no trace made with
    the old value is run with the new one.

    A run starts at a module-level statement that calls the function, traces it (`f.get_concrete_function`)
    or passes it on, or that calls a module-level function that does, transitively; such a statement counts
    for this definition only while the function's name is bound to it (a notebook that rebinds the model
    and defines a new `train_step` in one cell runs the new one after). A use in a method, a nested
    function or a function no module-level statement calls may run at any time: then it is not known.
    """
    if info.parent is not None or info.cls is not None:
        return False
    entries = _entry_statements(facts, info)
    if entries is None:
        return False
    rebinding = facts.statement_in(binding.node, facts.source.tree)
    sides = {_side(statement, rebinding) for statement in entries}
    return sides in ({"before"}, {"after"})


def _entry_statements(facts: FileFacts, info: FunctionInfo) -> set[ast.AST] | None:
    """The module-level statements that run `info` (see `_calls_on_one_side`), or None when unknown."""
    tree = facts.source.tree
    definition = facts.statement_in(info.node, tree)
    entries: set[ast.AST] = set()
    pending, seen = [info], set()
    while pending:
        function = pending.pop()
        if id(function) in seen:
            continue
        seen.add(id(function))
        uses = _module_uses(facts, function.name)
        if not uses:
            return None  # imported and run elsewhere, at any time
        for use in uses:
            user = facts.function_of(use)
            if user is None:
                entries.add(facts.statement_in(use, tree))
            elif user.parent is None and user.cls is None:
                pending.append(user)
            else:
                return None
    return {entry for entry in entries if _bound_to(facts, info.name, entry, tree) is definition}


def _module_uses(facts: FileFacts, name: str) -> list[ast.Name]:
    return [use for use in facts.loads_under(None).get(name, ()) if facts.binding_scope(use) is facts.module_scope]


def _bound_to(facts: FileFacts, name: str, statement: ast.AST, tree: ast.AST) -> ast.AST | None:
    """The module-level statement whose binding of `name` is in effect when `statement` runs: the last
    one before it (None when the name is bound only after)."""
    before = [facts.statement_in(b.node, tree) for b in facts.module_scope.bindings.get(name, ())]
    before = [s for s in before if s.lineno <= statement.lineno]  # type: ignore[attr-defined]
    return max(before, key=lambda s: s.lineno, default=None)  # type: ignore[attr-defined]


def _side(statement: ast.AST, rebinding: ast.AST) -> str:
    if statement is rebinding:
        return "same"
    return "before" if statement.lineno < rebinding.lineno else "after"  # type: ignore[attr-defined]


def _is_tf_function(facts: FileFacts, info: FunctionInfo) -> bool:
    """A tf.function object of its own, which keeps its traces between calls."""
    reason = facts.graph_functions.get(info, "")
    return facts.decorated_tf_function(info) is not None or reason.startswith("passed to tf.function")


def _called_before(facts: FileFacts, info: FunctionInfo, binding: Binding, scope: Scope) -> bool:
    """In the enclosing function, a call of `info` runs before the rebinding and the function runs again.

    A closure is created anew on each call of the function around it, so a rebinding there matters
    only if the traced function was already called: earlier in the same block, or in the same loop.
    """
    rebinding = facts.enclosing_statement(binding.node)
    for call, caller in facts.callers(info):
        if caller is None or caller.scope is not scope:
            continue
        if facts.common_loop(binding.node, call, scope.node) is not None or _earlier_in_block(facts, call, rebinding):
            return True
    return False


def _earlier_in_block(facts: FileFacts, call: ast.AST, statement: ast.AST) -> bool:
    """The call is in a statement that precedes `statement` in the same block."""
    block_owner = facts.parent(statement)
    for ancestor in [call, *facts.ancestors(call)]:
        if facts.parent(ancestor) is block_owner and isinstance(ancestor, ast.stmt):
            for field_name in ("body", "orelse", "finalbody"):
                block = getattr(block_owner, field_name, None)
                if isinstance(block, list) and ancestor in block and statement in block:
                    return block.index(ancestor) < block.index(statement)
            return False
    return False


def _holds_code_or_variable(facts: FileFacts, value: ast.expr) -> bool:
    """A tf.Variable, or an alias of a function, class or module (`CsvDataset = CsvDatasetV2`)."""
    return kinds.VARIABLE in facts.kinds(value) or kinds.FUNCTION in facts.kinds(value) \
        or (isinstance(value, (ast.Name, ast.Attribute)) and facts.resolve(value) is not None)


def _in_loop_after(facts: FileFacts, binding: Binding, scope: Scope, defined_at: int) -> bool:
    """A binding in a loop whose body runs after the definition (the loop encloses it or follows it)."""
    statement = facts.statement_in(binding.node, scope.node)
    return isinstance(statement, LOOPS) and (statement.end_lineno or 0) > defined_at


def _message(name: str, rebound_at: str) -> str:
    return (f"`{name}` is captured when the function is traced, but it is rebound at {rebound_at}: "
            "the graph keeps the old value; pass it as an argument, or make it a tf.Variable and assign to it")
