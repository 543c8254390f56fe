"""TFLite's layer normalisation, imported op by op, as one `relax.op.nn.layer_norm` (a Relax rewrite
before legalisation).

TFLite has no layer-norm operator: Keras' `LayerNormalization` converts to MEAN, SQUARED_DIFFERENCE,
MEAN, ADD (epsilon), RSQRT and the multiplies and adds of the scale, which import as

    mean = mean(x, axis=-1); var = mean((x - mean) ** 2, axis=-1); scale = rsqrt(var + eps) * gamma
    out = x * scale + (-mean) * scale            or, with a beta,   x * scale + ((-mean) * scale + beta)

and fuse into four kernels (the mean; the squared difference; the second mean with epsilon and
rsqrt; the normalisation), each a VM call and a pass over the tensor. The encoder block's two layer
norms took 14.9 us of kernel time and four VM calls each (docs/benchmarks.md). Matched here, each
becomes one `layer_norm`, one kernel for the rows rule: a [1, 64, 128] layer norm took 4.3 us a
call against 12.4 us (docs/schedules.md, "Layer norms as one kernel"). TVM's `layer_norm` computes
the variance from the centred values as the pattern does (the same error against NumPy for inputs
offset by 0, 100 and 1000). A beta, which the converter folds into `(-mean) * scale + beta`, becomes
the `layer_norm`'s own; so does one that `tf.nn.batch_normalization` subtracts, `beta - mean *
scale` (kpe/bert-for-tf2's own `LayerNormalization`, 25 of them in BERT base, four kernels each:
docs/build.md, "Users' models"). Anything else (another axis, a gamma or beta that is not a constant over
the last axis alone, an exponent other than 2, statistics of another tensor) is left as it is.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.relax.dpl import is_const, is_op, wildcard

from tfcheck.compiler.schedules.rewrites.relax_rewrite import rewrite_functions


def _pattern() -> tuple[relax.dpl.DFPattern, dict[str, relax.dpl.DFPattern]]:
    """The imported layer norm, and its parts by name."""
    parts = {"x": wildcard(), "gamma": is_const(), "beta": is_const(), "eps": is_const(), "two": is_const()}
    parts["mean"] = is_op("relax.mean")(parts["x"])
    parts["var"] = is_op("relax.mean")(is_op("relax.power")(is_op("relax.subtract")(parts["x"], parts["mean"]),
                                                             parts["two"]))
    scale = is_op("relax.multiply")(is_op("relax.rsqrt")(is_op("relax.add")(parts["var"], parts["eps"])), parts["gamma"])
    shift = is_op("relax.multiply")(is_op("relax.negative")(parts["mean"]), scale)
    offset = is_op("relax.subtract")(parts["beta"], is_op("relax.multiply")(parts["mean"], scale))
    out = is_op("relax.add")(is_op("relax.multiply")(parts["x"], scale),
                             shift | is_op("relax.add")(shift, parts["beta"]) | offset)
    return out, parts


def _constant(expr: relax.Expr) -> np.ndarray:
    return expr.value.numpy()


def _over_last_axis(call: relax.Call, rank: int) -> bool:
    """Whether a `mean` reduces the last axis alone and keeps it."""
    axes = [int(axis) % rank for axis in call.attrs.axis] if call.attrs.axis is not None else []
    return axes == [rank - 1] and bool(call.attrs.keepdims)


def _layer_norm(matched: dict[relax.dpl.DFPattern, relax.Expr], parts: dict[str, relax.dpl.DFPattern]) -> relax.Expr | None:
    """`layer_norm` for a match, or None when the match is not a layer norm over the last axis."""
    x = matched[parts["x"]]
    dims = getattr(getattr(x.ty, "shape", None), "values", None)
    if getattr(x.ty, "dtype", None) != "float32" or not dims or not isinstance(dims[-1], tvm.tirx.IntImm):
        return None
    rank, channels = len(dims), dims[-1]
    eps, two = (_constant(matched[parts[name]]) for name in ("eps", "two"))
    if two.size != 1 or float(two.reshape(())) != 2.0 or eps.size != 1:
        return None
    if not all(_over_last_axis(matched[parts[name]], rank) for name in ("mean", "var")):
        return None
    gamma = _per_channel(_constant(matched[parts["gamma"]]), rank, int(channels))
    beta = (_per_channel(_constant(matched[parts["beta"]]), rank, int(channels)) if parts["beta"] in matched
            else np.zeros(int(channels), np.float32))
    if gamma is None or beta is None:
        return None
    return relax.op.nn.layer_norm(x, relax.const(gamma), relax.const(beta), axes=[-1],
                                  epsilon=float(eps.reshape(())))


def _per_channel(value: np.ndarray, rank: int, channels: int) -> np.ndarray | None:
    """``value`` as a vector over the last axis, or None when it varies along another axis."""
    if value.ndim > rank or value.shape[:-1] != (1,) * (value.ndim - 1) or value.shape[-1:] != (channels,):
        return None
    return value.reshape(-1).astype(np.float32)


def fuse_layer_norms(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every imported layer norm over the last axis as one `layer_norm` call."""
    pattern, parts = _pattern()

    def rewrite(original: relax.Expr, matched: dict[relax.dpl.DFPattern, relax.Expr]) -> relax.Expr:
        replacement = _layer_norm(matched, parts)
        return original if replacement is None else replacement

    return rewrite_functions(mod, pattern, rewrite)
