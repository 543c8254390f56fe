"""Build the workloads of the schedule benchmarks as TFLite flatbuffers and time tf.function on them.

Run on its own (it imports TensorFlow, which the compiler must never do in-process):

    .venv/bin/python benchmarks/schedules_models.py --out /tmp/tfcheck_schedules [--only mlp,cnn]

For each workload it writes ``NAME.tflite``, ``NAME.inputs.npz`` (a fixed random input),
``NAME.expected.npz`` (tf.function's output on it) and ``tf_times.json`` (median tf.function wall
time and process CPU time per call, in milliseconds). ``benchmarks/schedules_workloads.py`` then compiles the flatbuffers with TVM.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Callable

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
import keras  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)


def mlp() -> tuple[keras.Model, tuple[int, ...]]:
    """Two hidden layers, batch 32: the dense/matmul path."""
    inputs = keras.Input((256,), batch_size=32)
    x = keras.layers.Dense(512, activation="relu")(inputs)
    x = keras.layers.Dense(512, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(10)(x)), (32, 256)


def cnn() -> tuple[keras.Model, tuple[int, ...]]:
    """A small CNN with batch norm, batch 8: conv2d, pooling and folded batch norm."""
    inputs = keras.Input((32, 32, 3), batch_size=8)
    x = inputs
    for filters in (32, 64):
        x = keras.layers.Conv2D(filters, 3, padding="same")(x)
        x = keras.layers.BatchNormalization()(x)
        x = keras.layers.ReLU()(x)
        x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(128, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(x)), (8, 32, 32, 3)


def mobilenet_v2() -> tuple[keras.Model, tuple[int, ...]]:
    """MobileNetV2, batch 1: depthwise convolutions and 1x1 convolutions.

    Logits, not softmax: with random weights the softmax is 0.001 everywhere and would hide errors.
    """
    return keras.applications.MobileNetV2(weights=None, classifier_activation=None), (1, 224, 224, 3)


def resnet50() -> tuple[keras.Model, tuple[int, ...]]:
    """ResNet50, batch 1: large 3x3 and 1x1 convolutions (logits, as for MobileNetV2)."""
    return keras.applications.ResNet50(weights=None, classifier_activation=None), (1, 224, 224, 3)


def mha() -> tuple[keras.Model, tuple[int, ...]]:
    """A transformer encoder block (4 heads, width 256, sequence 128): batch matmul, softmax, layernorm."""
    inputs = keras.Input((128, 256), batch_size=1)
    attn = keras.layers.MultiHeadAttention(num_heads=4, key_dim=64)(inputs, inputs)
    x = keras.layers.LayerNormalization()(inputs + attn)
    ffn = keras.layers.Dense(1024, activation="relu")(x)
    ffn = keras.layers.Dense(256)(ffn)
    return keras.Model(inputs, keras.layers.LayerNormalization()(x + ffn)), (1, 128, 256)


def lstm() -> tuple[keras.Model, tuple[int, ...]]:
    """One LSTM layer (batch 8, 32 steps, 64 features, 128 units) and a dense head."""
    inputs = keras.Input((32, 64), batch_size=8)
    x = keras.layers.LSTM(128)(inputs)
    return keras.Model(inputs, keras.layers.Dense(10)(x)), (8, 32, 64)


WORKLOADS: dict[str, Callable[[], tuple[keras.Model, tuple[int, ...]]]] = {
    "mlp": mlp,
    "cnn": cnn,
    "mobilenet_v2": mobilenet_v2,
    "resnet50": resnet50,
    "mha": mha,
    "lstm": lstm,
}


def median_ms(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    """Median wall time and median process CPU time of ``fn`` in milliseconds, after a warm-up call.

    CPU time (all threads) stays meaningful on a machine shared with other jobs, where wall time
    mostly measures the wait for a core.
    """
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - start) * 1000.0)
        cpu.append((time.process_time() - start_cpu) * 1000.0)
    return {"wall": statistics.median(wall), "cpu": statistics.median(cpu)}


def export(name: str, out: Path, repeat: int) -> dict[str, float]:
    """Write the flatbuffer, input and expected output of one workload; return tf.function's median."""
    keras.utils.set_random_seed(0)
    model, shape = WORKLOADS[name]()
    fn = tf.function(lambda x: model(x, training=False), input_signature=[tf.TensorSpec(shape, tf.float32)])
    concrete = fn.get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete)
    (out / f"{name}.tflite").write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([frozen]).convert())
    data = np.random.default_rng(0).standard_normal(shape).astype("float32")
    np.savez(out / f"{name}.inputs.npz", x=data)
    tensor = tf.constant(data)
    np.savez(out / f"{name}.expected.npz", y=fn(tensor).numpy())
    return median_ms(lambda: fn(tensor).numpy(), repeat)


def main() -> None:
    """Export the chosen workloads and merge their tf.function times into ``tf_times.json``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/tfcheck_schedules"))
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workload names")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    times_path = args.out / "tf_times.json"
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    for name in args.only.split(","):
        times[name] = export(name, args.out, args.repeat)
        print(f"{name}: tf.function {times[name]['wall']:.3f} ms (CPU {times[name]['cpu']:.3f} ms)", flush=True)
        times_path.write_text(json.dumps(times, indent=2))


if __name__ == "__main__":
    main()
