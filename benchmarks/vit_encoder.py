"""A ViT-B/16 encoder block (197 tokens of 768, 12 heads, an MLP of 3072) as Keras builds it: the
default build with and without its dense layers' rows padded (`tiling.padded_matmul_rows`), against
TFLite+XNNPACK and tf.function, interleaved in one process (`depthwise_kernels.bench_function`):

    TVM_NUM_THREADS=1 .venv/bin/python benchmarks/vit_encoder.py [--tokens 197] [--rounds 10]
        [--calls 10] [--targets avx2] [--thread-cpu]

197 tokens (196 patches and the class token) is prime, so without the padding every dense layer's
register tile is one row tall. ``--thread-cpu`` (with TVM_NUM_THREADS=1) times the calling
thread's CPU time: TVM and TFLite on one thread, no tf.function. Figures: docs/journal/schedules.md.
"""

from __future__ import annotations

import argparse

import depthwise_kernels as bench  # noqa: E402  (sibling script; sets the thread count before TVM starts)

import tvm  # noqa: E402

from tfcheck.compiler.schedules import apply as schedules  # noqa: E402
from tfcheck.compiler.schedules.rewrites import channel_padding  # noqa: E402
from tfcheck.compiler.trace.bridge import import_tensorflow  # noqa: E402


def without_row_padding(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """The default build with every dense layer over its own rows, as before the row padding."""
    saved = channel_padding.padded_matmul_rows
    channel_padding.padded_matmul_rows = lambda extent, *_: extent
    try:
        return schedules.apply_default_schedules(mod, target)
    finally:
        channel_padding.padded_matmul_rows = saved


def encoder_block(tf, keras, tokens: int, width: int = 768, heads: int = 12, mlp: int = 3072):
    """The pre-norm block of ViT-B/16 over one image's tokens, traced (random weights)."""
    x = keras.Input((tokens, width), batch_size=1)
    normed = keras.layers.LayerNormalization(epsilon=1e-6)(x)
    attended = keras.layers.MultiHeadAttention(heads, width // heads)(normed, normed)
    y = keras.layers.Add()([x, attended])
    hidden = keras.layers.Dense(mlp, activation="gelu")(keras.layers.LayerNormalization(epsilon=1e-6)(y))
    out = keras.layers.Add()([y, keras.layers.Dense(width)(hidden)])
    model = keras.Model(x, out)
    return tf.function(model).get_concrete_function(tf.TensorSpec([1, tokens, width], tf.float32))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=197)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--targets", default="avx2", help="of depthwise_kernels.TARGETS, comma-separated")
    parser.add_argument("--thread-cpu", action="store_true")
    args = parser.parse_args()
    clock = bench.thread_cpu_clock(parser, args.thread_cpu)
    tf = import_tensorflow()
    import keras

    concrete = encoder_block(tf, keras, args.tokens)
    variants = {"default": schedules.apply_default_schedules, "rows unpadded": without_row_padding}
    times, error = bench.bench_function(tf, concrete, variants, args.targets.split(","), args.rounds, args.calls,
                                        clock=clock, time_tf_function=not args.thread_cpu)
    print(f"{args.tokens} tokens, TVM threads {bench.THREADS}, max |TVM - TensorFlow| {error:.1e}")
    print("| backend | ms |\n|---|---:|")
    for name, microseconds in times.items():
        print(f"| {name} | {microseconds / 1e3:.3f} |")


if __name__ == "__main__":
    main()
