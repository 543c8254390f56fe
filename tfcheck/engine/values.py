"""What kind of value an expression or a name holds, as far as the file says.

Rules need to tell a NumPy array from a tensor, a Python list from a dataset, an iterator from a
tf.data iterator. The answer is a small set of kinds (a name can be bound to several values), named
in tfcheck.engine.kinds.
"""

from __future__ import annotations

import ast

from tfcheck.engine.index import FileIndex
from tfcheck.engine.kinds import (DATASET, DICT, FUNCTION, ITERATOR, LAYER, LIST, MODEL, NDARRAY, NONE, NUMBER,
                                  OPTIMIZER, RANGE, SET, STRATEGY, STRING, TENSOR, TENSOR_ARRAY, TF_FUNCTION,
                                  TUPLE, VARIABLE)

_BUILTIN_KINDS = {
    "builtins.list": LIST, "builtins.dict": DICT, "builtins.set": SET, "builtins.tuple": TUPLE,
    "builtins.iter": ITERATOR, "builtins.map": ITERATOR, "builtins.filter": ITERATOR,
    "builtins.zip": ITERATOR, "builtins.enumerate": ITERATOR, "builtins.reversed": ITERATOR,
    "builtins.range": RANGE, "builtins.int": NUMBER, "builtins.float": NUMBER, "builtins.len": NUMBER,
    "builtins.str": STRING, "collections.defaultdict": DICT, "collections.OrderedDict": DICT,
    "collections.deque": LIST, "itertools.count": ITERATOR, "itertools.cycle": ITERATOR,
    "itertools.chain": ITERATOR, "itertools.islice": ITERATOR, "itertools.product": ITERATOR,
}
# tensorflow.* calls that do not return a tensor.
_TF_NOT_TENSOR_PREFIXES = (
    "tensorflow.config.", "tensorflow.TensorSpec", "tensorflow.summary.", "tensorflow.io.gfile",
    "tensorflow.distribute.", "tensorflow.train.", "tensorflow.saved_model.", "tensorflow.GradientTape",
    "tensorflow.TensorArray", "tensorflow.Module", "tensorflow.device", "tensorflow.name_scope",
    "tensorflow.init_scope", "tensorflow.print", "tensorflow.debugging.", "tensorflow.py_function",
    "tensorflow.numpy_function", "tensorflow.experimental.", "tensorflow.random.Generator",
    "tensorflow.get_logger", "tensorflow.autograph.", "tensorflow.nest.", "tensorflow.dtypes.",
    "tensorflow.as_dtype", "tensorflow.is_tensor", "tensorflow.executing_eagerly", "tensorflow.lite.",
    "tensorflow.TensorShape",
)
_NUMPY_NOT_ARRAY = ("numpy.dtype", "numpy.float32", "numpy.float64", "numpy.int32", "numpy.int64",
                    "numpy.pi", "numpy.e", "numpy.inf", "numpy.nan", "numpy.finfo", "numpy.iinfo",
                    "numpy.prod", "numpy.sum", "numpy.mean", "numpy.max", "numpy.min", "numpy.isscalar",
                    "numpy.allclose", "numpy.array_equal", "numpy.ndim", "numpy.shape", "numpy.size")
# TensorArray methods that return a new TensorArray (the others, `stack`, `read`, ..., return tensors).
_TENSOR_ARRAY_METHODS = frozenset({"write", "scatter", "unstack", "split", "mark_used"})
_STRATEGY_GETTERS = frozenset({"tensorflow.distribute.get_strategy", "tensorflow.distribute.experimental_get_strategy"})
_DATASET_METHODS = frozenset({
    "map", "filter", "batch", "padded_batch", "shuffle", "repeat", "prefetch", "cache", "take", "skip",
    "unbatch", "flat_map", "interleave", "zip", "concatenate", "shard", "with_options", "apply",
    "enumerate", "window", "rebatch", "ragged_batch", "group_by_window", "bucket_by_sequence_length",
})


