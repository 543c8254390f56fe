"""Unroll TFLite `WHILE` loops whose trip count is known when the model is built.

TVM's TFLite importer turns a `WHILE` (every Keras RNN layer: LSTM, GRU, SimpleRNN) into a
recursive Relax function: per step the VM calls the condition, reads the flag, calls the body
and calls itself again, and each of the body's ten or so small kernels is a separate VM call with
its own allocations. For the benchmark LSTM (50 steps of a 128-unit cell, batch 8) that loop,
not the arithmetic, was most of the time (docs/schedules.md, "Recurrent loops").

When the loop's counters start at constants and the condition is plain arithmetic on them (what
TensorFlow's converter emits for an RNN over a sequence of static length), the number of steps is
known here: `unroll_constant_loops` evaluates the condition and the counters with NumPy, step by
step, and replaces the call with that many inlined copies of the body. The loop function, its
condition and its body are then unused and removed; fusion and memory planning see the whole
sequence as one dataflow graph. A loop whose condition depends on a tensor computed at run time,
or whose trip count exceeds `MAX_STEPS`, is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import tvm
from tvm import relax

# The longest loop unrolled, and the most body bindings all its copies may add up to: beyond
# them the module (and the time LLVM takes on it) grows with the sequence for little gain
# (docs/schedules.md, "Recurrent loops", has the measurements these come from).
MAX_STEPS = 256
MAX_BINDINGS = 12288
# Integer constants larger than this are not read into NumPy: loop counters are scalars, and a
# TensorList's positions as long as the sequence.
_MAX_KNOWN_ELEMENTS = 1 << 16

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "relax.add": np.add, "relax.subtract": np.subtract, "relax.multiply": np.multiply,
    "relax.minimum": np.minimum, "relax.maximum": np.maximum,
    "relax.less": np.less, "relax.less_equal": np.less_equal, "relax.greater": np.greater,
    "relax.greater_equal": np.greater_equal, "relax.equal": np.equal, "relax.not_equal": np.not_equal,
    "relax.logical_and": np.logical_and, "relax.logical_or": np.logical_or,
}


@dataclass(frozen=True)
class Loop:
    """A recursive function as the importer writes a `WHILE`: ``loop(s) = loop(body(s)) if cond(s) else s``."""

    cond: relax.GlobalVar
    body: relax.GlobalVar


def unroll_constant_loops(mod: tvm.IRModule) -> tvm.IRModule:
    """Replace every call of a `WHILE` loop whose trip count is a build-time constant (within the
    bounds) with the body inlined that many times; other loops stay. Returns a new module."""
    loops = {gvar: loop for gvar, func in mod.functions_items() if (loop := while_loop(gvar, func)) is not None}
    if not loops:
        return mod
    unroller = _Unroller(mod, loops)
    for gvar, func in list(mod.functions_items()):
        if isinstance(func, relax.Function) and gvar not in loops:
            before = unroller.unrolled
            rewritten = unroller.visit_expr(func)
            if unroller.unrolled > before:
                unroller.builder_.update_func(gvar, rewritten)
    if not unroller.unrolled:
        return mod
    # The loops, conditions and bodies no longer called go (DCE starts from the public functions);
    # each step's copy of what depends only on constants (a weight's transpose) becomes one, so
    # constant folding computes it once rather than once per step.
    passes = [relax.transform.DeadCodeElimination(), relax.transform.EliminateCommonSubexpr()]
    return tvm.transform.Sequential(passes)(unroller.builder_.get())


def while_loop(gvar: relax.GlobalVar, func: Any) -> Loop | None:
    """The condition and body of `func` if it has exactly the importer's `WHILE` form, else None:

    ``c = cond(*p); if c: r = body(*p); out = self(r[0], ..., r[n-1]) else: out = (*p,); return out``.
    """
    if not isinstance(func, relax.Function) or len(func.body.blocks) != 1:
        return None
    bindings = list(func.body.blocks[0].bindings)
    if len(bindings) != 2 or not all(isinstance(b, relax.VarBinding) for b in bindings):
        return None
    (flag, test), (out, branch) = ((b.var, b.value) for b in bindings)
    params = list(func.params)
    if (not _calls_with(test, params) or not isinstance(branch, relax.If) or not branch.cond.same_as(flag)
            or not func.body.body.same_as(out)):
        return None
    body = _recursion_through_body(gvar, branch.true_branch, params)
    if body is None or not _returns_params(branch.false_branch, params):
        return None
    return Loop(test.op, body)


def _calls_with(expr: Any, args: list[relax.Var]) -> bool:
    """Whether `expr` calls a global function with exactly `args`."""
    return (isinstance(expr, relax.Call) and isinstance(expr.op, relax.GlobalVar) and len(expr.args) == len(args)
            and all(a.same_as(p) for a, p in zip(expr.args, args)))


def _recursion_through_body(loop: relax.GlobalVar, seq: Any, params: list[relax.Var]) -> relax.GlobalVar | None:
    """The body function of a `WHILE`'s taken branch: ``r = body(*p); x_i = r[i]; out = loop(*x)``."""
    if not isinstance(seq, relax.SeqExpr) or len(seq.blocks) != 1:
        return None
    bindings = [b for b in seq.blocks[0].bindings if isinstance(b, relax.VarBinding)]
    if len(bindings) != len(seq.blocks[0].bindings) or len(bindings) < 2:
        return None
    first, *items, last = bindings
    if not _calls_with(first.value, params):
        return None
    items_of = {b.var: b.value.index for b in items
                if isinstance(b.value, relax.TupleGetItem) and b.value.tuple_value.same_as(first.var)}
    if len(items_of) != len(items):
        return None
    call = last.value
    if (not isinstance(call, relax.Call) or not call.op.same_as(loop) or len(call.args) != len(params)
            or [items_of.get(arg, -1) for arg in call.args] != list(range(len(params)))
            or not seq.body.same_as(last.var)):
        return None
    return first.value.op


