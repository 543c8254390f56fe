"""Elementwise steps moved before a reshape that unflattens rows (a Relax rewrite before
legalisation), so that FuseOps puts them in the epilogue of the kernel before it and the reshape is
a view.

A 1x1 convolution over an awkward width runs over the image's pixels in a row
(`channel_padding._flattened_pointwise`): `reshape(conv2d(reshape(x, [N, 1, H*W, C]), W), [N, H,
W, O])`. FuseOps does not fuse across a reshape, so the bias, the activation and a residual add
after it would be a kernel of their own and a pass over the output. Where the reshape keeps the
last axis (`[N, 1, P, O]` to `[N, H, W, O]`, `H * W == P`), an elementwise step gives the same
values on either side of it: `op(reshape(y), t)` becomes `reshape(op(y, t'))`, with `t` a scalar,
a vector over the last axis (`[O]`, `[1, 1, 1, O]`) as it is, or a tensor of the reshape's shape
reshaped to `y`'s (a view); a unary step (ReLU, a clip, a sigmoid) moves as it is. Each moved step
leaves the reshape after it, so a chain moves step by step. (`scalar_steps.py` moves steps by a
scalar past any reshape, before padding; this pass, after it, takes vectors and tensors too, but
only past a reshape that keeps the last axis.)
"""

from __future__ import annotations

import tvm
from tvm import relax

from tfcheck.compiler.schedules.rewrites.channel_padding import static_shape

# Elementwise steps of two tensors that move; and of one (its other arguments are attributes or
# PrimValues: a clip's bounds).
_BINARY = {"relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.maximum", "relax.minimum"}
_UNARY = {"relax.nn.relu", "relax.clip", "relax.sigmoid", "relax.tanh", "relax.nn.silu", "relax.nn.gelu"}


@relax.expr_functor.mutator
class _StepMover(relax.PyExprMutator):
    """Rewrites `op(reshape(y, s), ...)` into `reshape(op(y, ...), s)` for an unflattening reshape."""

    def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: N802 - TVM's visitor name
        call = super().visit_call_(call)
        name = call.op.name if isinstance(call.op, tvm.ir.Op) else None
        if name in _UNARY:
            unflattened = self._unflattening(call.args[0])
            if unflattened is None:
                return call
            flat, shape = unflattened
            moved = self.builder_.emit(relax.Call(call.op, [flat, *call.args[1:]], call.attrs, call.ty_args))
            return relax.op.reshape(moved, shape)
        if name in _BINARY and len(call.args) == 2:
            return self._moved_binary(call)
        return call

    def _moved_binary(self, call: relax.Call) -> relax.Expr:
        """`op(reshape(y), t)` or `op(t, reshape(y))` with `t` moved to `y`'s side, or `call`."""
        for position in (0, 1):
            unflattened = self._unflattening(call.args[position])
            if unflattened is None:
                continue
            flat, shape = unflattened
            other = self._on_flat_side(call.args[1 - position], flat, shape)
            if other is None:
                return call
            args = [flat, other] if position == 0 else [other, flat]
            return relax.op.reshape(self.builder_.emit(relax.Call(call.op, args, call.attrs, call.ty_args)), shape)
        return call

    def _unflattening(self, expr: relax.Expr) -> tuple[relax.Expr, list[int]] | None:
        """`(y, s)` where `expr` is bound to `reshape(y, s)` from `[N, 1, P, O]` to `[N, H, W, O]`."""
        bound = self.lookup_binding(expr) if isinstance(expr, relax.Var) else None
        if not (isinstance(bound, relax.Call) and isinstance(bound.op, tvm.ir.Op) and bound.op.name == "relax.reshape"):
            return None
        source, target = static_shape(bound.args[0]), static_shape(bound)
        if (source is None or target is None or len(source) != 4 or len(target) != 4 or source[1] != 1
                or source[0] != target[0] or source[3] != target[3] or source[2] != target[1] * target[2]):
            return None
        return bound.args[0], list(target)

    def _on_flat_side(self, other: relax.Expr, flat: relax.Expr, shape: list[int]) -> relax.Expr | None:
        """The other operand as it applies to the flat tensor: a scalar or a vector over the last
        axis as it is, a tensor of the unflattened shape reshaped; None for any other broadcast."""
        dims = static_shape(other)
        if dims is None:
            return None
        if all(d == 1 for d in dims[:-1]) and (not dims or dims[-1] in (1, shape[-1])) and len(dims) <= 4:
            return other
        if list(dims) == shape:
            return self.builder_.emit(relax.op.reshape(other, static_shape(flat)))
        return None


def move_steps_before_unflattening(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each elementwise step after an unflattening reshape moved before it (see the module)."""
    mover = _StepMover(mod)
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            mover.builder_.update_func(gvar, mover.visit_expr(func))
    return mover.builder_.get()
