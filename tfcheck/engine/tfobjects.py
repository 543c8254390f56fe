"""TensorArrays, tf.data iterators, and single tensors (as opposed to Python sequences of tensors).

Issue 14's pitfalls need three narrow facts the value kinds do not give. Is an expression a
`tf.TensorArray`, whose `write` returns a new array instead of changing this one? Is it a tf.data
iterator (`iter(dataset)`), whose `next()` is a graph op that raises OutOfRangeError instead of
returning a default? Is it one tensor, which Python cannot iterate in graph code, rather than the
list or tuple of tensors that `tf.unstack` or `tf.cond` return, which it can? As everywhere in the
engine the answers are deliberately narrow: what the file does not pin down is none of these.
"""

from __future__ import annotations

import ast
from typing import Protocol

from tfcheck.engine import values
from tfcheck.engine.scopes import Binding, ClassInfo, FunctionInfo, Scope
from tfcheck.engine.tensors import surely_tensor
from tfcheck.engine.tfcalls import TfFunctionCall


class FileFacts(Protocol):
    """What these facts read: the index's lookups, value kinds and the calls of each tf.function.
    The FileFacts front (a FileIndex) provides all of them; an analysis never imports the front."""

    def bindings_of(self, name: ast.Name) -> list[Binding]: ...
    def binding_scope(self, name: ast.Name) -> Scope | None: ...
    def function_info(self, node: ast.AST) -> FunctionInfo | None: ...
    def resolve(self, expr: ast.AST) -> str | None: ...
    def is_self_attribute(self, expr: ast.AST) -> bool: ...
    def class_of_self(self, expr: ast.Attribute) -> ClassInfo | None: ...
    def self_attribute_values(self, cls: ClassInfo, attr: str) -> list[tuple[ast.AST, ast.expr | None]]: ...
    def is_tensor_param(self, name: ast.Name) -> bool: ...
    def kinds(self, expr: ast.AST) -> set[str]: ...
    def tf_function_calls_of(self, info: FunctionInfo) -> list[TfFunctionCall]: ...

# TensorArray methods that return a new TensorArray: the one they are called on is left as it was.
TENSOR_ARRAY_UPDATES = frozenset({"write", "scatter", "unstack", "split"})
# Methods that make a distributed dataset, whose iterator behaves like a tf.data iterator.
_DISTRIBUTE_METHODS = frozenset({"experimental_distribute_dataset", "distribute_datasets_from_function",
                                 "experimental_distribute_datasets_from_function"})
# Public ops (and functional control flow) that return a Python list or tuple of tensors, or whatever
# structure their callback returns: iterating over the result in Python is fine.
_SEQUENCE_RETURNING = frozenset({
    "unstack", "split", "dynamic_partition", "gradients", "meshgrid", "unique", "unique_with_counts", "top_k",
    "eigh", "eig", "svd", "qr", "lu", "moments", "weighted_moments", "shape_n", "identity_n", "Unpack",
    "cond", "case", "switch_case", "while_loop", "map_fn", "scan", "foldl", "foldr", "vectorized_map",
    "py_function", "numpy_function", "py_func", "eager_py_func", "custom_gradient", "recompute_grad", "tuple", "group",
    "max_pool_with_argmax", "fractional_max_pool", "fractional_avg_pool", "ctc_greedy_decoder",
    "ctc_beam_search_decoder", "unicode_decode_with_offsets", "broadcast_gradient_args", "batch_gather_nd",
    # Several outputs, unpacked in real code (docs/journal/precision.md, issue 14 evaluation), and their siblings.
    "clip_by_global_norm", "combined_non_max_suppression", "non_max_suppression_padded",
    "non_max_suppression_with_scores", "sample_distorted_bounding_box", "stateless_sample_distorted_bounding_box",
    "parse_single_sequence_example", "parse_sequence_example", "decode_csv", "slogdet", "fused_batch_norm",
    "sufficient_statistics", "normalize_moments", "setdiff1d", "approx_max_k", "approx_min_k", "quantize",
    "dynamic_rnn", "static_rnn", "bidirectional_dynamic_rnn", "static_bidirectional_rnn", "fill_empty_rows",
    "unicode_split_with_offsets", "decode_wav", "ctc_unique_labels", "compute_accidental_hits",
    "log_uniform_candidate_sampler", "uniform_candidate_sampler", "fixed_unigram_candidate_sampler",
    "learned_unigram_candidate_sampler", "all_candidate_sampler",
})
# Generated op wrappers (`tf.raw_ops.X`, `gen_*_ops.x`) return a namedtuple when the op has several outputs.
_GENERATED_OPS = (".raw_ops.", ".gen_")
_MAX_DEPTH = 6