def _returns_params(seq: Any, params: list[relax.Var]) -> bool:
    """Whether a branch is just ``(*p,)``."""
    body = seq.body if isinstance(seq, relax.SeqExpr) and not seq.blocks else None
    return (isinstance(body, relax.Tuple) and len(body.fields) == len(params)
            and all(f.same_as(p) for f, p in zip(body.fields, params)))


@relax.expr_functor.mutator
class _Unroller(relax.PyExprMutator):
    """Rewrites calls of constant-trip loops into the inlined body, step after step."""

    def __init__(self, mod: tvm.IRModule, loops: dict[relax.GlobalVar, Loop]) -> None:
        super().__init__(mod)
        self.mod = mod
        self.loops = loops
        self.unrolled = 0  # loops unrolled so far
        # TensorList writes not emitted (yet): list variable -> (the list before them, item per position)
        self.pending: dict[relax.Var, tuple[relax.Expr, dict[int, relax.Expr]]] = {}

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:  # noqa: N802 - TVM's visitor name
        """A TensorList write at a constant position (`compiler/frontend/importer.py` writes item `i` as
        ``where(positions == i, item, list)``) is held back: once every position of the list has
        been written, the list is the items' concatenation, one kernel at the end instead of a copy
        of the whole list per step (a 100-step LSTM with `return_sequences` took 40 s to build that
        way, most of it folding and removing the chain). A list used before that gets its writes."""
        write = self._list_write(binding)
        if write is None:
            super().visit_var_binding_(binding)
            return
        base, items = write
        length = int(binding.var.ty.shape[0])
        if len(items) == length:
            self.set_var_remap(binding.var, self.builder_.emit(relax.op.concat([items[i] for i in range(length)], 0)))
        else:
            self.pending[binding.var] = (base, items)

    def visit_var_(self, var: relax.Var) -> relax.Expr:  # noqa: N802 - TVM's visitor name
        return self._materialised(var) if self._is_pending(var) else super().visit_var_(var)

    def visit_dataflow_var_(self, var: relax.DataflowVar) -> relax.Expr:  # noqa: N802 - TVM's visitor name
        return self._materialised(var) if self._is_pending(var) else super().visit_dataflow_var_(var)

    def _materialised(self, var: relax.Var) -> relax.Var:
        """A held-back list, written item by item as the importer wrote it."""
        base, items = self.pending.pop(var)
        shape = [int(dim) for dim in var.ty.shape]
        for position, item in items.items():
            mask = np.zeros([shape[0]] + [1] * (len(shape) - 1), bool)
            mask[position] = True
            base = self.builder_.emit(relax.op.where(relax.const(mask), item, base))
        self.set_var_remap(var, base)
        return base

    def _list_write(self, binding: relax.VarBinding) -> tuple[relax.Expr, dict[int, relax.Expr]] | None:
        """(the list before, the items written so far by position) when `binding` writes one item
        of a list at a position known here; None for any other binding."""
        value = binding.value
        if (not isinstance(binding.var, relax.DataflowVar) or not isinstance(value, relax.Call)
                or not isinstance(value.op, tvm.ir.Op) or value.op.name != "relax.where"):
            return None
        mask, item, target = value.args
        mask = self.visit_expr(mask)
        chosen = known_value(self.lookup_binding(mask) if isinstance(mask, relax.Var) else mask)
        shape = [int(dim) for dim in binding.var.ty.shape]
        if (chosen is None or chosen.dtype != bool or list(chosen.shape) != [shape[0]] + [1] * (len(shape) - 1)
                or chosen.sum() != 1 or [int(dim) for dim in item.ty.shape] != [1, *shape[1:]]
                or [int(dim) for dim in target.ty.shape] != shape):
            return None
        base, items = self.pending.pop(target) if self._is_pending(target) else (self.visit_expr(target), {})
        return base, {**items, int(np.flatnonzero(chosen)[0]): self.visit_expr(item)}

    def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: N802 - TVM's visitor name
        call = super().visit_call_(call)
        loop = self.loops.get(call.op) if isinstance(call.op, relax.GlobalVar) else None
        if loop is None:
            return call
        steps = trip_count(self.mod, loop, [known_value(arg) for arg in call.args])
        body = self.mod[loop.body]
        # Only a body of dataflow bindings (no control flow, nothing impure) can be inlined, and only
        # into a dataflow block.
        if (steps is None or steps * _binding_count(body) > MAX_BINDINGS
                or not all(isinstance(block, relax.DataflowBlock) for block in body.body.blocks)
                or not self.builder_.current_block_is_dataflow()):
            return call
        state: list[relax.Expr] = list(call.args)
        known = [known_value(arg) for arg in call.args]
        for _ in range(steps):
            state, known = self._inline(body, state, known)
        self.unrolled += 1
        return relax.Tuple([self._materialised(field) if self._is_pending(field) else field for field in state])

    def _inline(self, body: relax.Function, state: list[relax.Expr],
                known: list[np.ndarray | None]) -> tuple[list[relax.Expr], list[np.ndarray | None]]:
        """Emit one copy of the body's bindings on `state`; the next state's expressions and known
        values. What the known values decide (the counters, the time index) is emitted as a
        constant: no arithmetic on scalars is left for constant folding, which would build and run
        a kernel for each of them. A list with writes held back passes to the next step as it is."""
        fresh = relax.utils.copy_with_new_vars(body)
        env: dict[Any, Any] = {}
        for param, value, constant in zip(fresh.params, state, known):
            env[param] = constant
            if self._is_pending(value):
                self.pending[param] = self.pending.pop(value)
            else:
                self.set_var_remap(param, value if isinstance(value, relax.Var) else self.builder_.emit(value))
        result = fresh.body.body
        fields: list[relax.Expr] | None = None
        for block in fresh.body.blocks:
            for binding in block.bindings:
                value = _value(binding.value, env) if isinstance(binding, relax.VarBinding) else None
                env[binding.var] = value
                if isinstance(value, np.ndarray):
                    self.set_var_remap(binding.var, self.builder_.emit(relax.const(value, str(value.dtype))))
                elif binding.var.same_as(result) and isinstance(binding.value, relax.Tuple):
                    fields = list(binding.value.fields)  # the next state: not emitted as a tuple
                else:
                    self.visit_binding(binding)
        values = _value(result, env)
        values = list(values) if isinstance(values, tuple) else [None] * len(state)
        if fields is None:
            result = self.visit_expr(result)
            return [relax.TupleGetItem(result, i) for i in range(len(state))], values
        return [field if self._is_pending(field) else self.visit_expr(field) for field in fields], values

    def _is_pending(self, expr: relax.Expr) -> bool:
        return isinstance(expr, relax.Var) and expr in self.pending


