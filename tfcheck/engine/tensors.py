"""Which expressions hold tensors (surely, or maybe), and which code only runs when execution is eager.

Two questions, two names. `surely_tensor`: two rules need to know whether an expression is a *tensor value* rather than static information about
one: a Python `assert` on it raises while tracing (TFC008) and a NumPy function applied to it raises
NotImplementedError (TFC011). The answer is deliberately narrow, because a false alarm is worse than a
miss: the result of a TensorFlow operation, a `tf.Variable`, a parameter of a tf.function with an
`input_signature`, and expressions built from those. Static facts about a tensor (`x.shape`,
`x.dtype`, `len(x.shape)`, `x is None`, `isinstance(x, ...)`) are never tensor values, and neither is
a parameter whose type the file does not pin down (it may be a Python number).

`may_hold_tensor` is the broad answer, for rules about values graph code stores (TFC002 outer-mutation
leaves tensors to TFC009 tensor-leak): in a graph function, arithmetic on its parameters and the
outputs of layers and models count too, since there its parameters are (symbolic) tensors.

Code behind a check of `tf.executing_eagerly()` (or `hasattr(x, "numpy")`, an `EagerTensor` test, ...)
runs only in eager mode even inside graph code; `eager_guarded` finds functions that make such a check.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Hashable

from tfcheck.engine import kinds, values
from tfcheck.engine.index import FileIndex
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
_TENSOR_KINDS = frozenset({kinds.TENSOR, kinds.VARIABLE})
# Calls that ask whether execution is eager (or whether a value is an eager tensor), or switch to it.
_EAGER_CHECK_CALLS = frozenset({"executing_eagerly", "executing_eagerly_outside_functions", "inside_function",
                                "is_symbolic_tensor", "functions_run_eagerly", "eager_mode"})
# The checks that are true only when execution is eager (`inside_function()` and `is_symbolic_tensor()` are
# true while tracing).
_TRUE_WHEN_EAGER = frozenset({"executing_eagerly"})
# `hasattr(x, "numpy")`, `isinstance(x, EagerTensor)`, `isinstance(x, np.ndarray)`: true for a value only
# outside a trace (while tracing, the value is a symbolic tensor; keras-cv 94b0a55 backend/tf_ops.py:111).
_EAGER_MARKERS = ("'numpy'", '"numpy"', "EagerTensor", "ndarray")


def surely_tensor(index: FileIndex, expr: ast.AST | None, depth: int = 0) -> bool:
    """Whether `expr` surely evaluates to a tensor (or a tf.Variable) while tracing."""
    if expr is None or depth > 6:
        return False
    if isinstance(expr, ast.Compare):
        if all(isinstance(op, _IDENTITY_OPS) for op in expr.ops):
            return False
        return any(surely_tensor(index, side, depth + 1) for side in [expr.left, *expr.comparators])
    if isinstance(expr, ast.BoolOp):
        return any(surely_tensor(index, value, depth + 1) for value in expr.values)
    if isinstance(expr, ast.BinOp):
        return surely_tensor(index, expr.left, depth + 1) or surely_tensor(index, expr.right, depth + 1)
    if isinstance(expr, ast.UnaryOp):
        return surely_tensor(index, expr.operand, depth + 1)
    if isinstance(expr, ast.Subscript):
        return surely_tensor(index, expr.value, depth + 1)
    if isinstance(expr, ast.Call):
        return _is_tensor_call(index, expr)
    if isinstance(expr, ast.Name):
        return _is_tensor_name(index, expr, depth)
    if isinstance(expr, ast.Attribute) and expr.attr not in STATIC_ATTRIBUTES and index.is_self_attribute(expr):
        return kinds.VARIABLE in values.expr_kinds(index, expr)
    return False


def tensor_metadata(index: FileIndex, expr: ast.AST | None, depth: int = 0) -> bool:
    """Whether `expr` is information about a tensor that tracing knows in full: its static shape, dtype
    or name (`x.shape`, `x.shape[0]`, `len(x.shape)`, `x.get_shape().as_list()`, an f-string or a tuple of
    them). Printing it once per trace shows everything there is; printing a tensor's value does not."""
    if expr is None or depth > 6:
        return False
    if isinstance(expr, ast.Attribute):
        return expr.attr in STATIC_ATTRIBUTES or tensor_metadata(index, expr.value, depth + 1)
    if isinstance(expr, ast.Subscript):
        return tensor_metadata(index, expr.value, depth + 1)
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in ("get_shape", "as_list", "numpy_shape"):
            return True
        name = index.resolve(func)
        return name in ("builtins.len", "builtins.str", "builtins.tuple", "builtins.list", "tensorflow.TensorShape") \
            and bool(expr.args) and all(tensor_metadata(index, arg, depth + 1) for arg in expr.args)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return bool(expr.elts) and all(tensor_metadata(index, element, depth + 1) for element in expr.elts)
    if isinstance(expr, ast.JoinedStr):
        values = [v.value for v in expr.values if isinstance(v, ast.FormattedValue)]
        return bool(values) and all(tensor_metadata(index, value, depth + 1) for value in values)
    return False


