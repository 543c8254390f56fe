"""What kind of value an expression or a name holds, as far as the file says.

Rules need to tell a NumPy array from a tensor, a Python list from a dataset, an iterator from a
tf.data iterator. The answer is a small set of kinds (a name can be bound to several values), named
in tfcheck.engine.kinds.

Two answers follow the file's own functions, each computed once per file (`FileIndex.memo`):
- what a function or method of the file returns (`self._helper(x)` resolved through `self.`), and the
  elements of a tuple it returns, followed through unpacking (`p, pi = self._perm(n)`);
- what a constructor parameter holds (`self.list = call_list` in `__init__`): the arguments of every
  instantiation the file shows (`L([])`, `L(call_list=[])`, `super().__init__(...)`), the default
  where one of them (or none at all) leaves it out, and a Keras class's `get_config` entry (Keras'
  `from_config` calls `cls(**config)`), all of which must agree.
What the file does not pin down stays unknown: a parameter some instantiation passes through `*args`
or `**kwargs`, a return value the file cannot tell, a cycle of functions whose answers depend on each
other (recursion), or a chain deeper than `_MEMO_DEPTH`.
"""

from __future__ import annotations

import ast

from collections.abc import Callable, Hashable

from tfcheck.engine.index import FileIndex, bind_arguments
from tfcheck.engine.kinds import (DATASET, DICT, FUNCTION, ITERATOR, LAYER, LIST, MODEL, NDARRAY, NONE, NUMBER,
                                  OPTIMIZER, RANGE, SET, STRATEGY, STRING, TENSOR, TENSOR_ARRAY, TF_FUNCTION,
                                  TUPLE, VARIABLE)
from tfcheck.engine.scopes import Binding, FunctionInfo

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
    "tensorflow.TensorShape", "tensorflow.feature_column.",
)
# tensorflow.* calls that return a Python tuple or list of tensors, not a tensor: iterating or unpacking
# them is plain Python (`probs, _ = tf.linalg.normalize(x)`, `tf.clip_by_global_norm(g, 1.0)[0]`).
_TF_SEQUENCES = {
    **dict.fromkeys(("tensorflow.linalg.normalize", "tensorflow.clip_by_global_norm", "tensorflow.nn.moments",
                     "tensorflow.nn.weighted_moments", "tensorflow.nn.sufficient_statistics", "tensorflow.unique",
                     "tensorflow.unique_with_counts", "tensorflow.math.top_k", "tensorflow.nn.top_k",
                     "tensorflow.linalg.eigh", "tensorflow.linalg.eig", "tensorflow.linalg.svd", "tensorflow.linalg.qr",
                     "tensorflow.linalg.lu", "tensorflow.math.unique"), TUPLE),
    **dict.fromkeys(("tensorflow.unstack", "tensorflow.split", "tensorflow.meshgrid", "tensorflow.gradients",
                     "tensorflow.dynamic_partition", "tensorflow.identity_n", "tensorflow.shape_n"), LIST),
}
# tensorflow.* calls that return whatever structure their arguments give (a tensor or a tuple of them).
_TF_STRUCTURES = frozenset({
    "tensorflow.while_loop", "tensorflow.cond", "tensorflow.case", "tensorflow.switch_case", "tensorflow.map_fn",
    "tensorflow.scan", "tensorflow.foldl", "tensorflow.foldr", "tensorflow.vectorized_map", "tensorflow.recompute_grad",
    "tensorflow.custom_gradient", "tensorflow.tuple", "tensorflow.group",
})
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
    if target is not None:
        return set(returned_kinds(index, target))
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
    if name in _TF_SEQUENCES:
        return _TF_SEQUENCES[name]
    if name in _TF_STRUCTURES:
        return None
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
        return _arithmetic_kinds(expr_kinds(index, expr.left, depth + 1), expr_kinds(index, expr.right, depth + 1))
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


