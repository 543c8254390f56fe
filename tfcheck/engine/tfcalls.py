"""Calls of tf.functions: which Python function a call traces, and which argument each parameter gets.

Several pitfalls are about what a tf.function is *called with*, not what it does: Python numbers that
change from call to call (one trace each), new plain objects (one trace each), a second optimizer or
an unbuilt model (variables created on a later trace), Python lists or iterators passed where the
body loops or calls `next()`. They all need the same fact, found once per file: the call sites of
the file's tf.functions with their arguments bound to parameters.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from collections.abc import Callable, Hashable, Iterable, Iterator

from tfcheck.engine.index import FileIndex, bind_arguments
from tfcheck.engine.scopes import FunctionInfo


@dataclass(frozen=True, eq=False)
class TfFunctionCall:
    """One call of a tf.function of this file (`f(...)` or `f.get_concrete_function(...)`).

    `identity` is the node that creates the tf.function object (the decorated def, or the
    `tf.function(g)` call a name is bound to): two calls with the same identity share one trace cache.
    """

    call: ast.Call
    function: FunctionInfo
    identity: ast.AST
    has_signature: bool
    arguments: dict[str, ast.expr]
    caller: FunctionInfo | None


def find_explicit_traces(index: FileIndex) -> frozenset[tuple[FunctionInfo, FunctionInfo]]:
    """(function, traced) for every `traced.get_concrete_function(...)` call made in `function`."""
    found: set[tuple[FunctionInfo, FunctionInfo]] = set()
    for call, caller in index.calls:
        func = call.func
        if caller is not None and isinstance(func, ast.Attribute) and func.attr == "get_concrete_function":
            found.update((caller, traced) for traced in index.function_target(func.value))
    return frozenset(found)


def arguments_for(calls: Iterable[TfFunctionCall], parameter: str) -> Iterator[tuple[TfFunctionCall, ast.expr]]:
    """The argument each call gives `parameter` (calls that leave it to its default are skipped)."""
    for call in calls:
        argument = call.arguments.get(parameter)
        if argument is not None:
            yield call, argument


ValueOf = Callable[[TfFunctionCall, str, ast.expr], "tuple[Hashable, ...] | None"]


def varying_arguments(calls: Iterable[TfFunctionCall], value_of: ValueOf) -> Iterator[tuple[TfFunctionCall, str, ast.expr]]:
    """Calls that give a parameter of a tf.function object a value other than its first call did.

    `value_of(call, parameter, argument)` says what an argument is (None: not a value this question is
    about), as the values it can be: a loop variable may stand for several. The first value seen for (tf.function object,
    parameter) is the one its trace was made for; a later argument that can be another one is yielded.
    """
    first: dict[tuple[int, str], Hashable] = {}
    for tf_call in calls:
        for parameter, argument in tf_call.arguments.items():
            found = value_of(tf_call, parameter, argument)
            if found is None:
                continue
            seen = first.setdefault((id(tf_call.identity), parameter), found[0])
            if any(value != seen for value in found):
                yield tf_call, parameter, argument


def tf_function_definitions(index: FileIndex) -> list[FunctionInfo]:
    """Functions that are a tf.function themselves, not only reached from one: decorated, or passed to
    `tf.function(...)`. What TensorFlow checks at the function's boundary (its arguments, what it
    returns) applies to these alone."""
    found = [info for info in index.functions if index.decorated_tf_function(info) is not None]
    for call, _ in index.calls:
        if call.args and index.resolve(call.func) in index.tf_function_names:
            found.extend(info for info in index.function_target(call.args[0]) if info not in found)
    return found


def find_tf_function_calls(index: FileIndex) -> list[TfFunctionCall]:
    """Every call of a tf.function of this file, in source order, including through forwarding helpers."""
    found: list[TfFunctionCall] = []
    for call, caller in index.calls:
        direct = _direct_call(index, call, caller)
        if direct is not None:
            found.append(direct)
        else:
            found.extend(_forwarded_call(index, call, caller))
    found.sort(key=lambda c: (c.call.lineno, c.call.col_offset))
    return found


def _direct_call(index: FileIndex, call: ast.Call, caller: FunctionInfo | None) -> TfFunctionCall | None:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "get_concrete_function":
        func = func.value
    target = tf_function_object(index, func)
    if target is None:
        return None
    function, identity, has_signature = target
    skip_self = function.cls is not None and isinstance(func, ast.Attribute)
    return TfFunctionCall(call, function, identity, has_signature,
                          bind_arguments(function, call.args, call.keywords, skip_self), caller)


def tf_function_object(index: FileIndex, expr: ast.expr) -> tuple[FunctionInfo, ast.AST, bool] | None:
    """What a callable expression is when it is a tf.function of this file: (function, identity, signed).

    A name bound to a decorated def, `self.method` of a decorated method, or a name bound (once) to
    `tf.function(g, ...)`. A plain def is not a tf.function even if some other call wraps it.
    """
    if isinstance(expr, ast.Attribute) and index.is_self_attribute(expr):
        targets = index.function_target(expr)
        return _decorated(index, targets[0]) if len(targets) == 1 else None
    if not isinstance(expr, ast.Name):
        return None
    bindings = index.bindings_of(expr)
    wrapped = [b for b in bindings if b.kind == "assign" and _wraps_in_tf_function(index, b.value)]
    if len(wrapped) == 1 and all(b is wrapped[0] or b.kind == "def" for b in bindings):
        bindings = wrapped  # `def step(...): ...` then `step = tf.function(step)`
    if len(bindings) != 1:
        return None
    binding = bindings[0]
    if binding.kind == "def":
        info = index.function_info(binding.node)
        return _decorated(index, info) if info is not None else None
    value = binding.value
    if binding.kind == "assign" and _wraps_in_tf_function(index, value):
        assert isinstance(value, ast.Call)
        targets = index.function_target(value.args[0])
        if len(targets) == 1:
            return targets[0], value, any(k.arg == "input_signature" for k in value.keywords)
    return None


def _wraps_in_tf_function(index: FileIndex, value: ast.expr | None) -> bool:
    return isinstance(value, ast.Call) and bool(value.args) and index.resolve(value.func) in index.tf_function_names


def _decorated(index: FileIndex, info: FunctionInfo) -> tuple[FunctionInfo, ast.AST, bool] | None:
    decorator = index.decorated_tf_function(info)
    if decorator is None:
        return None
    return info, info.node, index.has_input_signature(decorator)


def _forwarded_call(index: FileIndex, call: ast.Call, caller: FunctionInfo | None) -> list[TfFunctionCall]:
    """`helper(f, a, b)` where `helper(fn, *args)` calls `fn(*args)` or `fn.get_concrete_function(*args)`."""
    helper = index.called_function(call)
    if helper is None or isinstance(helper.node, ast.Lambda) or helper.node.args.vararg is None:
        return []
    forwarded = _forwarding_parameter(helper)
    if forwarded is None:
        return []
    positional = [a.arg for a in helper.node.args.posonlyargs + helper.node.args.args]
    position = positional.index(forwarded)
    if position >= len(call.args) or any(isinstance(a, ast.Starred) for a in call.args):
        return []
    target = tf_function_object(index, call.args[position])
    if target is None:
        return []
    function, identity, has_signature = target
    rest = call.args[len(positional):]
    return [TfFunctionCall(call, function, identity, has_signature, bind_arguments(function, rest, []), caller)]


def _forwarding_parameter(helper: FunctionInfo) -> str | None:
    """The parameter `fn` of a helper whose body calls `fn(*args)` / `fn.get_concrete_function(*args)`."""
    vararg = helper.node.args.vararg
    assert vararg is not None
    positional = {a.arg for a in helper.node.args.posonlyargs + helper.node.args.args}
    for node in helper.nodes:
        if not (isinstance(node, ast.Call) and len(node.args) == 1 and isinstance(node.args[0], ast.Starred)):
            continue
        star = node.args[0].value
        if not (isinstance(star, ast.Name) and star.id == vararg.arg):
            continue
        func = node.func.value if isinstance(node.func, ast.Attribute) \
            and node.func.attr == "get_concrete_function" else node.func
        if isinstance(func, ast.Name) and func.id in positional:
            return func.id
    return None
