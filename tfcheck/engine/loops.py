"""Loops that AutoGraph turns into graph loops: two questions, two names.

`may_be_graph_loop` answers "might this be a graph loop?" from value kinds, which is the right
question for rules that must stay quiet about graph loops (a loop over Python data is only reported
when it is not one). `surely_graph_loop` is for rules that report something *because* a loop is a
graph loop, which need the opposite bias: the evidence must be direct. TensorFlow's internal modules
(`tensorflow.python.util.nest`, ...) and the public ops that return Python lists or tuples
(`tf.unstack`, `tf.split`) do not count, and neither does a name that is also bound to something else
(a parameter converted before the loop, `x = tf.convert_to_tensor(x)`, counts as converted).
"""

from __future__ import annotations

import ast

from tfcheck.engine import kinds, values
from tfcheck.engine.index import FileIndex

# Public ops that return a Python list or tuple of tensors: a loop over the result is a Python loop.
_SEQUENCE_RETURNING = frozenset({
    "tensorflow.unstack", "tensorflow.split", "tensorflow.dynamic_partition", "tensorflow.gradients",
    "tensorflow.meshgrid", "tensorflow.unique", "tensorflow.unique_with_counts", "tensorflow.math.top_k",
    "tensorflow.nn.top_k", "tensorflow.linalg.eigh", "tensorflow.linalg.svd", "tensorflow.nn.moments",
    "tensorflow.shape_n", "tensorflow.identity_n", "tensorflow.raw_ops.Unpack", "tensorflow.math.unsorted_segment_max",
})


def may_be_graph_loop(index: FileIndex, loop: ast.AST) -> bool:
    """Whether AutoGraph may turn this `for`/`while` into a graph loop (tensor or dataset driven)."""
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        if values.expr_kinds(index, loop.iter) & kinds.GRAPH_KINDS:
            return True
        return isinstance(loop.iter, ast.Name) and index.is_tensor_param(loop.iter)
    if isinstance(loop, ast.While):
        return any(values.expr_kinds(index, node) & {kinds.TENSOR, kinds.VARIABLE}
                   or (isinstance(node, ast.Name) and index.is_tensor_param(node))
                   for node in ast.walk(loop.test) if isinstance(node, (ast.Call, ast.Name)))
    return False


def surely_graph_loop(index: FileIndex, loop: ast.AST) -> bool:
    """Whether AutoGraph converts this `for`/`while`, judged only from direct evidence."""
    if not may_be_graph_loop(index, loop):
        return False
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        return _surely_graph_value(index, loop.iter, 0, loop.lineno)
    if isinstance(loop, ast.While):
        return any(_surely_graph_value(index, node, 0, loop.lineno) for node in ast.walk(loop.test)
                   if isinstance(node, (ast.Call, ast.Name)))
    return False


def _surely_graph_value(index: FileIndex, expr: ast.expr, depth: int, line: int) -> bool:
    """A tensor or dataset from a public TensorFlow call, a dataset method, or a name bound only to those."""
    if depth > 4:
        return False
    if isinstance(expr, ast.Call):
        name = index.resolve(expr.func)
        if name is not None:
            return name.startswith("tensorflow.") and not name.startswith("tensorflow.python.") \
                and name not in _SEQUENCE_RETURNING and bool(values.expr_kinds(index, expr) & kinds.GRAPH_KINDS)
        receiver = expr.func.value if isinstance(expr.func, ast.Attribute) else None
        return receiver is not None and kinds.DATASET in values.expr_kinds(index, expr) \
            and _surely_graph_value(index, receiver, depth + 1, line)
    if isinstance(expr, ast.Name):
        bindings = [b for b in index.bindings_of(expr) if b.kind != "augassign"]  # `i += 1` keeps the kind
        if len(bindings) == 1 and bindings[0].kind == "param":
            return _signed_parameter(index, bindings[0].node)
        assigned = [b for b in bindings if b.kind != "param"]
        if len(assigned) < len(bindings) and any(getattr(b.node, "lineno", line) >= line for b in assigned):
            return False  # `x = tf.convert_to_tensor(x)` counts only when it comes before the loop
        return bool(assigned) and all(b.value is not None and b.value is not expr
                                      and _surely_graph_value(index, b.value, depth + 1, line) for b in assigned)
    if isinstance(expr, (ast.Subscript, ast.BinOp, ast.UnaryOp)):
        operands = [expr.value] if isinstance(expr, ast.Subscript) else \
            [expr.operand] if isinstance(expr, ast.UnaryOp) else [expr.left, expr.right]
        return any(_surely_graph_value(index, operand, depth + 1, line) for operand in operands)
    return False


def _signed_parameter(index: FileIndex, arguments: ast.AST) -> bool:
    """A parameter of a function whose tf.function decorator has an input_signature: a tensor."""
    function = index.parent(arguments)
    decorators = getattr(function, "decorator_list", [])
    return any(index.has_input_signature(d) for d in decorators)
