"""TFC035: a tf.function that appends to, sets items of or deletes from its own list or dict parameter."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine import kinds
from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

# Methods of a list or a dict that change it in place (sets are no nest structure: TensorFlow does not
# see their changes; `sort`/`reverse` keep the leaves, so only an order change is seen).
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem"})
_CONTAINER_ANNOTATIONS = frozenset({"list", "dict", "List", "Dict", "MutableSequence", "MutableMapping"})
_T = "import tensorflow as tf\n"


class FunctionModifiesItsArguments(Rule):
    """A tf.function must not change the lists or dicts it is called with.

    ## What it does
    Finds a tf.function (decorated, or passed to `tf.function(...)`) whose body changes one of its own
    parameters in place, where the parameter surely holds a list or a dict: `out.append(...)`,
    `d[k] = ...`, `del d[k]`, `d.update(...)`, `out += [...]`. The parameter holds a list or a dict
    when its default value is one, its annotation is `list`/`dict`, or every call of the tf.function
    in the file passes one. A parameter assigned anew in the function (a copy) is not reported.

    ## Why is this bad
    A tf.function traces its Python function with copies of the list and dict arguments, and after the
    trace compares them with what it was called with. Any change raises `ValueError: f(x, out) should
    not modify its Python input arguments. Modifying a copy is allowed. The following parameter(s)
    were modified: out`, on the first call: the function never runs. Eagerly (or as a `Dataset.map`
    function, which gets fresh containers) the same code works, which is why it surprises.

    Checked against TensorFlow 2.21: `out.append(x * 2)`, `d['y'] = x` (a new key or an existing
    one), `d.update(...)`, `l.pop()`, `del d['a']`, `l += [x]`, `l[0] = x`, in a decorated function,
    a method, or one wrapped with `tf.function(f)`, and with the list as the parameter's default,
    all raise; `out = list(out)` before the `append`, changing `**kwargs`, and a `Dataset.map` function
    that sets a key of its dict run; an object of a class with its own `append` runs (not reported).

    ## Example
    ```python
    @tf.function
    def collect(x, out):
        out.append(x * 2)
        return x

    collect(tf.constant(1.0), [])
    ```

    ## Use instead
    ```python
    @tf.function
    def collect(x, out):
        return out + [x * 2]   # a new list, returned

    out = collect(tf.constant(1.0), [])
    ```
    Return the new values, or modify a copy (`out = list(out)`); a `tf.TensorArray` collects tensors
    in a loop.
    """

    code = "TFC035"
    name = "function-modifies-its-arguments"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        # Checked: ValueError "... The following parameter(s) were modified: out" (docs/coverage.md G7).
        _T + "@tf.function\ndef collect(x, out):\n    out.append(x * 2)\n    return x\ncollect(tf.constant(1.0), [])\n",
        _T + "@tf.function\ndef setd(x, d):\n    d['y'] = x\n    return x\nsetd(tf.constant(1.0), {})\n",
        _T + "@tf.function\ndef upd(x, d: dict):\n    d.update(k=x)\n    return x\n",
        _T + "@tf.function\ndef f(x, out=[]):\n    out.append(x)\n    return x\n",
        _T + "@tf.function\ndef drop(x, d):\n    del d['a']\n    return x\ndrop(tf.constant(1.0), {'a': 1})\n",
        _T + "@tf.function\ndef grow(x, l):\n    l += [x]\n    return x\nitems = [1]\ngrow(tf.constant(1.0), items)\n",
        _T + "def plain(x, d):\n    d['z'] = x\n    return x\npf = tf.function(plain)\npf(tf.constant(1.0), {})\n",
        _T + "class M(tf.Module):\n    @tf.function\n    def f(self, x, acc: list):\n        acc.append(x)\n"
        "        return x\n",
    )
    must_not_flag = (
        # Checked: a copy is modified; `**kwargs` is rebuilt per call; a Dataset.map function gets fresh dicts.
        _T + "@tf.function\ndef copy(x, out):\n    out = list(out)\n    out.append(x)\n    return out\ncopy(tf.constant(1.0), [])\n",
        _T + "@tf.function\ndef kw(x, **kwargs):\n    kwargs['z'] = 1\n    return x\nkw(tf.constant(1.0), a=1)\n",
        _T + "ds = tf.data.Dataset.from_tensor_slices({'a': [1., 2.]})\ndef m(d):\n    d['b'] = d['a'] * 2\n"
        "    return d\nds = ds.map(m)\n",
        # Checked: an object of a class with its own `append` runs; nothing says a list is passed.
        _T + "class Buf:\n    def __init__(self):\n        self.items = []\n    def append(self, v):\n"
        "        self.items.append(v)\n@tf.function\ndef g(x, buf):\n    buf.append(x)\n    return x\ng(tf.constant(1.0), Buf())\n",
        _T + "@tf.function\ndef g(x, buf):\n    buf.append(x)\n    return x\n",
        # Not a tf.function: eager code may change its arguments.
        "def collect(x, out):\n    out.append(x)\ncollect(1, [])\n",
        # `+=` on a tensor parameter rebinds the name.
        _T + "@tf.function\ndef f(x, y):\n    x += y\n    return x\nf(tf.constant(1.0), tf.constant(2.0))\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for function in facts.tf_function_definitions:
            for node, parameter in _parameter_mutations(facts, function):
                if _holds_container(facts, function, parameter):
                    yield self.finding(
                        facts, node, f"tf.function `{function.name}` changes its argument `{parameter}` in place: "
                        "the trace raises `should not modify its Python input arguments` on the first call; "
                        "return the new values, or change a copy (`out = list(out)`)")


def _parameter_mutations(facts: FileFacts, function: FunctionInfo) -> Iterator[tuple[ast.AST, str]]:
    """In-place changes of a parameter that the function never binds again (`self`, `*args`, `**kwargs` aside)."""
    args = function.node.args
    skipped = {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    if function.cls is not None and function.params:
        skipped.add(function.params[0])
    for node in function.nodes:
        target = _changed_name(node)
        if target is None or target.id in skipped or not facts.is_parameter(target, function):
            continue
        if all(b.kind == "param" or _changed_name(facts.parent(b.node)) is b.node for b in facts.bindings_of(target)):
            yield node, target.id


def _changed_name(node: ast.AST | None) -> ast.Name | None:
    """The name a statement or call changes in place: `n.append(...)`, `n[k] = ...`, `del n[k]`, `n += [...]`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
        receiver = node.func.value
        return receiver if isinstance(receiver, ast.Name) else None
    if isinstance(node, (ast.Assign, ast.Delete)):
        targets = node.targets
    elif isinstance(node, ast.AugAssign):
        if isinstance(node.target, ast.Name) and isinstance(node.value, (ast.List, ast.ListComp)):
            return node.target
        targets = [node.target]
    else:
        return None
    subscripted = [t.value for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)]
    return subscripted[0] if subscripted else None


def _holds_container(facts: FileFacts, function: FunctionInfo, parameter: str) -> bool:
    """The parameter surely holds a list or a dict: its default, its annotation, or every call's argument."""
    default = function.default_of(parameter)
    if default is not None:
        return isinstance(default, (ast.List, ast.Dict))
    annotation = next((a.annotation for a in function.node.args.posonlyargs + function.node.args.args
                       + function.node.args.kwonlyargs if a.arg == parameter), None)
    if annotation is not None:
        base = annotation.value if isinstance(annotation, ast.Subscript) else annotation
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
        return name in _CONTAINER_ANNOTATIONS
    found = [facts.kinds(argument) for _, argument in facts.arguments_to(function, parameter)]
    return bool(found) and all(k and k <= {kinds.LIST, kinds.DICT} for k in found)
