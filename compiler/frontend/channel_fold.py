"""Fold per-channel scales and shifts that follow a convolution or dense layer into its weights.

With frozen weights, TensorFlow's converter folds batch norm into the convolution before it
(`conv(x, W) * s + t` becomes `conv(x, W * s) + t`). With the weights as inputs
(docs/build.md, "Weights as inputs") it cannot: the scale is computed from weights it does not
see, so the imported module keeps `conv -> add -> multiply -> add`, and once
`importer.bind_weights` has made the weights constants, each convolution's fused kernel reads
three per-channel vectors where the frozen model's reads one. `fold_channel_affine` does the
converter's folding on the bound module:

    y = conv(x, W);  z = (y + b1) * s + b2    ->    z = conv(x, W * s) + (b1 * s + b2)

It applies only where that is exact up to float rounding: the weight `W` is a constant, each step
of the chain (`add`, `subtract` of a constant, `multiply`) takes a constant that varies at most
along the output's channel axis (the kernel layout's `O`; a dense layer's last axis), and each
intermediate value has no other user (else the convolution would run twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Ops whose output channel is the kernel layout's "O" axis of their weight; a dense layer's
# `matmul(x, W)` has it on W's last axis.
_CONVOLUTIONS = ("relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv3d")
_MATMUL = "relax.matmul"
_SHIFTS = {"relax.add": 1.0, "relax.subtract": -1.0}
_SCALE = "relax.multiply"


@dataclass
class _Chain:
    """A convolution or dense layer with a constant weight, and the per-channel steps after it."""

    call: Any  # the convolution's or matmul's Call
    rank: int  # of its output
    dtype: str  # of its output (the bias's; a convolution's `out_dtype` may differ from its weight's)
    output_axis: int  # the output's channel axis
    weight_axis: int  # the weight's output-channel axis
    channels: int
    scale: np.ndarray = field(init=False)
    shift: np.ndarray | None = None
    steps: list[Any] = field(default_factory=list)  # the vars bound to the folded steps, in order

    def __post_init__(self) -> None:
        self.scale = np.ones(self.channels)

    def folds(self) -> bool:
        """Whether folding changes anything: a scale to move into the weight, or shifts to merge."""
        return len(self.steps) > 1 or (len(self.steps) == 1 and self.shift is None)

    def take(self, name: str, vector: np.ndarray) -> None:
        """One more step: `name` (an add, subtract or multiply) of a per-channel `vector`."""
        if name == _SCALE:
            self.scale = self.scale * vector
            self.shift = None if self.shift is None else self.shift * vector
        else:
            vector = vector * _SHIFTS[name]
            self.shift = vector if self.shift is None else self.shift + vector

    def channel_vector(self, constant: np.ndarray) -> np.ndarray | None:
        """`constant` as one float64 value per output channel, if, broadcast against the output
        (from the right), it varies along no other axis and does not widen the output."""
        if constant.ndim > self.rank or not np.issubdtype(constant.dtype, np.floating):
            return None
        shape = (1,) * (self.rank - constant.ndim) + constant.shape
        if any(size != 1 for axis, size in enumerate(shape) if axis != self.output_axis) or \
                shape[self.output_axis] not in (1, self.channels):
            return None
        return np.broadcast_to(constant.reshape(-1).astype(np.float64), (self.channels,)).copy()

    def folded(self, data: Any) -> tuple[Any, Any]:
        """The convolution of `data` with the weight scaled, and the bias (None without a shift),
        as constants of the weight's and the output's dtype."""
        from tvm import relax

        weight = self.call.args[1].value.numpy()
        shape = [1] * weight.ndim
        shape[self.weight_axis] = self.channels
        # One rounding per filter value, and no float64 copy of a weight that may be hundreds of MB.
        scaled = weight * self.scale.astype(weight.dtype).reshape(shape)
        convolution = relax.Call(self.call.op, [data, relax.const(scaled)], self.call.attrs, self.call.ty_args)
        if self.shift is None:
            return convolution, None
        bias_shape = [1] * self.rank
        bias_shape[self.output_axis] = self.channels
        return convolution, relax.const(self.shift.reshape(bias_shape).astype(self.dtype))


def fold_channel_affine(mod: Any) -> Any:
    """`mod` with every foldable chain after a convolution or dense layer in `main` folded into
    its weight and one bias (see the module docstring); `mod` itself is left as it was."""
    from tvm import relax

    plans = {}
    for block in mod["main"].body.blocks:
        if isinstance(block, relax.DataflowBlock):
            plans.update(_plan_block(block))
    if not plans:
        return mod
    return _folder_class()(mod, plans).transform()


def _plan_block(block: Any) -> dict[Any, _Chain]:
    """The chains of one dataflow block, keyed by the var bound to each chain's last step."""
    from tvm import relax

    values = {binding.var: binding.value for binding in block.bindings if isinstance(binding, relax.VarBinding)}
    users = relax.analysis.udchain(block)
    plans = {}
    for var, value in values.items():
        chain = _start(var, value)
        if chain is None:
            continue
        current = var
        while isinstance(current, relax.DataflowVar) and len(users.get(current, [])) == 1:
            following = users[current][0]
            if following not in values or not _step(chain, current, values[following]):
                break
            chain.steps.append(following)
            current = following
        if chain.folds():
            plans[chain.steps[-1]] = chain
    return plans


