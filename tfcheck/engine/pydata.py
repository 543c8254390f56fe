"""Python data and Python iterators: values that graph code can only see at trace time.

Two questions the loop and iterator rules share. Is a value *Python data* (a NumPy array, a
module-level list of numbers, a large `range`), so that a loop over it unrolls into the graph? Is it
a *Python iterator* (`iter(list)`, a generator, `zip(...)`), whose state advances only while tracing,
as opposed to a tf.data iterator, which is a graph resource? The answers are deliberately narrow:
a value the file does not pin down is neither, because a false alarm is worse than a miss.
"""

from __future__ import annotations

import ast

from tfcheck.engine import kinds, values
from tfcheck.engine.index import FileIndex

# `range(N)` with N at least this unrolls into a graph big enough to matter; smaller literal ranges are
# how graph code repeats structure (`for i in range(num_heads)`), which is what tracing is for.
LARGE_RANGE = 100
# A literal list of at least this many numbers (or records) is data; shorter ones are settings (`SCALES`).
LARGE_LIST = 16
_PYTHON_SEQUENCES = frozenset({kinds.LIST, kinds.TUPLE, kinds.DICT, kinds.SET, kinds.RANGE, kinds.STRING,
                               kinds.NDARRAY})
_ITERATOR_BUILTINS = frozenset({"builtins.iter", "builtins.map", "builtins.filter", "builtins.zip",
                                "builtins.enumerate", "builtins.reversed"})


def python_data(index: FileIndex, expr: ast.expr) -> str | None:
    """What Python data a loop over `expr` walks, in words ("a NumPy array", ...), or None.

    NumPy arrays, `range()` of a literal of at least LARGE_RANGE, and module-level names bound once to a
    list or tuple of numbers (or a repeated one, `[(1, 1)] * 3`).
    """
    found = values.expr_kinds(index, expr)
    if kinds.NDARRAY in found and not found & kinds.GRAPH_KINDS and not _small_numpy_literal(index, expr):
        return "a NumPy array"
    if isinstance(expr, ast.Call) and index.resolve(expr.func) == "builtins.range":
        size = _range_size(index, expr)
        return f"range({size})" if size is not None and size >= LARGE_RANGE else None
    if isinstance(expr, ast.Name):
        value = module_constant(index, expr)
        if value is not None and is_number_data(value) and looks_like_data(value):
            return f"the module-level list `{expr.id}`"
    return None


def looks_like_data(expr: ast.expr) -> bool:
    """Repetition (`[(1, 1)] * 3`) or at least LARGE_LIST elements: data, not `KERNELS = [(3, 3), (5, 5)]`."""
    return isinstance(expr, ast.BinOp) or len(expr.elts) >= LARGE_LIST  # type: ignore[attr-defined]


def _small_numpy_literal(index: FileIndex, expr: ast.expr) -> bool:
    """`np.array([0.5, 1, 2])` (directly or through a name bound once): a few settings, not data."""
    if isinstance(expr, ast.Name):
        bindings = index.bindings_of(expr)
        return len(bindings) == 1 and bindings[0].value is not None and bindings[0].value is not expr \
            and _small_numpy_literal(index, bindings[0].value)
    if not (isinstance(expr, ast.Call) and expr.args and index.resolve(expr.func) in ("numpy.array", "numpy.asarray")):
        return False
    literal = expr.args[0]
    return isinstance(literal, (ast.List, ast.Tuple)) and len(literal.elts) < LARGE_LIST


def module_constant(index: FileIndex, name: ast.Name) -> ast.expr | None:
    """The value of a module-level name bound exactly once by a plain assignment, else None."""
    scope, bindings = index.lookup(name.id, index.scope_of_name(name))
    if scope is not index.module_scope or len(bindings) != 1 or bindings[0].kind != "assign":
        return None
    return bindings[0].value


def is_number_data(expr: ast.expr) -> bool:
    """A literal list/tuple of numbers or of tuples of numbers, possibly repeated with `* n`."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        return is_number_data(expr.left) or is_number_data(expr.right)
    if not isinstance(expr, (ast.List, ast.Tuple)) or not expr.elts:
        return False
    return all(_is_number(element) or (isinstance(element, (ast.List, ast.Tuple)) and element.elts
                                       and all(_is_number(e) for e in element.elts))
               for element in expr.elts)


def _is_number(expr: ast.expr) -> bool:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        expr = expr.operand
    return isinstance(expr, ast.Constant) and type(expr.value) in (int, float)


def _range_size(index: FileIndex, call: ast.Call) -> int | None:
    """The number of iterations of `range(...)` when its arguments are literal (or module constants)."""
    if call.keywords or not 1 <= len(call.args) <= 3:
        return None
    numbers = [_int_value(index, arg) for arg in call.args]
    if any(n is None for n in numbers):
        return None
    try:
        return len(range(*numbers))  # type: ignore[arg-type]
    except ValueError:
        return None


def _int_value(index: FileIndex, expr: ast.expr) -> int | None:
    if isinstance(expr, ast.Name):
        constant = module_constant(index, expr)
        return _int_value(index, constant) if constant is not None and not isinstance(constant, ast.Name) else None
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        inner = _int_value(index, expr.operand)
        return -inner if inner is not None else None
    return None


def is_python_iterator(index: FileIndex, expr: ast.expr | None, depth: int = 0) -> bool:
    """Whether `expr` is surely a Python iterator or generator object (never a tf.data iterator)."""
    if expr is None or depth > 4:
        return False
    if isinstance(expr, ast.GeneratorExp):
        return True
    if isinstance(expr, ast.Name):
        bindings = index.bindings_of(expr)
        return bool(bindings) and all(b.value is not None and b.value is not expr
                                      and is_python_iterator(index, b.value, depth + 1) for b in bindings)
    if not isinstance(expr, ast.Call):
        return False
    if isinstance(expr.func, ast.Attribute) and expr.func.attr == "as_numpy_iterator":
        return True
    target = index.called_function(expr)
    if target is not None:
        return target.is_generator
    name = index.resolve(expr.func)
    if name in ("itertools.count", "itertools.cycle", "itertools.repeat"):
        return True
    if name in ("builtins.map", "builtins.filter"):
        return _all_python_iterables(index, expr.args[1:], depth)
    if name in _ITERATOR_BUILTINS or (name or "").startswith("itertools."):
        return _all_python_iterables(index, expr.args, depth)
    return False


def _all_python_iterables(index: FileIndex, args: list[ast.expr], depth: int) -> bool:
    """The iterables given to iter/zip/map/...: all known to be Python values, none a dataset or tensor."""
    iterables = [a for a in args if not isinstance(a, (ast.Lambda, ast.Starred))]
    if not iterables:
        return False
    for arg in iterables:
        found = values.expr_kinds(index, arg)
        if found & kinds.GRAPH_KINDS or not (found & _PYTHON_SEQUENCES or is_python_iterator(index, arg, depth + 1)):
            return False
    return True
