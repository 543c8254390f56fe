"""MobileNetV2's 1x1 (pointwise) convolutions: the register tile chosen on AVX-512 and AVX2, and
the scheduled kernels against NumPy on both.

The tiles are checked on AVX-512 (``mcpu=znver4``) and AVX2 (``mcpu=znver3``: 8-float vectors,
16 registers) targets whatever the host; the kernels run on the host's target and on AVX2. The shapes are MobileNetV2's (docs/schedules.md, "1x1
convolutions"), with their epilogues: bias + ReLU6 (expansions), bias + residual add (projections).
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

from tfcheck.compiler.schedules import legalize_and_fuse
from tfcheck.compiler.schedules.rules import contraction

from ..isa import host_target, named_target
from .test_operators import check, module, rand, run

# Compiled only: AVX-512 and AVX2 whatever the host. Run: the host's own target and AVX2.
TARGETS = {"avx512": "znver4", "avx2": "znver3", "host": None}
RUN_ON = ("host", "avx2")


def target_for(name: str) -> tvm.target.Target:
    mcpu = TARGETS[name]
    return host_target(**{"num-cores": 2}) if mcpu is None else named_target(mcpu)


def pointwise(size: int, channels: int, filters: int, epilogue: str) -> tuple[tvm.IRModule, list[np.ndarray], np.ndarray]:
    """A 1x1 convolution + bias + ReLU6 or + bias + residual add, as the importer writes it;
    its inputs and NumPy's output."""
    x, w, b = rand(1, size, size, channels), rand(1, 1, channels, filters), rand(filters)
    skip = rand(1, size, size, filters)
    expected = (x.reshape(-1, channels) @ w.reshape(channels, filters) + b).reshape(1, size, size, filters)

    def emit(bb, x_var, *skip_var):
        y = bb.emit(relax.op.nn.conv2d(x_var, relax.const(w), data_layout="NHWC", kernel_layout="HWIO"))
        y = bb.emit(relax.op.add(y, relax.const(b)))
        return relax.op.add(y, skip_var[0]) if skip_var else relax.op.clip(y, 0.0, 6.0)

    if epilogue == "add":
        return module([x.shape, skip.shape], emit), [x, skip], expected + skip
    return module([x.shape], emit), [x], np.clip(expected, 0.0, 6.0)


def tile(size: int, channels: int, filters: int, target: tvm.target.Target) -> tuple[int, int, int]:
    """(rows, columns, vector width) of the register tile the contraction rule gives the convolution:
    the unrolled and vectorised loops under the reduction."""
    mod, _, _ = pointwise(size, channels, filters, "relu6")
    [func] = [f for _, f in legalize_and_fuse(mod, target).functions_items() if isinstance(f, tirx.PrimFunc)]
    sch = contraction.schedule_contraction(func, target)
    loops = [sch.get(loop) for loop in sch.get_loops(sch.get_sblock("conv2d_nhwc_update"))]
    rows, *cols = [int(loop.extent) for loop in loops if loop.kind in (tirx.ForKind.UNROLLED, tirx.ForKind.VECTORIZED)]
    return rows, int(np.prod(cols)), cols[-1]


@pytest.mark.parametrize(
    ("shape", "avx512", "avx2"),
    [
        # 7 rows: 7 x 4 AVX-512 vectors needed 33 registers with the weights and spilled (2.3x
        # slower); AVX2 takes 7 rows of one vector (docs/schedules.md, "AVX2: no single-row tiles")
        ((7, 320, 1280), (7, 32, 16), (7, 8, 8)),
        # 144 channels are 9 vectors: 3 per row beat 1 (the old 14-row tile)
        ((56, 24, 144), (4, 48, 16), (4, 24, 8)),
        # 14 x 2 AVX-512 vectors were 1792 bytes: a workspace per tile in the parallel loop
        ((112, 16, 96), (7, 32, 16), (4, 24, 8)),
        ((14, 384, 64), (7, 32, 16), (2, 32, 8)),
    ],
)
def test_pointwise_register_tile(shape: tuple[int, int, int], avx512: tuple[int, ...], avx2: tuple[int, ...]) -> None:
    assert tile(*shape, target_for("avx512")) == avx512
    assert tile(*shape, target_for("avx2")) == avx2


@pytest.mark.parametrize("target_name", ["avx512", "avx2"])
def test_parallel_pointwise_kernel_allocates_no_workspace(target_name: str) -> None:
    """The accumulators of every tile stay on the stack: no TVMBackendAllocWorkspace in the
    parallel closure (MobileNetV2's 112x112x16 -> 96 took 1.5x its serial time on one thread)."""
    target = target_for(target_name)
    mod, _, _ = pointwise(112, 16, 96, "relu6")
    [func] = [f for _, f in legalize_and_fuse(mod, target).functions_items() if isinstance(f, tirx.PrimFunc)]
    kernel = contraction.schedule_contraction(func, target).mod["main"]
    assert "T.parallel(" in kernel.script()
    library = tvm.compile(tvm.IRModule({"main": kernel.with_attr("global_symbol", "main")}), target=target)
    # Compiled alone, the kernel still packs its weights itself, into a workspace allocated once
    # per call outside the parallel loop; the parallel closure's body is what must have none.
    source = library.mod.inspect_source("ll")
    closure = source[source.index("@__tvm_parallel_lambda("):]
    closure = closure[: closure.index("\n}\n")]
    assert " x float>" in closure and "TVMBackendAllocWorkspace" not in closure  # the vector code is in it


@pytest.mark.parametrize("target_name", RUN_ON)
@pytest.mark.parametrize(
    ("size", "channels", "filters", "epilogue"),
    [
        (28, 32, 192, "relu6"),
        (28, 192, 32, "add"),
        (14, 96, 576, "relu6"),
        (7, 960, 160, "add"),
        (7, 320, 1280, "relu6"),
        (56, 144, 24, "add"),  # 24 channels: 8-wide vectors on AVX-512
    ],
)
def test_pointwise_matches_numpy(size: int, channels: int, filters: int, epilogue: str, target_name: str) -> None:
    mod, inputs, expected = pointwise(size, channels, filters, epilogue)
    actual, rules = run(mod, *inputs, target=target_for(target_name))
    check(actual, expected)
    assert rules == ["schedule_contraction"]  # convolution, bias and activation or add in one kernel