def call_kind(index: FileIndex, call: ast.Call, depth: int) -> set[str]:
    """The kinds a call can return."""
    name = index.resolve(call.func)
    if name is not None:
        kind = _named_call_kind(index, name)
        if kind:
            return {kind}
    func = call.func
    if isinstance(func, ast.Attribute):
        receiver = expr_kinds(index, func.value, depth + 1)
        if DATASET in receiver and func.attr in _DATASET_METHODS:
            return {DATASET}
        if TENSOR_ARRAY in receiver:
            return {TENSOR_ARRAY} if func.attr in _TENSOR_ARRAY_METHODS else {TENSOR}
        if func.attr == "numpy" and (TENSOR in receiver or VARIABLE in receiver):
            return {NDARRAY}
        if func.attr in ("copy", "reshape", "astype", "T", "transpose") and NDARRAY in receiver:
            return {NDARRAY}
    target = index.called_function(call)
    if target is not None and target.is_generator:
        return {ITERATOR}
    cls = index.called_class(call)
    if cls is not None:
        return {index.class_kind(cls)}
    return set()


def _named_call_kind(index: FileIndex, name: str) -> str | None:
    if name in _BUILTIN_KINDS:
        return _BUILTIN_KINDS[name]
    if name.startswith("numpy."):
        return None if name.startswith(_NUMPY_NOT_ARRAY) else NDARRAY
    if name.startswith("tensorflow.data."):
        return DATASET
    if name.startswith("tensorflow.distribute.") and (name.endswith("Strategy") or name in _STRATEGY_GETTERS):
        return STRATEGY
    if name in ("tensorflow.Variable", "keras.Variable"):
        return VARIABLE
    if name == "tensorflow.TensorArray":
        return TENSOR_ARRAY
    if name in index.tf_function_names:
        return TF_FUNCTION
    if name.startswith("keras.optimizers."):
        return OPTIMIZER
    if name.startswith("keras.layers."):
        return LAYER
    if name in ("keras.Model", "keras.Sequential", "keras.models.Model", "keras.models.Sequential") \
            or name.startswith("keras.applications."):
        return MODEL
    if name.startswith("tensorflow.") and not name.startswith(_TF_NOT_TENSOR_PREFIXES):
        return TENSOR
    return None


def expr_kinds(index: FileIndex, expr: ast.expr | None, depth: int = 0) -> set[str]:
    """The kinds `expr` can evaluate to; empty when unknown."""
    if expr is None or depth > 4:
        return set()
    if isinstance(expr, (ast.List, ast.ListComp)):
        return {LIST}
    if isinstance(expr, (ast.Dict, ast.DictComp)):
        return {DICT}
    if isinstance(expr, (ast.Set, ast.SetComp)):
        return {SET}
    if isinstance(expr, ast.Tuple):
        return {TUPLE}
    if isinstance(expr, ast.GeneratorExp):
        return {ITERATOR}
    if isinstance(expr, ast.Constant):
        return {_constant_kind(expr.value)}
    if isinstance(expr, ast.Call):
        return call_kind(index, expr, depth)
    if isinstance(expr, ast.Name):
        return name_kinds(index, expr, depth + 1)
    if isinstance(expr, ast.BinOp):
        both = expr_kinds(index, expr.left, depth + 1) | expr_kinds(index, expr.right, depth + 1)
        return {kind for kind in both if kind in (TENSOR, NDARRAY, NUMBER, LIST, STRING)}
    if isinstance(expr, ast.UnaryOp):
        return expr_kinds(index, expr.operand, depth + 1)
    if isinstance(expr, ast.Subscript):
        base = expr_kinds(index, expr.value, depth + 1)
        return {kind for kind in base if kind in (TENSOR, NDARRAY)}
    if isinstance(expr, ast.Attribute) and index.is_self_attribute(expr):
        cls = index.class_of_self(expr)
        if cls is not None:
            kinds: set[str] = set()
            for _, value in index.self_attribute_values(cls, expr.attr):
                kinds |= expr_kinds(index, value, depth + 1)
            return kinds
    return set()


def _constant_kind(value: object) -> str:
    if value is None:
        return NONE
    if isinstance(value, (str, bytes)):
        return STRING
    return NUMBER


def name_kinds(index: FileIndex, name: ast.Name, depth: int) -> set[str]:
    """Union of the kinds of every value bound to the name `name` refers to."""
    bindings = index.bindings_of(name)
    kinds: set[str] = set()
    for binding in bindings:
        if binding.value is not None and binding.value is not name:
            kinds |= expr_kinds(index, binding.value, depth)
        elif binding.kind == "def":
            kinds.add(FUNCTION)
    return kinds