def tensor_array_origins(facts: FileFacts, expr: ast.expr | None, depth: int = 0) -> list[ast.Call]:
    """The `tf.TensorArray(...)` calls the array `expr` holds comes from; empty unless it surely is one.

    `expr` is a TensorArray constructor, an update of one (`ta.write(...)`), or a name or `self.x`
    holding only those. A name rebound by a method of itself (`ta = ta.write(i, x)`, `ta = ta.stack()`)
    keeps the kind of its other bindings: a tensor has no `write`, so wherever such a name meets
    `.write(...)` it still holds the array. Where the array was made matters: one made eagerly is
    changed in place by `write`, even from graph code.
    """
    if expr is None or depth > _MAX_DEPTH:
        return []
    if isinstance(expr, ast.Call):
        name = facts.resolve(expr.func)
        if name is not None:
            return [expr] if name.startswith("tensorflow.") and name.endswith(".TensorArray") else []
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in TENSOR_ARRAY_UPDATES:
            return tensor_array_origins(facts, func.value, depth + 1)
        return []
    if isinstance(expr, ast.Name):
        assigned_values = [b.value for b in facts.bindings_of(expr) if not _updates_itself(b)]
    elif isinstance(expr, ast.Attribute) and facts.is_self_attribute(expr):
        cls = facts.class_of_self(expr)
        assigned = [value for _, value in facts.self_attribute_values(cls, expr.attr)] if cls is not None else []
        assigned_values = [value for value in assigned if not _method_of_attribute(value, expr.attr)]
    else:
        return []
    origins: list[ast.Call] = []
    for value in assigned_values:
        found = tensor_array_origins(facts, value, depth + 1)
        if not found:
            return []
        origins.extend(found)
    return origins


def _updates_itself(binding: Binding) -> bool:
    """`ta = ta.<method>(...)` (or a chain of methods starting at `ta`)."""
    receiver = chain_root(binding.value)
    return isinstance(receiver, ast.Name) and receiver.id == binding.name


def _method_of_attribute(value: ast.expr | None, attr: str) -> bool:
    """`self.ta = self.ta.<method>(...)`."""
    receiver = chain_root(value)
    return isinstance(receiver, ast.Attribute) and receiver.attr == attr and isinstance(receiver.value, ast.Name)


def chain_root(value: ast.expr | None) -> ast.expr | None:
    """The object a chain of method calls starts from: `ta` in `ta.write(0, x).write(1, y)`."""
    if not isinstance(value, ast.Call):
        return None
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        value = value.func.value
    return value


def is_dataset_iterator(facts: FileFacts, expr: ast.expr | None, depth: int = 0) -> bool:
    """`iter(dataset)`, `dataset.__iter__()`, `iter(strategy.experimental_distribute_dataset(...))`, or a
    name or `self.x` bound only to those."""
    if expr is None or depth > _MAX_DEPTH:
        return False
    if isinstance(expr, ast.Call):
        func = expr.func
        if facts.resolve(func) == "builtins.iter" and len(expr.args) == 1 and not expr.keywords:
            return _is_iterable_dataset(facts, expr.args[0], depth + 1)
        return isinstance(func, ast.Attribute) and func.attr == "__iter__" and not expr.args \
            and _is_iterable_dataset(facts, func.value, depth + 1)
    if isinstance(expr, ast.Name):
        bindings = facts.bindings_of(expr)
        return bool(bindings) and all(b.value is not None and b.value is not expr
                                      and is_dataset_iterator(facts, b.value, depth + 1) for b in bindings)
    if isinstance(expr, ast.Attribute) and facts.is_self_attribute(expr):
        cls = facts.class_of_self(expr)
        assigned = [value for _, value in facts.self_attribute_values(cls, expr.attr)] if cls is not None else []
        return bool(assigned) and all(is_dataset_iterator(facts, value, depth + 1) for value in assigned)
    return False


