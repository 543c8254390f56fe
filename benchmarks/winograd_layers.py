"""Stride-1 convolutions direct and in Winograd's forms, one core.

`compiler/schedules/rewrites/winograd.py` rewrites a stride-1 convolution of a 3x3, 5x5, 1xN or Nx1
window into an input transform, a batched matmul and an output transform when its output has
enough tiles. This times each form of InceptionV3's, ResNet50's layers (conv + bias + ReLU,
constant weights), scheduled and compiled as `tfcheck build` compiles them, in interleaved rounds
of the calling thread's CPU time (best round):

    TVM_NUM_THREADS=1 .venv/bin/python benchmarks/winograd_layers.py [--rounds 10] [--target cpu]
        [--shape 73x73x80x192:3x3v ...]

A shape is `HxWxCxK:KHxKW` then `s` ('same') or `v` ('valid'). The forms: `direct`, `F(2)` (tiles
of 2 along each axis the window is longer than 1) and `F(4)` (of 4, for 3-long windows). GFLOP/s
counts the direct convolution's multiply-adds, so the forms compare on one scale. Figures:
docs/schedules.md ("Winograd's form").
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from unittest import mock

import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R

import kernel_rounds  # sibling script
from tfcheck.compiler.schedules import apply_default_schedules
from tfcheck.compiler.schedules.apply import compile_cpu
from tfcheck.compiler.schedules.rewrites import winograd

# InceptionV3's stride-1 layers at 299x299 but its 1x1 ones, then ResNet50's 3x3 ones at 224x224.
SHAPES = ("149x149x32x32:3x3v", "147x147x32x64:3x3s", "73x73x80x192:3x3v", "35x35x48x64:5x5s", "35x35x64x96:3x3s",
          "35x35x96x96:3x3s", "17x17x128x128:1x7s", "17x17x128x192:7x1s", "17x17x192x192:1x7s",
          "17x17x192x192:7x1s", "8x8x448x384:3x3s", "8x8x384x384:1x3s", "8x8x384x384:3x1s",
          "56x56x64x64:3x3s", "28x28x128x128:3x3s", "14x14x256x256:3x3s", "7x7x512x512:3x3s")
CALLS = 5


def _form(pick: int) -> Callable[..., winograd.Plan | None]:
    """The plan that takes, along each axis, the transform at ``pick`` among the window's choices
    (0: the fewest multiplies; -1: the smallest tile), whatever the tiles."""
    def plan(_batch: int, _height: int, _width: int, window: tuple[int, int]) -> winograd.Plan | None:
        down, across = (winograd.CHOICES.get(extent) for extent in window)
        return None if down is None or across is None else winograd.Plan(down[pick], across[pick])
    return plan


# Each form: the plan `winograd_convolutions` is made to choose (None: the direct convolution).
FORMS: dict[str, Callable[..., winograd.Plan | None]] = {"direct": lambda *_: None, "F(2)": _form(-1), "F(4)": _form(0)}


def conv_relu(shape: str, rng: np.random.Generator) -> tuple[tvm.IRModule, tuple[int, ...], int]:
    """`relu(conv2d(x, W) + b)` (NHWC, HWIO, constant W and b), its input shape and its multiply-adds."""
    sizes, window = shape[:-1].split(":")
    height, width, channels, outputs = (int(n) for n in sizes.split("x"))
    kh, kw = (int(n) for n in window.split("x"))
    pads = [kh // 2, kw // 2, kh // 2, kw // 2] if shape.endswith("s") else [0] * 4
    weights = relax.const(rng.standard_normal((kh, kw, channels, outputs), dtype=np.float32) * 0.05)
    bias = relax.const(rng.standard_normal((outputs,), dtype=np.float32))
    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((1, height, width, channels), "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            conv = builder.emit(relax.op.nn.conv2d(x, weights, padding=pads, data_layout="NHWC",
                                                   kernel_layout="HWIO"))
            out = builder.emit_output(relax.op.nn.relu(relax.op.add(conv, bias)))
        builder.emit_func_output(out)
    out_h, out_w = height + pads[0] + pads[2] - kh + 1, width + pads[1] + pads[3] - kw + 1
    return builder.get(), (1, height, width, channels), out_h * out_w * kh * kw * channels * outputs


def main() -> None:
    args, target = kernel_rounds.arguments(__doc__, "HxWxCxK:KHxKW then s or v", 10)
    rng = np.random.default_rng(0)
    runs = {}
    for shape in args.shape or SHAPES:
        mod, input_shape, multiply_adds = conv_relu(shape, rng)
        x = tvm.runtime.tensor(rng.standard_normal(input_shape, dtype=np.float32))
        outputs = {}
        for form, choose in FORMS.items():
            with mock.patch.object(winograd, "choose_transform", choose):
                library = compile_cpu(apply_default_schedules(mod, target), target)
            run = relax.VirtualMachine(library, tvm.cpu())["main"]
            outputs[form] = run(x).numpy()
            runs[shape, form] = (functools.partial(run, x), multiply_adds)
        scale = float(np.abs(outputs["direct"]).max())
        errors = {form: float(np.abs(out - outputs["direct"]).max()) / scale for form, out in outputs.items()}
        print(f"{shape}: largest difference from the direct form, relative to its largest output: {errors}")
    best = kernel_rounds.best_thread_times({key: call for key, (call, _adds) in runs.items()}, args.rounds, CALLS)
    print(f"target {target}; best of {args.rounds} rounds of {CALLS} calls, thread CPU time, ms (GFLOP/s)")
    print("| shape | " + " | ".join(FORMS) + " |\n|---|" + "---:|" * len(FORMS))
    for shape in args.shape or SHAPES:
        cells = [f"{best[shape, form] * 1e3:.3f} ({2 * runs[shape, form][1] / best[shape, form] / 1e9:.0f})"
                 for form in FORMS]
        print(f"| {shape} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