def _is_tensor_call(index: FileIndex, call: ast.Call) -> bool:
    name = index.resolve(call.func)
    if name is None or name in _STATIC_CALLS:
        return False
    if name.startswith("tensorflow.python."):
        return name.startswith(_INTERNAL_OP_MODULES) and not name.rsplit(".", 1)[-1].startswith("_")
    return name.startswith("tensorflow.") and bool(values.expr_kinds(index, call) & _TENSOR_KINDS)


def _is_tensor_name(index: FileIndex, name: ast.Name, depth: int) -> bool:
    """A name whose every binding is a tensor value, or a parameter typed by an input_signature."""
    bindings = index.bindings_of(name)
    if not bindings:
        return False
    if all(b.kind == "param" for b in bindings):
        return index.is_tensor_param(name)
    return all(b.value is not None and b.value is not name
               and _once(index, ("surely_tensor", b.value, depth + 1),
                         lambda value=b.value: surely_tensor(index, value, depth + 1))
               for b in bindings)


def _once(index: FileIndex, key: Hashable, compute: Callable[[], bool]) -> bool:
    """`compute()` once per file for `key` (a binding's value and the depth it is asked at): the names
    that share a value share its answer, so a value that names itself many times (a fuzzer's
    `c = c and c and ...`, 4,000 operands) costs its size times the depth, not its size to the depth."""
    found = index.verdicts.get(key)
    if found is None:
        found = index.verdicts[key] = compute()
    return found


def may_hold_tensor(index: FileIndex, expr: ast.expr | None, info: FunctionInfo, depth: int = 0) -> bool:
    """Whether `expr` may hold a tensor computed in the graph function `info` (a broad answer: see
    `surely_tensor` for the narrow one).

    Beyond what the value kinds say (`tf.*` results), arithmetic on the function's parameters and the
    outputs of layers and models count: in graph code their parameters are (symbolic) tensors. So does a
    TensorArray, which holds the trace's tensors. A bare
    parameter does not: it may be a Python value passed in, and storing it is a plain side effect.
    """
    if expr is None or depth > 6:
        return False
    found = values.expr_kinds(index, expr)
    if kinds.TENSOR in found or kinds.TENSOR_ARRAY in found:
        return True
    if isinstance(expr, ast.BinOp):
        sides = (expr.left, expr.right)
        if any(kinds.STRING in values.expr_kinds(index, side) for side in sides):
            return False
        return any(_tensor_operand(index, side, info, depth) for side in sides)
    if isinstance(expr, ast.UnaryOp):
        return _tensor_operand(index, expr.operand, info, depth)
    if isinstance(expr, ast.Name) and _local_tensor(index, expr, info, depth):
        return True
    if found & kinds.TF_OBJECT_KINDS or found & kinds.PLAIN_KINDS:
        return False
    if isinstance(expr, ast.Call):
        return bool(values.expr_kinds(index, expr.func) & {kinds.LAYER, kinds.MODEL, kinds.TF_FUNCTION})
    return False


def _tensor_operand(index: FileIndex, expr: ast.expr, info: FunctionInfo, depth: int) -> bool:
    if isinstance(expr, ast.Name) and _traced_parameter(index, expr, info):
        return True
    return may_hold_tensor(index, expr, info, depth + 1)


def _traced_parameter(index: FileIndex, name: ast.Name, info: FunctionInfo) -> bool:
    """A parameter of the graph function, other than `self`/`cls` of a method."""
    if not index.is_parameter(name, info):
        return False
    return not (info.cls is not None and info.params and info.params[0] == name.id)