def _binary(value: Any) -> str | None:
    """The op name of `value` if it is a call of a Relax operator on two arguments."""
    import tvm
    from tvm import relax

    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and len(value.args) == 2:
        return str(value.op.name)
    return None


def _start(var: Any, value: Any) -> _Chain | None:
    """A chain for `var = value` if it is a float convolution or matmul whose weight is a constant
    and whose output's channel count is static."""
    import tvm

    name = _binary(value)
    shape = getattr(var.ty, "shape", None)
    if name is None or shape is None or not str(var.ty.dtype).startswith("float"):
        return None
    data, weight = value.args
    if not isinstance(weight, tvm.ir.Constant) or isinstance(data, tvm.ir.Constant):
        return None
    rank = len(shape)
    if name in _CONVOLUTIONS:
        layout = str(value.attrs.out_layout) or str(value.attrs.data_layout)
        output_axis, weight_axis = layout.index("C"), str(value.attrs.kernel_layout).index("O")
    elif name == _MATMUL and len(weight.value.shape) >= 2:
        output_axis, weight_axis = rank - 1, len(weight.value.shape) - 1
    else:
        return None
    try:
        channels = int(shape[output_axis])
    except TypeError:  # a symbolic channel count
        return None
    if int(weight.value.shape[weight_axis]) != channels:
        return None
    return _Chain(value, rank, str(var.ty.dtype), output_axis, weight_axis, channels)


def _step(chain: _Chain, operand: Any, value: Any) -> bool:
    """Take `value`, the only use of the chain's last var `operand`, into the chain if it is an
    `add`, `subtract` or `multiply` of `operand` and a per-channel constant; whether it was."""
    import tvm

    name = _binary(value)
    if name not in (*_SHIFTS, _SCALE):
        return False
    first, second = value.args
    if second.same_as(operand) and name != "relax.subtract":
        first, second = second, first
    if not first.same_as(operand) or not isinstance(second, tvm.ir.Constant):
        return False
    vector = chain.channel_vector(second.value.numpy())
    if vector is None:
        return False
    chain.take(name, vector)
    return True


def _folder_class() -> type:
    """The mutator that rewrites `main` by the plan (made on first use: it needs TVM)."""
    from tvm import relax

    @relax.expr_functor.mutator
    class Folder(relax.PyExprMutator):
        """Binds each chain's last var to the folded convolution (plus its bias); the chain's
        other bindings, unused then, are removed after."""

        def __init__(self, mod: Any, plans: dict[Any, _Chain]) -> None:
            super().__init__(mod)
            self.mod = mod
            self.plans = plans

        def transform(self) -> Any:
            main = self.mod.get_global_var("main")
            self.builder_.update_func(main, relax.analysis.remove_all_unused(self.visit_expr(self.mod["main"])))
            return self.builder_.get()

        def visit_var_binding_(self, binding: Any) -> None:
            chain = self.plans.get(binding.var)
            if chain is None:
                super().visit_var_binding_(binding)
                return
            convolution, bias = chain.folded(self.visit_expr(chain.call.args[0]))
            value = convolution if bias is None else relax.op.add(self.builder_.emit(convolution), bias)
            self.builder_.emit_normalized(relax.VarBinding(binding.var, self.builder_.normalize(value)))

    return Folder
