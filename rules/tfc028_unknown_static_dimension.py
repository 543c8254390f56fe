"""TFC028: a static dimension the input_signature leaves unknown, used as a number: tracing raises."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_T = "import tensorflow as tf\n"
_SIGNED = _T + "@tf.function(input_signature=[tf.TensorSpec([None, 3])])\ndef f(x):\n"
# Calls whose shape argument must hold numbers: a None in it raises "Expected int32, but got None".
_SHAPE_CALLS = frozenset({"zeros", "ones", "fill", "reshape", "broadcast_to", "normal", "uniform", "truncated_normal",
                          "empty"})
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


class UnknownStaticDimension(Rule):
    """A static dimension that the input_signature leaves unknown is None while tracing.

    ## What it does
    Finds, in a tf.function whose `input_signature` gives a parameter a literal shape with `None`
    axes (`tf.TensorSpec([None, 3])`), that axis read as a number, `x.shape[0]` or
    `x.get_shape()[0]` (directly, or through a local name bound to it), where a None raises:
    arithmetic, an ordering comparison (`<`, `>`), `range()` or `int()`, or an element of the shape
    given to `tf.zeros`, `tf.ones`, `tf.fill`, `tf.reshape`, `tf.broadcast_to` or a `tf.random` op.
    `x.shape[0] is None` and `==` tests are fine and not reported.

    ## Why is this bad
    `x.shape` is the static shape: while tracing with the signature, the unknown axis is `None`, not
    the size of the tensor a later call passes. Each of these uses raises while tracing
    (TensorFlow 2.21): `TypeError: Expected int32, but got None`, `unsupported operand type(s) for
    *: 'NoneType' and 'int'`, `'>' not supported between instances of 'NoneType' and 'int'`,
    `'NoneType' object cannot be interpreted as an integer`. The code works eagerly and without a
    signature, where shapes are concrete, so the error appears only once it is deployed.

    ## Example
    ```python
    @tf.function(input_signature=[tf.TensorSpec([None, 3])])
    def pad_rows(x):
        return tf.concat([x, tf.zeros([x.shape[0], 1])], axis=1)
    ```

    ## Use instead
    ```python
    @tf.function(input_signature=[tf.TensorSpec([None, 3])])
    def pad_rows(x):
        return tf.concat([x, tf.zeros([tf.shape(x)[0], 1])], axis=1)
    ```
    `tf.shape(x)` is the dynamic shape, a tensor computed on every call.
    """

    code = "TFC028"
    name = "unknown-static-dimension"
    severity = Severity.ERROR
    opt_in = True
    must_flag = (
        _SIGNED + "    return tf.zeros([x.shape[0], 3])\n",
        _SIGNED + "    return tf.reshape(x, [x.shape[0], -1])\n",
        _SIGNED + "    return x * (x.shape[0] * 3)\n",
        _SIGNED + "    if x.shape[0] > 1:\n        return x\n    return -x\n",
        _SIGNED + "    n = x.get_shape()[0]\n    return [x[i] for i in range(n)]\n",
        _T + "class M(tf.Module):\n    @tf.function(input_signature=[tf.TensorSpec(shape=(None, None), dtype=tf.float32)])\n"
        "    def f(self, x):\n        return tf.ones([x.shape[1]])\n",
    )
    must_not_flag = (
        _SIGNED + "    return tf.zeros([tf.shape(x)[0], 3])\n",
        _SIGNED + "    return tf.zeros([x.shape[1], 3])\n",  # axis 1 is known
        _SIGNED + "    if x.shape[0] is None:\n        return x\n    return -x\n",
        _SIGNED + "    return x if x.shape[0] == 1 else -x\n",
        _T + "@tf.function\ndef f(x):\n    return tf.zeros([x.shape[0], 3])\n",  # no signature: shapes are concrete
        _T + "SPEC = [tf.TensorSpec([None, 3])]\n@tf.function(input_signature=SPEC)\ndef f(x):\n"
        "    return tf.zeros([x.shape[0], 3])\n",  # the signature is not written here
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for info in facts.functions:
            if facts.decorated_tf_function(info) is None:
                continue
            for name, axes in facts.unknown_dimensions(info).items():
                for read, axis in _dimension_reads(facts, info, name, axes):
                    use = _raising_use(facts, read, info)
                    if use is not None:
                        yield self.finding(
                            facts, read, f"`{facts.text(read)}` is None while tracing (the input_signature leaves "
                            f"axis {axis} of `{name}` unknown), and {use} raises TypeError; use "
                            f"`tf.shape({name})[{axis}]`", function=info)


def _dimension_reads(facts: FileFacts, info: FunctionInfo, name: str,
                     axes: frozenset[int]) -> Iterator[tuple[ast.Subscript, int]]:
    """`name.shape[i]` and `name.get_shape()[i]` for an unknown axis `i`, in the function's own code."""
    for node in info.nodes:
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, int) and node.slice.value in axes):
            continue
        shape = node.value.func if isinstance(node.value, ast.Call) and not node.value.args else node.value
        if isinstance(shape, ast.Attribute) and shape.attr in ("shape", "get_shape") \
                and (shape.attr == "get_shape") == isinstance(node.value, ast.Call) \
                and facts.is_parameter(shape.value, info) and shape.value.id == name:  # type: ignore[attr-defined]
            yield node, node.slice.value


def _raising_use(facts: FileFacts, expr: ast.expr, info: FunctionInfo, hops: int = 0) -> str | None:
    """What raises with None where `expr`'s value goes, or None; a local name is followed once."""
    parent = facts.parent(expr)
    if isinstance(parent, ast.BinOp):
        return "arithmetic on it"
    if isinstance(parent, ast.Compare) and any(isinstance(op, _ORDERING) for op in parent.ops):
        return "an ordering comparison"
    if isinstance(parent, ast.Call) and expr in parent.args and facts.resolve(parent.func) in ("builtins.range",
                                                                                              "builtins.int"):
        return f"`{facts.text(parent.func)}()` of it"
    if isinstance(parent, (ast.List, ast.Tuple)) and (shape_call := _shape_call(facts, parent)) is not None:
        return f"a shape of `{shape_call}` holding it"
    if isinstance(parent, ast.Assign) and hops == 0 and len(parent.targets) == 1 \
            and isinstance(parent.targets[0], ast.Name):
        uses = facts.uses_of(parent.targets[0].id, info)
        return next((found for use in uses if use.lineno > parent.lineno
                     and (found := _raising_use(facts, use, info, 1)) is not None), None)
    return None


def _shape_call(facts: FileFacts, shape: ast.expr) -> str | None:
    """The TensorFlow call that takes the list `shape` as its shape, if it is one."""
    call = facts.parent(shape)
    name = facts.resolve(call.func) if isinstance(call, ast.Call) else None
    if name is None or not name.startswith("tensorflow.") or name.rsplit(".", 1)[-1] not in _SHAPE_CALLS:
        return None
    return facts.text(call.func)  # type: ignore[union-attr]
