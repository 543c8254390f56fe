"""Stride-1 convolutions as Winograd's minimal filtering, F(m, r) along each axis (a Relax rewrite before legalisation).

At the FMA ceiling, a direct convolution does ``kh x kw`` multiply-adds per output and input
channel. Winograd's algorithm (Lavin and Gray, "Fast Algorithms for Convolutional Neural
Networks", 2016) computes each ``m x n`` tile of the output from an ``(m + kh - 1) x (n + kw - 1)``
tile of the input as

    Y = A_down^T [ (G_down g G_across^T) (.) (B_down^T d B_across) ] A_across

summed over the input channels: the element-wise products over channels are independent matmuls,
one per point of the transformed tile. F(4x4, 3x3) does 36 / 16 = 2.25 multiply-adds per output and
input channel where the direct 3x3 convolution does 9; F(2, 7) along the width of a 1x7 window 4
where it does 7. So a convolution becomes three steps here:

- ``winograd_input``: the input padded to whole tiles, each tile transformed, ``V[points, P, C]``
  for the ``P`` tiles (a kernel written for the target below: vectors over the channels, the tiles
  over the cores);
- a batched ``matmul(V, U)`` by the transformed filters ``U``, computed here from the constant
  weights: the contraction rule schedules it like any dense layer, weights packed;
- ``winograd_output``: each tile's ``A^T M A``, with the bias and the ReLU or clip that followed the
  convolution, written to the output's real rows and columns.

The matrices come from `cook_toom` (exact rational arithmetic); a window one step long on an axis
(1x7, 7x1, 1x3) keeps that axis as it is (`IDENTITY`). XNNPACK's and oneDNN's float32 CPU kernels
run these convolutions directly; with both at the FMA ceiling, this is where a margin comes from
(issue 39). Only where it pays: enough tiles to share each transformed weight (`MIN_TILES`),
float32, constant weights, NHWC and HWIO, no groups or dilation, windows of 1, 3, 5 or 7 along each
axis (`CHOICES`). The rounding error grows with the tile (the transforms' constants reach 8 for
F(4, 3), 21/4 and 1/90 for F(2, 7)); every form stays within float32's tolerance of the direct
convolution (tests/schedules/test_winograd.py).
"""

from __future__ import annotations

import logging
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
from tfcheck.compiler.schedules.tiling import padded_free_rows, vector_width

logger = logging.getLogger(__name__)

# The rule name the kernels written here carry (`apply.RULE_ATTR`), for the kernel table.
RULE = "winograd"

# Tiles (matmul rows) from which a convolution runs as Winograd's: each transformed weight is then
# used by at least this many rows, as a dense layer's weights by a batch of this many. On one Zen 4
# core (benchmarks/winograd_layers.py), with AVX2: 7x7x512 -> 512 took 2.72 ms direct, 2.28 as
# F(4x4) (4 tiles), 1.88 as F(2x2) (16 tiles); 14x14x256 -> 256 2.21, 1.01 as F(4x4) (16 tiles);
# InceptionV3's 8x8x384 -> 384 1x3 0.51, 0.30 as F(4, 3) across (16 tiles).
MIN_TILES = 16

# Input and output channels from which it pays: the transforms' additions per element are fixed,
# the matmul's work per element grows with the channels.
MIN_CHANNELS = 16


@dataclass(frozen=True)
class Transform:
    """One axis of F(m, r): ``B^T`` (alpha x alpha), ``G`` (alpha x r), ``A^T`` (m x alpha), alpha = m + r - 1.
    A 2-D convolution takes one per axis; a window one step long on an axis takes `IDENTITY` there."""

    m: int
    bt: tuple[tuple[Fraction, ...], ...]
    g: tuple[tuple[Fraction, ...], ...]
    at: tuple[tuple[Fraction, ...], ...]

    @property
    def alpha(self) -> int:
        """The input tile's side, m + r - 1."""
        return len(self.bt)

    @property
    def r(self) -> int:
        """The window's length."""
        return len(self.g[0])


