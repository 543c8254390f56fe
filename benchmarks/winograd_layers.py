"""3x3 stride-1 convolutions direct and as Winograd's F(2x2, 3x3) and F(4x4, 3x3), one core.

`compiler/schedules/rewrites/winograd.py` rewrites a 3x3 stride-1 convolution into an input
transform, a batched matmul and an output transform when its output has enough tiles. This times
each form of InceptionV3's and ResNet50's 3x3 layers (conv + bias + ReLU, constant weights),
scheduled and compiled as `tfcheck build` compiles them, in interleaved rounds of the calling
thread's CPU time (best round):

    TVM_NUM_THREADS=1 .venv/bin/python benchmarks/winograd_layers.py [--rounds 10] [--target cpu]
        [--shape 73x73x80x192v ...]

A shape is `HxWxCxK` and `s` ('same') or `v` ('valid'). GFLOP/s counts the direct convolution's
multiply-adds, so the forms compare on one scale. Figures: docs/journal/schedules.md.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from unittest import mock

import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R

from tfcheck.compiler.build.targets import resolve_target
from tfcheck.compiler.schedules import apply_default_schedules
from tfcheck.compiler.schedules.apply import compile_cpu
from tfcheck.compiler.schedules.rewrites import winograd

# InceptionV3's 3x3 stride-1 layers at 299x299, then ResNet50's at 224x224.
SHAPES = ("149x149x32x32v", "147x147x32x64s", "73x73x80x192v", "35x35x64x96s", "35x35x96x96s", "8x8x448x384s",
          "56x56x64x64s", "28x28x128x128s", "14x14x256x256s", "7x7x512x512s")
CALLS = 5

# Each form: the transform `winograd_convolutions` is made to choose (None: the direct convolution).
FORMS: dict[str, Callable[[int, int, int], winograd.Transform | None]] = {
    "direct": lambda *_: None, "F(2x2)": lambda *_: winograd.F2, "F(4x4)": lambda *_: winograd.F4}


def conv_relu(shape: str, rng: np.random.Generator) -> tuple[tvm.IRModule, tuple[int, ...], int]:
    """`relu(conv2d(x, W) + b)` (NHWC, HWIO, constant W and b), its input shape and its multiply-adds."""
    height, width, channels, outputs = (int(n) for n in shape[:-1].split("x"))
    pad = 1 if shape.endswith("s") else 0
    weights = relax.const(rng.standard_normal((3, 3, channels, outputs), dtype=np.float32) * 0.05)
    bias = relax.const(rng.standard_normal((outputs,), dtype=np.float32))
    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((1, height, width, channels), "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            conv = builder.emit(relax.op.nn.conv2d(x, weights, padding=[pad] * 4, data_layout="NHWC",
                                                   kernel_layout="HWIO"))
            out = builder.emit_output(relax.op.nn.relu(relax.op.add(conv, bias)))
        builder.emit_func_output(out)
    out_h, out_w = height + 2 * pad - 2, width + 2 * pad - 2
    return builder.get(), (1, height, width, channels), out_h * out_w * 9 * channels * outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", help="HxWxCxK then s or v (repeatable; default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--target", default="cpu", help="as tfcheck build --target: cpu (this CPU) or a TVM target "
                        'JSON object, e.g. \'{"kind": "llvm", "mcpu": "znver3", "num-cores": 1}\'')
    args = parser.parse_args()
    target = tvm.target.Target(resolve_target(args.target, None).json)
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
            runs[shape, form] = (run, x, multiply_adds)
        scale = float(np.abs(outputs["direct"]).max())
        errors = {form: float(np.abs(out - outputs["direct"]).max()) / scale for form, out in outputs.items()}
        print(f"{shape}: largest difference from the direct form, relative to its largest output: {errors}")
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(args.rounds):
        for key, (run, x, _work) in runs.items():
            started = time.thread_time()
            for _ in range(CALLS):
                run(x)
            best[key] = min(best[key], (time.thread_time() - started) / CALLS)
    print(f"target {target}; best of {args.rounds} rounds of {CALLS} calls, thread CPU time, ms (GFLOP/s)")
    print("| shape | " + " | ".join(FORMS) + " |\n|---|" + "---:|" * len(FORMS))
    for shape in args.shape or SHAPES:
        cells = [f"{best[shape, form] * 1e3:.3f} ({2 * runs[shape, form][2] / best[shape, form] / 1e9:.0f})"
                 for form in FORMS]
        print(f"| {shape} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
