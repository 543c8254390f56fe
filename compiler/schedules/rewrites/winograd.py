"""3x3 stride-1 convolutions as Winograd's minimal filtering F(m x m, 3 x 3) (a Relax rewrite before legalisation).

At the FMA ceiling, a direct 3x3 convolution does 9 multiply-adds per output and input channel.
Winograd's algorithm (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016)
computes each m x m tile of the output from an (m + 2) x (m + 2) tile of the input as

    Y = A^T [ (G g G^T) (.) (B^T d B) ] A

summed over the input channels: the element-wise products over channels are ``(m + 2)^2``
independent matmuls, ``(m + 2)^2 / m^2`` multiply-adds per output and input channel (2.25 for
F(4x4, 3x3), 4 for F(2x2, 3x3)), the transforms a few additions per element. So a convolution
becomes three steps here:

- ``winograd_input``: the input padded to whole tiles, each tile transformed, ``V[(m+2)^2, P, C]``
  for the ``P`` tiles (a kernel written for the target below: vectors over the channels, the tiles
  over the cores);
- a batched ``matmul(V, U)`` by the transformed filters ``U = G g G^T``, computed here from the
  constant weights: the contraction rule schedules it like any dense layer, weights packed;
- ``winograd_output``: each tile's ``A^T M A``, with the bias and the ReLU or clip that followed the
  convolution, written to the output's real rows and columns.

XNNPACK's and oneDNN's float32 CPU kernels run 3x3 convolutions directly; with both at the FMA
ceiling, this is where a margin comes from (issue 39). Only where it pays: enough tiles to share
each transformed weight (`MIN_TILES`; an 8x8 map's 4 tiles of F(4x4) would read 4x the weights of
a direct convolution for a fraction of its work), float32, constant weights, NHWC and HWIO, no
groups or dilation. F(4x4) where there are enough of its tiles, else F(2x2). Its rounding error
grows with m (the transforms' constants reach 8 for F(4x4)); F(4x4, 3x3) stays within float32's
tolerance of the direct convolution (tests/schedules/test_winograd.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import tvm
from tvm import relax
from tvm.relax.dpl import is_const, is_op, wildcard
from tvm.target import Target

from tfcheck.compiler.schedules import cpu
from tfcheck.compiler.schedules.rewrites.channel_padding import static_shape
from tfcheck.compiler.schedules.rewrites.relax_rewrite import rewrite_functions
from tfcheck.compiler.schedules.tiling import padded_matmul_rows, vector_width

# The rule name the kernels written here carry (`apply.RULE_ATTR`), for the kernel table.
RULE = "winograd"

# Tiles (matmul rows) from which a convolution runs as Winograd's: each transformed weight is then
# used by at least this many rows, as a dense layer's weights by a batch of this many. On one Zen 4
# core (benchmarks/winograd_layers.py), with AVX2: 7x7x512 -> 512 took 2.72 ms direct, 2.28 as
# F(4x4) (4 tiles), 1.88 as F(2x2) (16 tiles); 14x14x256 -> 256 2.21, 1.01 as F(4x4) (16 tiles).
MIN_TILES = 16

# Input and output channels from which it pays: the transforms' additions per element are fixed,
# the matmul's work per element grows with the channels.
MIN_CHANNELS = 16


@dataclass(frozen=True)
class Transform:
    """The matrices of F(m x m, 3 x 3): ``B^T`` (alpha x alpha), ``G`` (alpha x 3), ``A^T`` (m x alpha)."""

    m: int
    bt: tuple[tuple[Fraction, ...], ...]
    g: tuple[tuple[Fraction, ...], ...]
    at: tuple[tuple[Fraction, ...], ...]

    @property
    def alpha(self) -> int:
        """The input tile's side, m + 2."""
        return self.m + 2


def _matrix(rows: list[list[int | str]]) -> tuple[tuple[Fraction, ...], ...]:
    return tuple(tuple(Fraction(value) for value in row) for row in rows)