def cook_toom(m: int, r: int, points: tuple[int | str, ...]) -> Transform:
    """F(m, r) interpolating at ``points`` (m + r - 2 of them) and infinity, exactly.

    ``A^T`` and ``G`` are the Vandermonde matrices of the points (``G``'s rows over each point's
    ``prod(p - q)``, which keeps ``B^T`` integral where it can be); ``B^T`` is then the one matrix
    with ``sum_j A^T[i, j] G[j, k] B^T[j, l] = [l == i + k]``: F(4, 3) at 0, +-1, +-2 is Lavin and
    Gray's. Solved in rational arithmetic: no rounding before the float32 constants."""
    finite = [Fraction(p) for p in points]
    alpha = m + r - 1
    if len(finite) != alpha - 1 or len(set(finite)) != len(finite):
        raise ValueError(f"F({m}, {r}) needs {alpha - 1} distinct points")
    scale = [math.prod(p - q for q in finite if q != p) for p in finite]
    at = [[p**i for p in finite] + [Fraction(i == m - 1)] for i in range(m)]
    g = [[p**k / f for k in range(r)] for p, f in zip(finite, scale)] + [[Fraction(k == r - 1) for k in range(r)]]
    system = [[at[i][j] * g[j][k] for j in range(alpha)] for i in range(m) for k in range(r)]
    columns = [_solve(system, [Fraction(l == i + k) for i in range(m) for k in range(r)]) for l in range(alpha)]
    bt = [[columns[l][j] for l in range(alpha)] for j in range(alpha)]
    return Transform(m, tuple(map(tuple, bt)), tuple(map(tuple, g)), tuple(map(tuple, at)))


def _solve(rows: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction]:
    """The solution of an overdetermined but consistent system (Gauss-Jordan over the rationals)."""
    width = len(rows[0])
    table = [row + [value] for row, value in zip(rows, rhs)]
    for column in range(width):
        pivot = next(index for index in range(column, len(table)) if table[index][column] != 0)
        table[column], table[pivot] = table[pivot], table[column]
        table[column] = [value / table[column][column] for value in table[column]]
        for index, row in enumerate(table):
            if index != column and row[column] != 0:
                table[index] = [value - row[column] * lead for value, lead in zip(row, table[column])]
    if any(value != 0 for row in table[width:] for value in row):
        raise ValueError("the points give no such transform")
    return [table[index][width] for index in range(width)]


# A window one step long: the tile is one row (or column) of the output, read as it is.
IDENTITY = Transform(1, ((Fraction(1),),), ((Fraction(1),),), ((Fraction(1),),))
F2 = cook_toom(2, 3, (0, 1, -1))
F4 = cook_toom(4, 3, (0, 1, -1, 2, -2))
F2_5 = cook_toom(2, 5, (0, 1, -1, 2, -2))
F2_7 = cook_toom(2, 7, (0, 1, -1, 2, -2, "1/2", "-1/2"))

# The transforms tried for a window of each length along an axis, fewest multiplies first.
CHOICES: dict[int, tuple[Transform, ...]] = {1: (IDENTITY,), 3: (F4, F2), 5: (F2_5,), 7: (F2_7,)}


@dataclass(frozen=True)
class Plan:
    """The transform along the height and along the width."""

    down: Transform
    across: Transform

    @property
    def points(self) -> int:
        """Products per tile and input channel: the batched matmul's batch."""
        return self.down.alpha * self.across.alpha


def choose_transform(batch: int, height: int, width: int, window: tuple[int, int] = (3, 3)) -> Plan | None:
    """The transforms for a convolution of ``window`` over a ``height`` x ``width`` output: a square
    window the same on both axes (F(4x4, 3x3), else F(2x2, 3x3)), a window one step long on an axis
    `IDENTITY` there; the first whose output has `MIN_TILES` tiles, or None (the direct convolution)."""
    down, across = (CHOICES.get(extent) for extent in window)
    if down is None or across is None or window == (1, 1):
        return None
    plans = [Plan(t, t) for t in down] if window[0] == window[1] else [Plan(d, a) for d in down for a in across]
    for plan in plans:
        if batch * math.ceil(height / plan.down.m) * math.ceil(width / plan.across.m) >= MIN_TILES:
            return plan
    return None