def _arithmetic_kinds(left: set[str], right: set[str]) -> set[str]:
    """What `left op right` can be. A tensor or variable on either side makes a tensor. Otherwise
    both sides must be known: `x * 2` with `x` unknown is unknown, not a number (in a tf.function
    `x` is most often a tensor, and calling it a number hid `(x * 2).numpy()` from TFC011)."""
    both = left | right
    if both & {TENSOR, VARIABLE}:
        return {TENSOR}
    if not left or not right:
        return set()
    return {kind for kind in both if kind in (NDARRAY, LIST, STRING, TUPLE)} | \
        ({NUMBER} if NUMBER in left and NUMBER in right else set())


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
        elif binding.kind == "param":
            kinds |= _parameter_kinds(index, binding, name.id)
        elif binding.kind == "assign":
            kinds |= _unpacked_kinds(index, binding.node, depth)
    return kinds


# -- answers that follow the file's functions, memoized per file --------------------------------------
_MEMO_DEPTH = 8  # functions (or constructors) followed inside each other before the answer is unknown
_TRUSTED_DECORATORS = frozenset({"builtins.staticmethod", "builtins.classmethod"})


def _memoized(index: FileIndex, key: Hashable, compute: Callable[[], set[str]]) -> frozenset[str]:
    """`compute()` once per file for `key`. A key asked for while it is being computed is a cycle: every
    answer on the cycle is unknown (whichever function was asked first), and so is a chain deeper than
    `_MEMO_DEPTH`, which also keeps the recursion of a generated file's call chains bounded."""
    if key in index.memo:
        return index.memo[key]
    stack = index.memo_stack
    if key in stack or len(stack) >= _MEMO_DEPTH:
        for pending in stack[stack.index(key) if key in stack else 0:]:
            index.memo[pending] = frozenset()  # marks the cycle: kept unknown when it finishes
        return frozenset()
    stack.append(key)
    try:
        answer = frozenset(compute())
    finally:
        stack.pop()
    return index.memo.setdefault(key, answer)


def returned_kinds(index: FileIndex, function: FunctionInfo) -> frozenset[str]:
    """The kinds a call of `function` (of this file) returns: every `return` of it must be known."""
    return _memoized(index, ("returns", function), lambda: _all_known(
        [expr_kinds(index, value) if value is not None else {NONE} for value in _returns(index, function)]))


def _returned_element_kinds(index: FileIndex, function: FunctionInfo, position: int, length: int) -> frozenset[str]:
    """The kinds of element `position` of the `length`-tuple every `return` of `function` gives."""
    return _memoized(index, ("element", function, position, length), lambda: _all_known(
        [_element_kinds(index, value, position, length, 0) for value in _returns(index, function)]))


def _returns(index: FileIndex, function: FunctionInfo) -> list[ast.expr | None]:
    """The values `function` returns (None for a bare `return`); none for a function whose calls do not
    return them: one without a `return`, a generator, or one behind a decorator that may change it."""
    node = function.node
    if isinstance(node, ast.Lambda):
        return [node.body]
    if function.is_generator or any(index.resolve(d.func if isinstance(d, ast.Call) else d)
                                    not in _TRUSTED_DECORATORS | index.tf_function_names for d in node.decorator_list):
        return []
    return [stmt.value for stmt in function.nodes if isinstance(stmt, ast.Return)]


def _all_known(answers: list[set[str]]) -> set[str]:
    """What a value with these possible answers can be (their union), when there is at least one and each
    is known; else unknown."""
    if not answers or not all(answers):
        return set()
    return set().union(*answers)


def _element_kinds(index: FileIndex, value: ast.expr | None, position: int, length: int, depth: int) -> set[str]:
    """The kinds of element `position` of `value` unpacked into `length` names: a tuple or list display of
    that length, or a call of a function of the file whose returns are."""
    if isinstance(value, (ast.Tuple, ast.List)):
        if len(value.elts) != length or any(isinstance(e, ast.Starred) for e in value.elts):
            return set()
        return expr_kinds(index, value.elts[position], depth + 1)
    if isinstance(value, ast.Call):
        target = index.called_function(value)
        if target is not None:
            return set(_returned_element_kinds(index, target, position, length))
    return set()