def _is_iterable_dataset(facts: FileFacts, expr: ast.expr, depth: int) -> bool:
    """A tf.data dataset or a distributed dataset (`strategy.experimental_distribute_dataset(ds)`)."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _DISTRIBUTE_METHODS:
        return True
    if isinstance(expr, ast.Name):
        bindings = facts.bindings_of(expr)
        if bindings and all(b.value is not None and b.value is not expr for b in bindings) and depth <= _MAX_DEPTH:
            return all(_is_iterable_dataset(facts, b.value, depth + 1) for b in bindings)  # type: ignore[arg-type]
    return facts.kinds(expr) == {values.DATASET}


def is_single_tensor(facts: FileFacts, expr: ast.expr | None, depth: int = 0) -> bool:
    """Whether `expr` is surely one tensor (or tf.Variable), never a Python list or tuple of tensors.

    A tensor value in the sense of `tensors.surely_tensor`, not built from an op that returns a
    sequence; a parameter of a tf.function counts when every call of it in the file passes one (or a
    NumPy array, which tf.function turns into a tensor), and so does a local every assignment of
    which is one (`act_value = h_actions[index]`, with `h_actions` such a parameter).
    """
    if expr is None or depth > _MAX_DEPTH:
        return False
    if isinstance(expr, ast.Name):
        if _is_packed_parameter(facts, expr):
            return False  # `*args` is a tuple even under an input_signature
        if _is_tensor_parameter(facts, expr, depth) or _assigned_single_tensors(facts, expr, depth):
            return True
    operands = _tensor_operands(expr)
    if operands and any(is_single_tensor(facts, operand, depth + 1) for operand in operands):
        return True
    # (the front that passes itself as `facts` is a FileIndex)
    return surely_tensor(facts, expr) and not _may_be_sequence(facts, expr, depth)  # type: ignore[arg-type]


def is_keras_model(facts: FileFacts, expr: ast.expr | None) -> bool:
    """Whether `expr` is surely a Keras model: its value is one (`keras.Sequential()`, an instance of a
    `keras.Model` subclass of the file), or it is a parameter of a tf.function that every call of it in the
    file fills with one (`test(model, x)`)."""
    if expr is None:
        return False
    if facts.kinds(expr) == {values.MODEL}:
        return True
    if not isinstance(expr, ast.Name) or any(b.kind != "param" for b in facts.bindings_of(expr)):
        return False
    scope = facts.binding_scope(expr)
    function = facts.function_info(scope.node) if scope is not None else None
    arguments = [call.arguments.get(expr.id) for call in facts.tf_function_calls_of(function)] if function else []
    return bool(arguments) and all(argument is not None and facts.kinds(argument) == {values.MODEL}
                                   for argument in arguments)


def _assigned_single_tensors(facts: FileFacts, name: ast.Name, depth: int) -> bool:
    bindings = facts.bindings_of(name)
    return bool(bindings) and all(b.kind == "assign" and b.value is not None and b.value is not name
                                  and is_single_tensor(facts, b.value, depth + 1) for b in bindings)


def _tensor_operands(expr: ast.expr) -> list[ast.expr]:
    """The operands that make `expr` a tensor when one of them is: `x > 0`, `x + 1`, `-x`, `x[i]`, `a and x`."""
    if isinstance(expr, ast.Compare):
        identity = all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in expr.ops)
        return [] if identity else [expr.left, *expr.comparators]
    if isinstance(expr, ast.BinOp):
        return [expr.left, expr.right]
    if isinstance(expr, ast.UnaryOp):
        return [expr.operand]
    if isinstance(expr, ast.Subscript):
        return [expr.value]
    if isinstance(expr, ast.BoolOp):
        return list(expr.values)
    return []


def _may_be_sequence(facts: FileFacts, expr: ast.expr, depth: int) -> bool:
    """Whether a tensor value might be a list or tuple of tensors (an op returning several, `a + b` of them)."""
    if depth > _MAX_DEPTH:
        return True
    if isinstance(expr, ast.Call):
        name = facts.resolve(expr.func) or ""
        return name.rsplit(".", 1)[-1] in _SEQUENCE_RETURNING or any(part in name for part in _GENERATED_OPS)
    if isinstance(expr, ast.Name):
        return any(b.value is None or _may_be_sequence(facts, b.value, depth + 1) for b in facts.bindings_of(expr)
                   if b.kind != "param")
    if isinstance(expr, ast.BinOp):
        return _may_be_sequence(facts, expr.left, depth + 1) or _may_be_sequence(facts, expr.right, depth + 1)
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice):
        return _may_be_sequence(facts, expr.value, depth + 1)  # `while_loop(...)[1:]` is still a list
    return False  # an element of a sequence of tensors is one tensor; comparisons and unary ops make tensors


def _is_packed_parameter(facts: FileFacts, name: ast.Name) -> bool:
    """`*args` or `**kwargs` of the function that binds `name`."""
    scope = facts.binding_scope(name)
    function = facts.function_info(scope.node) if scope is not None else None
    if function is None:
        return False
    arguments = function.node.args
    return any(packed is not None and packed.arg == name.id for packed in (arguments.vararg, arguments.kwarg))


def _is_tensor_parameter(facts: FileFacts, name: ast.Name, depth: int) -> bool:
    """A parameter that is a tensor (an input_signature, or every call of the tf.function in this file passes
    one), and stays one: rebound only by tensor operations on itself (`x = x - 1`, `t += 1`) or to tensors."""
    bindings = facts.bindings_of(name)
    if [b.kind for b in bindings].count("param") != 1:
        return False
    if not (facts.is_tensor_param(name) or _filled_with_tensors(facts, name, depth)):
        return False
    return all(b.kind in ("param", "augassign") or _keeps_tensor(facts, b.value, name.id, depth) for b in bindings)


def _keeps_tensor(facts: FileFacts, value: ast.expr | None, name: str, depth: int) -> bool:
    if value is None:
        return False
    if any(isinstance(operand, ast.Name) and operand.id == name for operand in _tensor_operands(value)):
        return True
    return is_single_tensor(facts, value, depth + 1)


def _filled_with_tensors(facts: FileFacts, name: ast.Name, depth: int) -> bool:
    """Every call of the tf.function in this file passes a single tensor for the parameter `name`."""
    scope = facts.binding_scope(name)
    function = facts.function_info(scope.node) if scope is not None else None
    if function is None:
        return False
    arguments = [call.arguments.get(name.id) for call in facts.tf_function_calls_of(function)]
    return bool(arguments) and all(argument is not None and facts.kinds(argument) == {values.NDARRAY}
                                   or is_single_tensor(facts, argument, depth + 1) for argument in arguments)