def filter_transform(kernel: np.ndarray, plan: Plan) -> np.ndarray:
    """``U = G_down g G_across^T`` of an HWIO kernel, as ``[points, C, K]`` float32 (computed in float64)."""
    down, across = (np.array(t.g, dtype=np.float64) for t in (plan.down, plan.across))
    u = np.einsum("ai,ijck,bj->abck", down, kernel.astype(np.float64), across)
    return u.reshape(plan.points, *kernel.shape[2:]).astype(np.float32)


@dataclass(frozen=True)
class Epilogue:
    """What follows the convolution inside the output transform: a bias per channel and an activation."""

    bias: np.ndarray | None
    clip: tuple[float, float] | None  # (min, max); (0, inf) is a ReLU


@dataclass(frozen=True)
class Tiling:
    """How a convolution's output is cut into tiles: ``P = batch * rows * cols`` tiles of
    ``plan.down.m x plan.across.m``, the matmul computing ``padded`` rows (`tiling.padded_free_rows`)."""

    plan: Plan
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

    @property
    def input_shape(self) -> tuple[int, int]:
        """The height and width of the input padded to whole tiles."""
        down, across = self.plan.down, self.plan.across
        return self.rows * down.m + down.r - 1, self.cols * across.m + across.r - 1


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

    def store(self, depth: int, target: str, value: str, checks: list[str]) -> None:
        """``target = value``, under the non-empty ``checks``."""
        condition = " and ".join(check for check in checks if check)
        if condition:
            self.line(depth, f"if {condition}:")
            depth += 1
        self.line(depth, f"{target} = {value}")

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
    source.line(depth, f"n: T.let = p // {per_image}")
    source.line(depth, f"h0: T.let = p % {per_image} // {tiling.cols} * {tiling.plan.down.m}")
    source.line(depth, f"w0: T.let = p % {tiling.cols} * {tiling.plan.across.m}")


def input_kernel(tiling: Tiling, channels: int, lanes: int) -> tvm.tirx.PrimFunc:
    """``V[xi * alpha_across + nu, p, c] = (B_down^T d_p B_across)[xi, nu]`` for each tile ``d_p`` of
    the input, already padded to whole tiles (`Tiling.input_shape`); the rows past the tiles zero."""
    down, across = tiling.plan.down, tiling.plan.across
    source = _Source(vector_width(channels, lanes))
    width = source.lanes
    source.line(1, f"for p in T.parallel({tiling.padded}):")
    source.line(2, f"if p < {tiling.tiles}:")
    _tile_origin(source, tiling, 3)
    source.line(3, f"for co in range({channels // width}):")
    channel = source.vector(f"co * {width}")
    for i in range(down.alpha):
        for j in range(across.alpha):
            source.line(4, f"d_{i}_{j}: T.let = x[n, h0 + {i}, w0 + {j}, {channel}]")
    for xi in range(down.alpha):  # B^T d: each row xi of the tile's columns
        for j in range(across.alpha):
            terms = source.combination(down.bt[xi], [f"d_{i}_{j}" for i in range(down.alpha)])
            source.line(4, f"s_{xi}_{j}: T.let = {terms}")
    for xi in range(down.alpha):  # (B^T d) B
        for nu in range(across.alpha):
            terms = source.combination(across.bt[nu], [f"s_{xi}_{j}" for j in range(across.alpha)])
            source.line(4, f"v[{xi * across.alpha + nu}, p, {channel}] = {terms}")
    source.line(2, "else:")
    source.line(3, f"for co in range({channels // width}):")
    for e in range(tiling.plan.points):
        source.line(4, f"v[{e}, p, {channel}] = {source.constant(0.0)}")
    height_in, width_in = tiling.input_shape
    params = [f'x: T.Buffer(({tiling.batch}, {height_in}, {width_in}, {channels}), "float32")',
              f'v: T.Buffer(({tiling.plan.points}, {tiling.padded}, {channels}), "float32")']
    return source.function(params)