def _unpacked_kinds(index: FileIndex, target: ast.AST, depth: int) -> set[str]:
    """`a, b = value`: the kinds of the element of `value` the name `target` receives."""
    elements = index.parent(target)
    statement = index.parent(elements) if elements is not None else None
    if not (isinstance(elements, (ast.Tuple, ast.List)) and isinstance(statement, ast.Assign)
            and any(t is elements for t in statement.targets)) \
            or any(isinstance(e, ast.Starred) for e in elements.elts):
        return set()
    position = next(i for i, element in enumerate(elements.elts) if element is target)
    return _element_kinds(index, statement.value, position, len(elements.elts), depth)


def _parameter_kinds(index: FileIndex, binding: Binding, name: str) -> set[str]:
    """The kinds a parameter of a constructor (`__init__`) holds, as the file shows it; else unknown."""
    init = index.function_info(binding.scope.node) if binding.scope is not None else None
    if init is None or init.cls is None or init.name != "__init__" or isinstance(init.node, ast.Lambda):
        return set()
    def agreed() -> set[str]:
        answers = [expr_kinds(index, value) for value in _constructor_arguments(index, init, name)]
        return answers[0] if answers and answers[0] and all(answer == answers[0] for answer in answers) else set()

    return set(_memoized(index, ("parameter", init, name), agreed))


def _constructor_arguments(index: FileIndex, init: FunctionInfo, name: str) -> list[ast.expr | None]:
    """What the file passes as the parameter `name` of `init`: each instantiation's argument (or the
    default where it passes none), the default alone when there is no instantiation, and a Keras class's
    `get_config` entry. A call that may pass it through `*args`/`**kwargs` gives an unknown (None)."""
    default = init.default_of(name)
    found: list[ast.expr | None] = []
    for call, implicit_self in index.instantiations(init):
        keywords = [*call.keywords]
        spread = [k for k in keywords if k.arg is None]
        for keyword in spread:  # `L(**cfg)` with `cfg = {"call_list": [], ...}`: the display's entries
            keywords += _spread_entries(index, keyword.value)
        bound = bind_arguments(init, call.args, keywords, skip_self=implicit_self)
        unseen = any(isinstance(a, ast.Starred) for a in call.args) \
            or any(k.arg is None and not _spread_entries(index, k.value) for k in spread)
        argument = bound.get(name) or (None if unseen else default)
        if argument is not None or unseen:
            found.append(argument)
    found.extend(_config_entries(index, init, name))
    if not found and default is not None:
        found.append(default)
    return found


def _spread_entries(index: FileIndex, mapping: ast.expr) -> list[ast.keyword]:
    """The entries of `**mapping` as keywords, when `mapping` is a dict display (or a name bound once to
    one and only read, never changed in place) with constant string keys; else none."""
    if isinstance(mapping, ast.Name):
        bindings = index.bindings_of(mapping)
        scope = index.binding_scope(mapping)
        owner = index.function_info(scope.node) if scope is not None else None
        uses = [use for use in index.loads_under(owner).get(mapping.id, ()) if index.binding_scope(use) is scope]
        if len(bindings) != 1 or not isinstance(bindings[0].value, ast.Dict) \
                or any(not isinstance(index.parent(use), ast.keyword) for use in uses):
            return []
        mapping = bindings[0].value
    if not isinstance(mapping, ast.Dict) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                    for k in mapping.keys):
        return []
    return [ast.keyword(arg=key.value, value=value) for key, value in zip(mapping.keys, mapping.values)]



def _config_entries(index: FileIndex, init: FunctionInfo, name: str) -> list[ast.expr]:
    """`config["name"] = value` and `{"name": value}` in the `get_config` of a Keras class without a
    `from_config` of its own: Keras restores the layer as `cls(**config)`."""
    cls = init.cls
    if cls is None or index.class_kind(cls) not in (LAYER, MODEL) or index.method_of(cls, "from_config") is not None:
        return []
    get_config = index.method_of(cls, "get_config")
    if get_config is None:
        return []
    found: list[ast.expr] = []
    for node in get_config.nodes:
        if isinstance(node, ast.Assign):
            found += [node.value for target in node.targets if isinstance(target, ast.Subscript)
                      and isinstance(target.slice, ast.Constant) and target.slice.value == name]
        elif isinstance(node, ast.Dict):
            found += [value for key, value in zip(node.keys, node.values)
                      if isinstance(key, ast.Constant) and key.value == name]
    return found