# Lavin and Gray's matrices: F(2x2) interpolates at 0, 1, -1 and infinity; F(4x4) at 0, 1, -1, 2, -2
# and infinity.
F2 = Transform(2, _matrix([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]),
               _matrix([[1, 0, 0], ["1/2", "1/2", "1/2"], ["1/2", "-1/2", "1/2"], [0, 0, 1]]),
               _matrix([[1, 1, 1, 0], [0, 1, -1, -1]]))
F4 = Transform(4, _matrix([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                           [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]),
               _matrix([["1/4", 0, 0], ["-1/6", "-1/6", "-1/6"], ["-1/6", "1/6", "-1/6"],
                        ["1/24", "1/12", "1/6"], ["1/24", "-1/12", "1/6"], [0, 0, 1]]),
               _matrix([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]))


def choose_transform(batch: int, height: int, width: int) -> Transform | None:
    """F(4x4) where the output has `MIN_TILES` of its tiles, else F(2x2) where it has that many of
    its own, else None (the direct convolution)."""
    for transform in (F4, F2):
        if batch * math.ceil(height / transform.m) * math.ceil(width / transform.m) >= MIN_TILES:
            return transform
    return None


def filter_transform(kernel: np.ndarray, transform: Transform) -> np.ndarray:
    """``U = G g G^T`` of an HWIO 3x3 kernel, as ``[alpha^2, C, K]`` float32 (computed in float64)."""
    g = np.array(transform.g, dtype=np.float64)
    u = np.einsum("ai,ijck,bj->abck", g, kernel.astype(np.float64), g)
    return u.reshape(transform.alpha**2, *kernel.shape[2:]).astype(np.float32)


@dataclass(frozen=True)
class Epilogue:
    """What follows the convolution inside the output transform: a bias per channel and an activation."""

    bias: np.ndarray | None
    clip: tuple[float, float] | None  # (min, max); (0, inf) is a ReLU


@dataclass(frozen=True)
class Tiling:
    """How a convolution's output is cut into tiles: ``P = batch * rows * cols`` tiles of m x m,
    the matmul computing ``padded`` rows (`tiling.padded_matmul_rows`)."""

    transform: Transform
    batch: int
    height: int  # the output's
    width: int
    rows: int  # tiles down
    cols: int  # tiles across
    padded: int

    @property
    def tiles(self) -> int:
        """The real tiles, ``P``: the matmul's rows past them are zero."""
        return self.batch * self.rows * self.cols


class _Source:
    """TVMScript of a kernel written for a vector width: each value a vector of ``lanes`` channels."""

    def __init__(self, lanes: int) -> None:
        self.lanes = lanes
        self.lines: list[str] = []

    def vector(self, base: str) -> str:
        """The channels ``base .. base + lanes`` as an index."""
        return f"T.ramp({base}, 1, {self.lanes})" if self.lanes > 1 else base

    def constant(self, value: float) -> str:
        """``value`` in every lane."""
        scalar = f"T.float32({value!r})"
        return f"T.Broadcast({scalar}, {self.lanes})" if self.lanes > 1 else scalar

    def combination(self, coefficients: tuple[Fraction, ...], names: list[str]) -> str:
        """``sum(c * name)`` over the non-zero coefficients, a coefficient of 1 or -1 as an addition."""
        text = ""
        for coefficient, name in zip(coefficients, names):
            if coefficient == 0:
                continue
            term = name if abs(coefficient) == 1 else f"{name} * {self.constant(float(abs(coefficient)))}"
            if not text:
                text = f"-{term}" if coefficient < 0 else term
            else:
                text = f"{text} {'-' if coefficient < 0 else '+'} {term}"
        return text or self.constant(0.0)

    def line(self, depth: int, text: str) -> None:
        """A statement ``depth`` levels into the function's body."""
        self.lines.append("    " * depth + text)

    def function(self, params: list[str]) -> tvm.tirx.PrimFunc:
        """The kernel of the lines so far, taking ``params``; marked scheduled, so the rules leave
        it as written, and opaque, so FuseOps fuses nothing into it. (The rule attribute is
        `apply.RULE_ATTR`, spelled out: apply imports this module.)"""
        header = [
            "@T.prim_func(s_tir=True, private=True)",
            f"def main({', '.join(params)}):",
            f'    T.func_attr({{"tirx.noalias": True, "tirx.is_scheduled": True, "op_pattern": 8, '
            f'"tfcheck.schedule_rule": "{RULE}"}})',
        ]
        # A root block, as legalised kernels have: passes that inspect kernels expect one.
        body = ['    with T.sblock("root"):'] + ["    " + line for line in self.lines]
        return tvm.script.from_source("\n".join(header + body))


def _tile_origin(source: _Source, tiling: Tiling, depth: int) -> None:
    """Let-bind the tile ``p``'s batch index and first output row and column: ``n``, ``h0``, ``w0``."""
    per_image = tiling.rows * tiling.cols
    m = tiling.transform.m
    source.line(depth, f"n: T.let = p // {per_image}")
    source.line(depth, f"h0: T.let = p % {per_image} // {tiling.cols} * {m}")
    source.line(depth, f"w0: T.let = p % {tiling.cols} * {m}")


def input_kernel(tiling: Tiling, channels: int, lanes: int) -> tvm.tirx.PrimFunc:
    """``V[xi * alpha + nu, p, c] = (B^T d_p B)[xi, nu]`` for each tile ``d_p`` of the input, already
    padded to whole tiles (``[batch, rows * m + 2, cols * m + 2, C]``); the rows past the tiles zero."""
    t = tiling.transform
    alpha = t.alpha
    source = _Source(vector_width(channels, lanes))
    width = source.lanes
    height_in, width_in = tiling.rows * t.m + 2, tiling.cols * t.m + 2
    source.line(1, f"for p in T.parallel({tiling.padded}):")
    source.line(2, f"if p < {tiling.tiles}:")
    _tile_origin(source, tiling, 3)
    source.line(3, f"for co in range({channels // width}):")
    channel = source.vector(f"co * {width}")
    for i in range(alpha):
        for j in range(alpha):
            source.line(4, f"d_{i}_{j}: T.let = x[n, h0 + {i}, w0 + {j}, {channel}]")
    for xi in range(alpha):  # B^T d: each row xi of the tile's columns
        for j in range(alpha):
            terms = source.combination(t.bt[xi], [f"d_{i}_{j}" for i in range(alpha)])
            source.line(4, f"s_{xi}_{j}: T.let = {terms}")
    for xi in range(alpha):  # (B^T d) B
        for nu in range(alpha):
            terms = source.combination(t.bt[nu], [f"s_{xi}_{j}" for j in range(alpha)])
            source.line(4, f"v[{xi * alpha + nu}, p, {channel}] = {terms}")
    source.line(2, "else:")
    source.line(3, f"for co in range({channels // width}):")
    for e in range(alpha * alpha):
        source.line(4, f"v[{e}, p, {channel}] = {source.constant(0.0)}")
    params = [f'x: T.Buffer(({tiling.batch}, {height_in}, {width_in}, {channels}), "float32")',
              f'v: T.Buffer(({alpha * alpha}, {tiling.padded}, {channels}), "float32")']
    return source.function(params)


def output_kernel(tiling: Tiling, channels: int, lanes: int, epilogue: Epilogue) -> tvm.tirx.PrimFunc:
    """``y[n, h0 + a, w0 + b, k] = act((A^T M_p A)[a, b] + bias[k])`` for each tile ``p`` of
    ``M[alpha^2, P, K]``, the output's rows and columns past its edge not written."""
    t = tiling.transform
    alpha = t.alpha
    source = _Source(vector_width(channels, lanes))
    width = source.lanes
    source.line(1, f"for p in T.parallel({tiling.tiles}):")
    _tile_origin(source, tiling, 2)
    source.line(2, f"for ko in range({channels // width}):")
    channel = source.vector(f"ko * {width}")
    for e in range(alpha * alpha):
        source.line(3, f"m_{e}: T.let = mm[{e}, p, {channel}]")
    for xi in range(alpha):  # M A: each row xi's m columns
        for b in range(t.m):
            terms = source.combination(t.at[b], [f"m_{xi * alpha + nu}" for nu in range(alpha)])
            source.line(3, f"r_{xi}_{b}: T.let = {terms}")
    for a in range(t.m):  # A^T (M A)
        for b in range(t.m):
            value = source.combination(t.at[a], [f"r_{xi}_{b}" for xi in range(alpha)])
            if epilogue.bias is not None:
                value = f"{value} + bias[{channel}]"
            if epilogue.clip is not None:
                low, high = epilogue.clip
                value = f"T.max({value}, {source.constant(low)})"
                if math.isfinite(high):
                    value = f"T.min({value}, {source.constant(high)})"
            checks = [f"h0 + {a} < {tiling.height}" if (tiling.height % t.m) else "",
                      f"w0 + {b} < {tiling.width}" if (tiling.width % t.m) else ""]
            condition = " and ".join(check for check in checks if check)
            store = f"y[n, h0 + {a}, w0 + {b}, {channel}] = {value}"
            if condition:
                source.line(3, f"if {condition}:")
                source.line(4, store)
            else:
                source.line(3, store)
    params = [f'mm: T.Buffer(({alpha * alpha}, {tiling.padded}, {channels}), "float32")']
    if epilogue.bias is not None:
        params.append(f'bias: T.Buffer(({channels},), "float32")')
    params.append(f'y: T.Buffer(({tiling.batch}, {tiling.height}, {tiling.width}, {channels}), "float32")')
    return source.function(params)


def _eligible(call: relax.Call) -> tuple[tuple[int, ...], np.ndarray] | None:
    """The input shape and HWIO kernel of a convolution this rewrite takes, or None."""
    data, weight = call.args
    attrs = call.attrs
    shape = static_shape(data)
    if (shape is None or len(shape) != 4 or not isinstance(weight, tvm.ir.expr.Constant) or attrs.groups != 1
            or attrs.data_layout != "NHWC" or attrs.kernel_layout != "HWIO" or attrs.out_layout != "NHWC"
            or any(int(v) != 1 for v in [*attrs.strides, *attrs.dilation])
            or data.ty.dtype != "float32" or (attrs.out_dtype and str(attrs.out_dtype) not in ("", "float32"))):
        return None
    kernel = weight.value.numpy()
    if kernel.dtype != np.float32 or kernel.shape[:2] != (3, 3) or min(kernel.shape[2:]) < MIN_CHANNELS:
        return None
    return shape, kernel


class _Rewriter:
    """Builds each rewritten convolution's kernels and Relax calls; the kernels go into the module after."""

    def __init__(self, mod: tvm.IRModule, target: Target) -> None:
        self.lanes = cpu.vector_lanes(target, 32)
        self.registers = cpu.vector_registers(target)
        self.builder = relax.BlockBuilder(mod)  # names the kernels apart from the module's, and types their GlobalVars
        self.kernels: dict[tvm.ir.GlobalVar, tvm.tirx.PrimFunc] = {}

    def _add(self, kernel: tvm.tirx.PrimFunc, name: str) -> tvm.ir.GlobalVar:
        gvar = self.builder.add_func(kernel, name)
        self.kernels[gvar] = kernel
        return gvar

    def convolution(self, call: relax.Call, epilogue: Epilogue) -> relax.Expr | None:
        """The Winograd form of ``call`` followed by ``epilogue``, or None to leave it."""
        eligible = _eligible(call)
        if eligible is None:
            return None
        (batch, height, width, channels), kernel = eligible
        top, left, bottom, right = (int(p) for p in call.attrs.padding)
        out_h, out_w = height + top + bottom - 2, width + left + right - 2
        transform = choose_transform(batch, out_h, out_w)
        if transform is None or out_h < 1 or out_w < 1:
            return None
        outputs = kernel.shape[3]
        rows, cols = math.ceil(out_h / transform.m), math.ceil(out_w / transform.m)
        tiles = batch * rows * cols
        tiling = Tiling(transform, batch, out_h, out_w, rows, cols,
                        padded_matmul_rows(tiles, outputs, self.lanes, self.registers))
        widths = [0, 0, top, rows * transform.m + 2 - height - top, left, cols * transform.m + 2 - width - left, 0, 0]
        data = relax.op.nn.pad(call.args[0], widths) if any(widths) else call.args[0]
        alpha2 = transform.alpha**2
        input_gvar = self._add(input_kernel(tiling, channels, self.lanes), "winograd_input")
        output_gvar = self._add(output_kernel(tiling, outputs, self.lanes, epilogue), "winograd_output")
        tiles_in = relax.call_tir(input_gvar, [data], relax.TensorType((alpha2, tiling.padded, channels), "float32"))
        product = relax.op.matmul(tiles_in, relax.const(filter_transform(kernel, transform)))
        args = [product] + ([relax.const(epilogue.bias)] if epilogue.bias is not None else [])
        return relax.call_tir(output_gvar, args, relax.TensorType((batch, out_h, out_w, outputs), "float32"))


def _bias(constant: tvm.ir.expr.Constant, channels: int) -> np.ndarray | None:
    """A constant added to a convolution's output as a bias per channel, as ``[K]``; None otherwise."""
    value = constant.value.numpy()
    if value.dtype != np.float32 or value.size != channels or (value.ndim and value.shape[-1] != channels):
        return None
    return value.reshape(channels)


def _clip(call: relax.Call) -> tuple[float, float] | None:
    """(min, max) of a ReLU or a clip."""
    if call.op.name == "relax.nn.relu":
        return (0.0, math.inf)
    low, high = (float(getattr(arg.value, "value", arg.value)) for arg in call.args[1:3])
    return (low, high)


def _or_original(rewritten: relax.Expr | None, original: relax.Expr) -> relax.Expr:
    return original if rewritten is None else rewritten


def winograd_convolutions(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """``mod`` with each eligible 3x3 stride-1 convolution (see the module) as Winograd's, the
    bias and the ReLU or clip right after it taken into its output transform. (A convolution or
    bias whose value something else reads too is then computed again for that reader: Keras's
    layers, batch norms folded, give none.)"""
    rewriter = _Rewriter(mod, target)
    conv = is_op("relax.nn.conv2d")(wildcard(), is_const())
    bias = is_op("relax.add")(conv, is_const())
    activation = is_op("relax.nn.relu")(bias) | is_op("relax.clip")(bias, wildcard(), wildcard())

    def with_epilogue(expr: relax.Expr, matches: dict) -> relax.Expr:
        add = matches[bias]  # `expr` itself, or the add under a ReLU or clip
        channels = static_shape(matches[conv])
        values = None if channels is None else _bias(add.args[1], channels[-1])
        if values is None:
            return expr
        clip = None if expr.op.name == "relax.add" else _clip(expr)
        return _or_original(rewriter.convolution(matches[conv], Epilogue(values, clip)), expr)

    def alone(expr: relax.Expr, _matches: dict) -> relax.Expr:
        return _or_original(rewriter.convolution(expr, Epilogue(None, None)), expr)

    for pattern, rewrite in ((activation, with_epilogue), (bias, with_epilogue), (conv, alone)):
        mod = rewrite_functions(mod, pattern, rewrite)
    if not rewriter.kernels:
        return mod
    mod = mod.clone()
    for gvar, func in rewriter.kernels.items():
        mod[gvar] = func
    return mod