def _local_tensor(index: FileIndex, name: ast.Name, info: FunctionInfo, depth: int) -> bool:
    """A local of `info` whose every assignment is a tensor."""
    if index.binding_scope(name) is not info.scope:
        return False
    bindings = index.bindings_of(name)
    return bool(bindings) and all(b.kind == "assign" and b.value is not None and b.value is not name
                                  and _once(index, ("may_hold_tensor", b.value, info.node, depth + 1),
                                            lambda value=b.value: may_hold_tensor(index, value, info, depth + 1))
                                  for b in bindings)


def eager_guarded(index: FileIndex, info: FunctionInfo) -> bool:
    """Whether a function tests for eager execution (or eager tensors) anywhere in its own code.

    Such functions are written to run both ways (`if tf.executing_eagerly(): x.numpy()`, or an early
    return when tracing), or switch to eager mode (`with context.eager_mode():`); their eager-only calls
    sit behind the test, so rules leave them alone. The enclosing functions count too: TensorFlow's
    rnn.py computes `in_graph_mode = not context.executing_eagerly()` and tests it in a nested function.
    """
    while info is not None:  # a nested function often reads a flag its outer function computed
        if any(isinstance(node, ast.Call) and _is_eager_check(index, node) for node in info.nodes):
            return True
        info = info.parent
    return False


def _is_eager_check(index: FileIndex, call: ast.Call) -> bool:
    """`tf.executing_eagerly()`, `hasattr(x, "numpy")`, `isinstance(x, EagerTensor)` and the like."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in _EAGER_CHECK_CALLS:
        return True
    if name in ("hasattr", "isinstance") and len(call.args) == 2:
        return any(marker in index.text(call.args[1]) for marker in _EAGER_MARKERS)
    return False


def in_eager_only_branch(index: FileIndex, node: ast.AST, info: FunctionInfo) -> bool:
    """Whether `node` sits in a branch of `info` that runs only eagerly: the body of `if <check>:` or the
    else branch of `if not <check>:`, with a check true only in eager mode (`tf.executing_eagerly()`,
    `hasattr(x, "numpy")`, `isinstance(x, EagerTensor)`). While tracing, that branch is skipped."""
    child = node
    for ancestor in index.ancestors(node):
        if ancestor is info.node:
            return False
        if isinstance(ancestor, ast.If) and child is not ancestor.test:
            test, negated = ancestor.test, False
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, negated = test.operand, True
            branch = ancestor.orelse if negated else ancestor.body
            if isinstance(test, ast.Call) and _true_when_eager(index, test) and any(child is s for s in branch):
                return True
        child = ancestor
    return False


def _true_when_eager(index: FileIndex, call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in _TRUE_WHEN_EAGER or (_is_eager_check(index, call) and name in ("hasattr", "isinstance"))


def unknown_dimensions(index: FileIndex, info: FunctionInfo) -> dict[str, frozenset[int]]:
    """The axes an input_signature leaves unknown, per parameter of the tf.function `info`:
    `tf.TensorSpec([None, 3])` for `x` gives `{"x": {0}}`. Only signatures written as a list or
    tuple of `TensorSpec`s with literal shapes count; their `None` axes are None in `x.shape` while
    tracing, whatever the caller passes."""
    decorator = index.decorated_tf_function(info)
    signature = next((k.value for k in decorator.keywords if k.arg == "input_signature"), None) \
        if isinstance(decorator, ast.Call) else None
    if not isinstance(signature, (ast.List, ast.Tuple)):
        return {}
    positional = [a.arg for a in info.node.args.posonlyargs + info.node.args.args]
    if info.cls is not None:
        positional = positional[1:]
    found = {}
    for name, spec in zip(positional, signature.elts):
        axes = _unknown_axes(index, spec)
        if axes:
            found[name] = axes
    return found


def _unknown_axes(index: FileIndex, spec: ast.expr) -> frozenset[int]:
    """The `None` axes of a `tf.TensorSpec(shape, ...)` with a literal shape."""
    if not isinstance(spec, ast.Call) or (index.resolve(spec.func) or "").rsplit(".", 1)[-1] != "TensorSpec":
        return frozenset()
    shape = spec.args[0] if spec.args else next((k.value for k in spec.keywords if k.arg == "shape"), None)
    if not isinstance(shape, (ast.List, ast.Tuple)):
        return frozenset()
    return frozenset(axis for axis, dim in enumerate(shape.elts) if isinstance(dim, ast.Constant) and dim.value is None)