def _binding_count(func: relax.Function) -> int:
    return sum(len(block.bindings) for block in func.body.blocks)


def trip_count(mod: tvm.IRModule, loop: Loop, state: list[np.ndarray | None]) -> int | None:
    """How many times the loop runs from `state` (the known values of its arguments), found by
    evaluating its condition and body on them; None when the condition depends on something not
    known here or the loop runs longer than `MAX_STEPS`."""
    cond, body = mod[loop.cond], mod[loop.body]
    for steps in range(MAX_STEPS + 1):
        flag = evaluate(cond, state)
        if flag is None or np.size(flag) != 1:
            return None
        if not bool(np.asarray(flag).reshape(())):
            return steps
        outputs = evaluate(body, state)
        state = list(outputs) if isinstance(outputs, tuple) else [None] * len(state)
    return None


def known_value(expr: relax.Expr) -> np.ndarray | None:
    """An integer or boolean constant's value (a loop counter's start, a TensorList's positions),
    or None: float constants (weights) never decide the control flow, so they are not read."""
    value = expr.value if isinstance(expr, tvm.ir.Constant) else None
    # Tensor constants only: `R.prim_value`s are constants too, and hold a plain number.
    if (hasattr(value, "numpy") and (value.dtype.startswith(("int", "uint")) or value.dtype == "bool")
            and int(np.prod(value.shape)) <= _MAX_KNOWN_ELEMENTS):
        return value.numpy()
    return None


