"""Every output of a compiled `main` in memory of its own, never a constant's or a weight's.

A Relax VM returns a tensor that `main` returns unchanged as that very object: a constant of the
library's constant pool, or a weight the runtime passes to every call (`compiler/build/library_weights.py`),
reaches the caller as the memory every later call reads, so a caller that writes into its result
(in-place post-processing of an SSD detector's anchor boxes) changes what every later call returns.
TVM's default pipeline copies none of them, so `copy_shared_outputs` runs at the end of the CPU
compile pipeline (`schedules.compile_cpu`), once nothing folds constants any more and views are
explicit (`vm.builtin.reshape`): each returned value that is a constant, a parameter after
`num_input` (a weight) or a view of one becomes a copy made by `vm.builtin.to_device` (a new tensor
on the same device, what `R.to_vdevice` lowers to). Outputs the kernels write into fresh memory
are returned as before, at no cost; an output that is a user's input is the runtime's to copy
(`tfcheck/runtime/tvm_backend.py`, `_not_aliasing`), since only it knows whose memory that is.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

# The VM builtins whose result shares its first argument's memory (as lowered by TVM's pipeline).
_VIEWS = frozenset({"vm.builtin.reshape", "vm.builtin.copy", "vm.builtin.ensure_zero_offset",
                    "runtime.TVMTensorCreateView"})
_COPY = "vm.builtin.to_device"  # (tensor, device type, device id) -> a new tensor holding a copy
_CPU = 1  # kDLCPU


def copy_shared_outputs(main: relax.Function) -> relax.Function:
    """`main` returning a copy of each output that is a constant, a weight parameter or a view of
    one (memory that outlives the call). Each copy is bound just
    before the tuple that holds it (after it, `KillAfterLastUse` may already have killed the view
    it copies); the copy of a tensor returned as it is, at the end of the body."""
    copier = _Copier(main)
    tail: list[relax.Binding] = []
    returned = copier.fresh(main.body.body, tail)
    if not copier.edits and not tail:
        return main
    blocks = [relax.BindingBlock([replacement for index, binding in enumerate(block.bindings)
                                  for replacement in copier.edits.get((number, index), [binding])])
              for number, block in enumerate(main.body.blocks)]
    blocks += [relax.BindingBlock(tail)] if tail else []
    return relax.Function(main.params, relax.SeqExpr(blocks, returned), main.ret_ty, main.is_pure,
                          main.attrs, main.span)


class _Copier:
    """The edits that make `main`'s returned tensors fresh: for each tuple binding the returned
    value holds, its position (block, binding) and the bindings that replace it."""

    def __init__(self, main: relax.Function) -> None:
        self.values = _bound_values(main)
        self.weights = _weight_params(main)
        self.places = {binding.var: (number, index) for number, block in enumerate(main.body.blocks)
                       for index, binding in enumerate(block.bindings)}
        self.edits: dict[tuple[int, int], list[relax.Binding]] = {}
        self.count = 0  # copies made, which name them

    def fresh(self, expr: relax.Expr, before: list[relax.Binding]) -> relax.Expr:
        """`expr` holding fresh tensors only: each shared one replaced by a new variable bound (in
        `before`, the bindings that precede `expr`'s use) to a copy of it."""
        if isinstance(expr, relax.Var) and isinstance(self.values.get(expr), relax.Tuple):
            copies: list[relax.Binding] = []
            rebuilt = self.fresh(self.values[expr], copies)
            if copies:
                self.edits[self.places[expr]] = [*copies, relax.VarBinding(expr, rebuilt)]
            return expr
        if isinstance(expr, relax.Tuple):
            return relax.Tuple([self.fresh(field, before) for field in expr.fields])
        if not _is_shared(expr, self.values, self.weights):
            return expr
        copy = relax.Var(f"tfcheck_fresh_{self.count}", expr.ty)
        self.count += 1
        before.append(relax.VarBinding(copy, relax.Call(
            relax.ExternFunc(_COPY), [expr, relax.prim_value(_CPU), relax.prim_value(0)], ty_args=[expr.ty])))
        return copy


@tvm.transform.module_pass(opt_level=0, name="tfcheck.CopySharedOutputs")
def copy_shared_outputs_pass(mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
    """`copy_shared_outputs` on `main` (a module without one is left as it is)."""
    if not any(gvar.name_hint == "main" for gvar in mod.get_global_vars()):
        return mod
    gvar = mod.get_global_var("main")
    main = mod[gvar]
    copied = copy_shared_outputs(main)
    if copied.same_as(main):
        return mod
    updated = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    updated[gvar] = copied
    return updated


def _is_shared(expr: relax.Expr, values: dict[relax.Var, relax.Expr], weights: set[relax.Var]) -> bool:
    """Whether `expr` is, or views, a constant or a weight: followed through variables bound to
    variables and through the view builtins (`_VIEWS`)."""
    while True:
        if isinstance(expr, GenericConst):
            return True
        if isinstance(expr, relax.Var):
            if expr in weights:
                return True
            if expr not in values:
                return False  # a user's input
            expr = values[expr]
        elif isinstance(expr, relax.Call) and isinstance(expr.op, relax.ExternFunc) \
                and str(expr.op.global_symbol) in _VIEWS and expr.args:
            expr = expr.args[0]
        else:
            return False  # a tensor a kernel or a builtin made: fresh memory


def _bound_values(main: relax.Function) -> dict[relax.Var, relax.Expr]:
    """Each variable of `main`'s body with the value bound to it (or matched to its type)."""
    return {binding.var: binding.value for block in main.body.blocks for binding in block.bindings}


def _weight_params(main: relax.Function) -> set[relax.Var]:
    """The parameters after `num_input` (the weights the runtime passes to every call); none
    when `main` has no `num_input`, every parameter then being a user's input."""
    count = main.attrs.get("num_input") if main.attrs is not None else None
    return set() if count is None else set(main.params[int(count):])
