"""TFC036: a value TensorFlow cannot carry across a tf.function's (or a `Dataset.map` function's) boundary."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import ClassInfo, FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_DATACLASS = ("dataclasses.dataclass",)
# Methods by which a class tells tf.nest or the tracing machinery how to take it apart.
_TRACING_PROTOCOL = frozenset({"__tf_flatten__", "__tf_unflatten__", "__tf_tracing_type__"})
_T = "import tensorflow as tf\n"
_DC = "import dataclasses\nimport tensorflow as tf\n"


class UntraceableArgumentOrReturn(Rule):
    """A tf.function cannot return a plain object, nor be given an unhashable one or a keyword named `_x`.

    ## What it does
    Finds, at the boundary of a tf.function (decorated or passed to `tf.function(...)`) or of a
    function passed to `Dataset.map`:

    - a returned instance of a plain class of the file (no base class, no `__tf_flatten__`; a
      `@dataclass` too, frozen or not), or a returned lambda, at the top of the return value or inside
      a tuple, list or dict written there, or through a name bound once to one;
    - an argument of a call of a tf.function of the file that is an instance of a class of the file
      defining `__eq__` without `__hash__`, or of a `@dataclass` that is neither `frozen=True`,
      `unsafe_hash=True` nor `eq=False` (written in the call, or a name bound once to it);
    - a keyword argument whose name starts with `_` and names a parameter of the tf.function.

    ## Why is this bad
    Each fails on the first call, before the function runs (TensorFlow 2.21, every form checked):

    - a tf.function returns tensors, `None` and nested structures of them (tuples, lists, dicts,
      namedtuples, ExtensionTypes): any other object raises `TypeError: To be compatible with
      tf.function, Python functions must return zero or more Tensors or ExtensionTypes or None values`;
      a `Dataset.map` function raises `Unsupported return value from function passed to Dataset.map()`;
    - a tf.function keys its traces by its arguments, so a Python object argument must be hashable:
      a class with `__eq__` and no `__hash__` (a default `@dataclass` is one) raises `TypeError: Could
      not generate a generic TraceType for Config(...). Please verify that it is immutable/hashable`;
    - TensorFlow renames a parameter `_scale` to `arg__scale` for its graph and then binds the call's
      keywords to the new names: `f(x, _scale=3.0)` raises `got an unexpected keyword argument
      'arg__scale'` (passed by position, or caught by `**kwargs`, it works).

    ## Example
    ```python
    @dataclasses.dataclass
    class Config:
        scale: float = 2.0

    @tf.function
    def f(x, config):
        return x * config.scale

    f(tf.constant(1.0), Config())
    ```

    ## Use instead
    ```python
    @dataclasses.dataclass(frozen=True)
    class Config:
        scale: float = 2.0
    ```
    Return a namedtuple, a dict or an ExtensionType instead of a plain object; make argument classes
    immutable and hashable (`frozen=True`); name parameters without a leading underscore.
    """

    code = "TFC036"
    name = "untraceable-argument-or-return"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # docs/coverage.md A5, checked: "Could not generate a generic TraceType for Config(s=2.0)".
        _DC + "@dataclasses.dataclass\nclass Config:\n    s: float = 2.0\n@tf.function\ndef f(x, c):\n"
        "    return x * c.s\nf(tf.constant(1.0), Config())\n",
        _T + "class Cfg:\n    def __init__(self):\n        self.s = 2.0\n    def __eq__(self, other):\n        return True\n"
        "@tf.function\ndef f(x, c):\n    return x * c.s\ncfg = Cfg()\nf(tf.constant(1.0), cfg)\n",
        # G8, checked: "To be compatible with tf.function, Python functions must return zero or more Tensors".
        _T + "class Out:\n    def __init__(self, a):\n        self.a = a\n@tf.function\ndef f(x):\n    return Out(x)\n",
        _DC + "@dataclasses.dataclass(frozen=True)\nclass Out:\n    a: tf.Tensor\n@tf.function\ndef f(x):\n"
        "    return {'a': Out(x)}\n",
        _T + "@tf.function\ndef f(x):\n    return lambda: x\n",
        # G9, checked: "Unsupported return value from function passed to Dataset.map()".
        _T + "class Out:\n    def __init__(self, a):\n        self.a = a\nds = tf.data.Dataset.range(3)\n"
        "ds = ds.map(lambda x: Out(x))\n",
        _T + "class Out:\n    def __init__(self, a):\n        self.a = a\ndef parse(x):\n    out = Out(x)\n    return out\n"
        "ds = tf.data.Dataset.range(3).map(parse)\n",
        # A8, checked: "got an unexpected keyword argument 'arg__scale'".
        _T + "@tf.function\ndef f(x, _scale=2.0):\n    return x * _scale\nf(tf.constant(1.0), _scale=3.0)\n",
        # A10, checked: "Name collision after sanitization ... Original: ['_a', 'arg__a']".
        _T + "@tf.function\ndef f(x, **kw):\n    return x\nf(tf.constant(1.0), _a=1, arg__a=2)\n",
    )
    must_not_flag = (
        # Checked: a frozen, an unsafe_hash and an eq=False dataclass, and a class with __hash__, are hashable.
        _DC + "@dataclasses.dataclass(frozen=True)\nclass Config:\n    s: float = 2.0\n@tf.function\ndef f(x, c):\n"
        "    return x * c.s\nf(tf.constant(1.0), Config())\n",
        _DC + "@dataclasses.dataclass(unsafe_hash=True)\nclass A:\n    s: float = 2.0\n@dataclasses.dataclass(eq=False)\n"
        "class B:\n    s: float = 2.0\n@tf.function\ndef f(x, c):\n    return x * c.s\nf(tf.constant(1.0), A())\n"
        "f(tf.constant(1.0), B())\n",
        _T + "class Cfg:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n"
        "@tf.function\ndef f(x, c):\n    return x\nf(tf.constant(1.0), Cfg())\n",
        # Checked: a namedtuple, a tuple with a string, a Python number are returned; a namedtuple from map.
        _T + "import collections\nNT = collections.namedtuple('NT', 'a')\n@tf.function\ndef f(x):\n    return NT(x)\n"
        "@tf.function\ndef g(x):\n    return x, 'label', 3\nds = tf.data.Dataset.range(3).map(lambda x: NT(x))\n",
        # Not a tf.function: eager code may return anything.
        _T + "class Out:\n    def __init__(self, a):\n        self.a = a\ndef f(x):\n    return Out(x)\n",
        # Checked: the underscore parameter passed by position, or an underscore keyword caught by **kwargs.
        _T + "@tf.function\ndef f(x, _scale=2.0):\n    return x * _scale\nf(tf.constant(1.0), 3.0)\n"
        "@tf.function\ndef g(x, **kw):\n    return x\ng(tf.constant(1.0), _a=1, b=2)\n",
        # Checked: a class that implements tf.nest's protocol is returned.
        _T + "class Out:\n    def __init__(self, a):\n        self.a = a\n    def __tf_flatten__(self):\n"
        "        return (), (self.a,)\n    @classmethod\n    def __tf_unflatten__(cls, metadata, leaves):\n"
        "        return cls(leaves[0])\n@tf.function\ndef f(x):\n    return Out(x)\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for function, where in _boundary_functions(facts):
            for node, what in _untraceable_returns(facts, function):
                yield self.finding(
                    facts, node, f"{where} `{function.name}` returns {what}: only tensors, None and tuples, lists, "
                    "dicts, namedtuples or ExtensionTypes of them can be returned (TypeError on the first call); "
                    "return a namedtuple or a dict")
        for tf_call in facts.tf_function_calls:
            yield from self._call_findings(facts, tf_call.call, tf_call.function, tf_call.arguments)

    def _call_findings(self, facts: FileFacts, call: ast.Call, function: FunctionInfo,
                       arguments: dict[str, ast.expr]) -> Iterator[Finding]:
        for parameter, argument in arguments.items():
            cls = _constructed_class(facts, argument)
            if cls is not None and _unhashable(facts, cls):
                yield self.finding(
                    facts, argument, f"`{cls.name}` defines `__eq__` without `__hash__` (a default `@dataclass` does): "
                    f"passed to tf.function `{function.name}` as `{parameter}`, it raises `Could not generate a generic "
                    "TraceType`; make it hashable (`@dataclass(frozen=True)`)")
        args = function.node.args
        named = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        for keyword in call.keywords:  # this call's own keyword (not a forwarding helper's), to a named parameter
            if (keyword.arg or "").startswith("_") and keyword.arg in named \
                    and arguments.get(keyword.arg) is keyword.value:
                yield self.finding(
                    facts, keyword.value, f"keyword `{keyword.arg}` of tf.function `{function.name}`: TensorFlow "
                    f"renames the parameter `arg_{keyword.arg}` and the call raises `unexpected keyword argument`; "
                    "pass it by position, or rename the parameter")
        passed = {keyword.arg for keyword in call.keywords if keyword.arg}
        for keyword in call.keywords:  # `_a` and `arg__a` through **kwargs: one name once sanitized
            if (keyword.arg or "").startswith("_") and f"arg_{keyword.arg}" in passed:
                yield self.finding(
                    facts, keyword.value, f"keywords `{keyword.arg}` and `arg_{keyword.arg}` of tf.function "
                    f"`{function.name}` are one name once TensorFlow sanitizes `{keyword.arg}`: the call raises "
                    "`Name collision after sanitization`; rename one of them")


def _boundary_functions(facts: FileFacts) -> Iterator[tuple[FunctionInfo, str]]:
    """tf.functions, and functions whose first reason to be graph code is `Dataset.map`."""
    defined = facts.tf_function_definitions
    yield from ((info, "tf.function") for info in defined)
    for info, reason in facts.graph_functions.items():
        if reason.startswith("traced by Dataset.map ") and info not in defined:
            yield info, "the Dataset.map function"


def _untraceable_returns(facts: FileFacts, function: FunctionInfo) -> Iterator[tuple[ast.AST, str]]:
    if isinstance(function.node, ast.Lambda):
        values: list[ast.expr] = [function.node.body]
    else:
        values = [n.value for n in function.nodes if isinstance(n, ast.Return) and n.value is not None]
    for value in values:
        for item in _structure_leaves(value):
            if isinstance(item, ast.Lambda):
                yield item, "a lambda"
                continue
            cls = _constructed_class(facts, item)
            if cls is not None and _plain(facts, cls):
                yield item, f"an instance of `{cls.name}`, a plain class"


def _structure_leaves(value: ast.expr) -> Iterator[ast.expr]:
    """The items of the tuples, lists and dicts written in a return value, and the value itself otherwise."""
    if isinstance(value, (ast.Tuple, ast.List)):
        for item in value.elts:
            yield from _structure_leaves(item)
    elif isinstance(value, ast.Dict):
        for item in value.values:
            yield from _structure_leaves(item)
    else:
        yield value


def _constructed_class(facts: FileFacts, expr: ast.expr) -> ClassInfo | None:
    """The class of the file `expr` constructs: `Cls(...)`, or a name bound once to it."""
    if isinstance(expr, ast.Name):
        bindings = facts.bindings_of(expr)
        if len(bindings) != 1 or bindings[0].kind != "assign" or not isinstance(bindings[0].value, ast.Call):
            return None
        expr = bindings[0].value
    return facts.called_class(expr) if isinstance(expr, ast.Call) else None


def _plain(facts: FileFacts, cls: ClassInfo) -> bool:
    """No base (or `object`), no metaclass, no decorator but `@dataclass`, no tracing protocol."""
    node = cls.node
    return all(isinstance(b, ast.Name) and b.id == "object" for b in node.bases) and not node.keywords \
        and all(_dataclass_decorator(facts, d) for d in node.decorator_list) \
        and not (_TRACING_PROTOCOL & _class_names(node))


def _unhashable(facts: FileFacts, cls: ClassInfo) -> bool:
    """Instances are unhashable: `__eq__` without `__hash__`, or a default `@dataclass` (eq, not frozen)."""
    names = _class_names(cls.node)
    if not _plain(facts, cls) or "__hash__" in names:
        return False
    decorators = cls.node.decorator_list  # all `@dataclass` (`_plain`)
    return all(_default_eq_dataclass(d) for d in decorators) if decorators else "__eq__" in names


def _dataclass_decorator(facts: FileFacts, decorator: ast.expr) -> bool:
    func = decorator.func if isinstance(decorator, ast.Call) else decorator
    return facts.resolve(func) in _DATACLASS


def _default_eq_dataclass(decorator: ast.expr) -> bool:
    """`@dataclass` or `@dataclass(...)` that keeps `eq=True` and sets neither `frozen` nor `unsafe_hash`."""
    if not isinstance(decorator, ast.Call):
        return True
    for keyword in decorator.keywords:
        if keyword.arg in ("frozen", "unsafe_hash") and not (isinstance(keyword.value, ast.Constant)
                                                            and keyword.value.value is False):
            return False
        if keyword.arg == "eq" and not (isinstance(keyword.value, ast.Constant) and keyword.value.value is True):
            return False
        if keyword.arg is None:
            return False
    return True


def _class_names(node: ast.ClassDef) -> set[str]:
    """Names the class body defines: methods and assigned attributes."""
    names: set[str] = set()
    for statement in node.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(statement.name)
        elif isinstance(statement, ast.Assign):
            names.update(t.id for t in statement.targets if isinstance(t, ast.Name))
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
            names.add(statement.target.id)
    return names