def evaluate(func: relax.Function, args: list[np.ndarray | None]) -> Any:
    """What `func` returns for `args`, as far as integer arithmetic decides it: an array, a tuple
    of them, or None where a value depends on something unknown (a float tensor op, an input)."""
    env: dict[Any, Any] = {param: value for param, value in zip(func.params, args)}
    for block in func.body.blocks:
        for binding in block.bindings:
            env[binding.var] = _value(binding.value, env) if isinstance(binding, relax.VarBinding) else None
    return _value(func.body.body, env)


def _value(expr: relax.Expr, env: dict[Any, Any]) -> Any:
    if isinstance(expr, relax.Var):
        return env.get(expr)
    if isinstance(expr, tvm.ir.Constant):
        return known_value(expr)
    if isinstance(expr, relax.Tuple):
        return tuple(_value(field, env) for field in expr.fields)
    if isinstance(expr, relax.TupleGetItem):
        value = _value(expr.tuple_value, env)
        return value[expr.index] if isinstance(value, tuple) else None
    if not isinstance(expr, relax.Call) or not isinstance(expr.op, tvm.ir.Op) or not expr.args:
        return None
    first = _value(expr.args[0], env)
    if expr.op.name == "relax.concat" and isinstance(first, tuple) and all(part is not None for part in first):
        return np.concatenate(first, axis=int(expr.attrs.axis))
    if first is None or isinstance(first, tuple):
        return None
    return _call_value(expr, first, env)


def _call_value(expr: relax.Call, first: np.ndarray, env: dict[Any, Any]) -> np.ndarray | None:
    """The value of an operator call whose first argument is known: the integer arithmetic and
    shape plumbing TensorFlow's converter emits around a loop counter."""
    name = expr.op.name
    if name == "relax.astype":
        return first.astype(str(expr.attrs.dtype))
    if name == "relax.logical_not":
        return np.logical_not(first)
    if name == "relax.reshape":
        return first.reshape([int(dim) for dim in expr.args[1].values])
    if name == "relax.strided_slice":
        axes, begin, end, *strides = ([int(item.value) for item in arg.fields] for arg in expr.args[1:])
        index = [slice(None)] * first.ndim
        for position, axis in enumerate(axes):
            index[axis] = slice(begin[position], end[position], strides[0][position] if strides else 1)
        return first[tuple(index)]
    second = _value(expr.args[1], env) if name in _BINARY and len(expr.args) == 2 else None
    if second is None or isinstance(second, tuple):
        return None
    return np.asarray(_BINARY[name](first, second)).astype(_dtype_of(expr, [first, second]))


def _dtype_of(expr: relax.Call, args: list[np.ndarray]) -> str:
    """The result dtype Relax gives a binary op (its type), so int32 stays int32."""
    dtype = getattr(expr.ty, "dtype", None)
    return str(dtype) if dtype else str(np.result_type(*args))