def output_kernel(tiling: Tiling, channels: int, lanes: int, epilogue: Epilogue) -> tvm.tirx.PrimFunc:
    """``y[n, h0 + a, w0 + b, k] = act((A_down^T M_p A_across)[a, b] + bias[k])`` for each tile ``p``
    of ``M[points, P, K]``, the output's rows and columns past its edge not written."""
    down, across = tiling.plan.down, tiling.plan.across
    source = _Source(vector_width(channels, lanes))
    width = source.lanes
    source.line(1, f"for p in T.parallel({tiling.tiles}):")
    _tile_origin(source, tiling, 2)
    source.line(2, f"for ko in range({channels // width}):")
    channel = source.vector(f"ko * {width}")
    for e in range(tiling.plan.points):
        source.line(3, f"m_{e}: T.let = mm[{e}, p, {channel}]")
    for xi in range(down.alpha):  # M A: each row xi's m columns
        for b in range(across.m):
            terms = source.combination(across.at[b], [f"m_{xi * across.alpha + nu}" for nu in range(across.alpha)])
            source.line(3, f"r_{xi}_{b}: T.let = {terms}")
    for a in range(down.m):  # A^T (M A)
        for b in range(across.m):
            value = source.combination(down.at[a], [f"r_{xi}_{b}" for xi in range(down.alpha)])
            source.store(3, f"y[n, h0 + {a}, w0 + {b}, {channel}]", _with_epilogue(source, value, epilogue, channel),
                         [f"h0 + {a} < {tiling.height}" if tiling.height % down.m else "",
                          f"w0 + {b} < {tiling.width}" if tiling.width % across.m else ""])
    params = [f'mm: T.Buffer(({tiling.plan.points}, {tiling.padded}, {channels}), "float32")']
    if epilogue.bias is not None:
        params.append(f'bias: T.Buffer(({channels},), "float32")')
    params.append(f'y: T.Buffer(({tiling.batch}, {tiling.height}, {tiling.width}, {channels}), "float32")')
    return source.function(params)


def _with_epilogue(source: _Source, value: str, epilogue: Epilogue, channel: str) -> str:
    """``value`` with the bias added and the ReLU or clip applied."""
    if epilogue.bias is not None:
        value = f"{value} + bias[{channel}]"
    if epilogue.clip is not None:
        low, high = epilogue.clip  # an infinite bound (a ReLU's, a clip's) clips nothing
        if math.isfinite(low):
            value = f"T.max({value}, {source.constant(low)})"
        if math.isfinite(high):
            value = f"T.min({value}, {source.constant(high)})"
    return value


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
    if kernel.dtype != np.float32 or min(kernel.shape[2:]) < MIN_CHANNELS:
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
        window = kernel.shape[:2]
        top, left, bottom, right = (int(p) for p in call.attrs.padding)
        out_h, out_w = height + top + bottom - window[0] + 1, width + left + right - window[1] + 1
        plan = choose_transform(batch, out_h, out_w, window) if out_h > 0 and out_w > 0 else None
        if plan is None:
            return None
        outputs = kernel.shape[3]
        rows, cols = math.ceil(out_h / plan.down.m), math.ceil(out_w / plan.across.m)
        tiling = Tiling(plan, batch, out_h, out_w, rows, cols,
                        padded_free_rows(batch * rows * cols, outputs, self.lanes, self.registers))
        height_in, width_in = tiling.input_shape
        widths = [0, 0, top, height_in - height - top, left, width_in - width - left, 0, 0]
        data = relax.op.nn.pad(call.args[0], widths) if any(widths) else call.args[0]
        try:
            kernels = input_kernel(tiling, channels, self.lanes), output_kernel(tiling, outputs, self.lanes, epilogue)
        except Exception as error:  # noqa: BLE001 - TVM's parser raises many kinds; any leaves the convolution direct
            logger.warning("Winograd's form of a %s convolution over %s could not be written (%s): it stays direct",
                           "x".join(map(str, window)), (batch, height, width, channels), error)
            return None
        input_gvar = self._add(kernels[0], "winograd_input")
        output_gvar = self._add(kernels[1], "winograd_output")
        tiles_in = relax.call_tir(input_gvar, [data],
                                  relax.TensorType((plan.points, tiling.padded, channels), "float32"))
        product = relax.op.matmul(tiles_in, relax.const(filter_transform(kernel, plan)))
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
    """``mod`` with each eligible stride-1 convolution (see the module) as Winograd's, the
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
