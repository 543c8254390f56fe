"""Which expressions surely hold tensors, and which code only runs when execution is eager.

Two rules need to know whether an expression is a *tensor value* rather than static information about
one: a Python `assert` on it raises while tracing (TFC008) and a NumPy function applied to it raises
NotImplementedError (TFC011). The answer is deliberately narrow, because a false alarm is worse than a
miss: the result of a TensorFlow operation, a `tf.Variable`, a parameter of a tf.function with an
`input_signature`, and expressions built from those. Static facts about a tensor (`x.shape`,
`x.dtype`, `len(x.shape)`, `x is None`, `isinstance(x, ...)`) are never tensor values, and neither is
a parameter whose type the file does not pin down (it may be a Python number).

Code behind a check of `tf.executing_eagerly()` (or `hasattr(x, "numpy")`, an `EagerTensor` test, ...)
runs only in eager mode even inside graph code; `eager_guarded` finds functions that make such a check.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from tfcheck.engine import values

if TYPE_CHECKING:
    from tfcheck.engine.facts import FileFacts
    from tfcheck.engine.scopes import FunctionInfo

# Attributes of a tensor that are Python values known while tracing.
STATIC_ATTRIBUTES = frozenset({"shape", "dtype", "ndim", "rank", "name", "device", "graph", "op",
                               "is_tensor_like", "trainable", "value_index"})
# TensorFlow calls that return Python values (or NumPy values known at trace time), not tensors.
_STATIC_CALLS = frozenset({
    "tensorflow.get_static_value", "tensorflow.TensorShape", "tensorflow.compat.dimension_value",
    "tensorflow.is_symbolic_tensor", "tensorflow.inside_function",
})
# Internal TensorFlow modules whose functions return tensors; other `tensorflow.python.*` names are
# mostly helpers returning Python values (tensor_util.constant_value, ops.inside_function, ...).
_INTERNAL_OP_MODULES = ("tensorflow.python.ops.math_ops.", "tensorflow.python.ops.array_ops.",
                        "tensorflow.python.ops.gen_math_ops.", "tensorflow.python.ops.gen_array_ops.")
_IDENTITY_OPS = (ast.Is, ast.IsNot, ast.In, ast.NotIn)
_TENSOR_KINDS = frozenset({values.TENSOR, values.VARIABLE})
# Calls that ask whether execution is eager (or whether a value is an eager tensor), or switch to it.
_EAGER_CHECK_CALLS = frozenset({"executing_eagerly", "executing_eagerly_outside_functions", "inside_function",
                                "is_symbolic_tensor", "functions_run_eagerly", "eager_mode"})


def is_tensor_value(facts: FileFacts, expr: ast.AST | None, depth: int = 0) -> bool:
    """Whether `expr` surely evaluates to a tensor (or a tf.Variable) while tracing."""
    if expr is None or depth > 6:
        return False
    if isinstance(expr, ast.Compare):
        if all(isinstance(op, _IDENTITY_OPS) for op in expr.ops):
            return False
        return any(is_tensor_value(facts, side, depth + 1) for side in [expr.left, *expr.comparators])
    if isinstance(expr, ast.BoolOp):
        return any(is_tensor_value(facts, value, depth + 1) for value in expr.values)
    if isinstance(expr, ast.BinOp):
        return is_tensor_value(facts, expr.left, depth + 1) or is_tensor_value(facts, expr.right, depth + 1)
    if isinstance(expr, ast.UnaryOp):
        return is_tensor_value(facts, expr.operand, depth + 1)
    if isinstance(expr, ast.Subscript):
        return is_tensor_value(facts, expr.value, depth + 1)
    if isinstance(expr, ast.Call):
        return _is_tensor_call(facts, expr)
    if isinstance(expr, ast.Name):
        return _is_tensor_name(facts, expr, depth)
    if isinstance(expr, ast.Attribute) and expr.attr not in STATIC_ATTRIBUTES and facts.is_self_attribute(expr):
        return values.VARIABLE in facts.kinds(expr)
    return False


def _is_tensor_call(facts: FileFacts, call: ast.Call) -> bool:
    name = facts.resolve(call.func)
    if name is None or name in _STATIC_CALLS:
        return False
    if name.startswith("tensorflow.python."):
        return name.startswith(_INTERNAL_OP_MODULES) and not name.rsplit(".", 1)[-1].startswith("_")
    return name.startswith("tensorflow.") and bool(facts.kinds(call) & _TENSOR_KINDS)


def _is_tensor_name(facts: FileFacts, name: ast.Name, depth: int) -> bool:
    """A name whose every binding is a tensor value, or a parameter typed by an input_signature."""
    bindings = facts.bindings_of(name)
    if not bindings:
        return False
    if all(b.kind == "param" for b in bindings):
        return facts.is_tensor_param(name)
    return all(b.value is not None and b.value is not name and is_tensor_value(facts, b.value, depth + 1)
               for b in bindings)


def eager_guarded(facts: FileFacts, info: FunctionInfo) -> bool:
    """Whether a function tests for eager execution (or eager tensors) anywhere in its own code.

    Such functions are written to run both ways (`if tf.executing_eagerly(): x.numpy()`, or an early
    return when tracing), or switch to eager mode (`with context.eager_mode():`); their eager-only calls
    sit behind the test, so rules leave them alone. The enclosing functions count too: TensorFlow's
    rnn.py computes `in_graph_mode = not context.executing_eagerly()` and tests it in a nested function.
    """
    while info is not None:  # a nested function often reads a flag its outer function computed
        if any(isinstance(node, ast.Call) and _is_eager_check(facts, node) for node in info.nodes):
            return True
        info = info.parent
    return False


def _is_eager_check(facts: FileFacts, call: ast.Call) -> bool:
    """`tf.executing_eagerly()`, `hasattr(x, "numpy")`, `isinstance(x, EagerTensor)` and the like."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in _EAGER_CHECK_CALLS:
        return True
    if name in ("hasattr", "isinstance") and len(call.args) == 2:
        return any(marker in facts.text(call.args[1]) for marker in ("'numpy'", '"numpy"', "EagerTensor"))
    return False
