"""Keras RNN layers: the TVM build with its `WHILE` loop as imported, against the loop unrolled
(`compiler/frontend/loop_unroll.py`), against TFLite+XNNPACK, interleaved in one process on the same input.

    .venv/bin/python benchmarks/recurrent_loops.py [--only lstm_small,gru_small] [--rounds 7]

For each case: the compile time of each TVM build (schedules, weight packing, `tvm.compile`), its
largest difference from the Keras model's output, and the median over `--rounds` rounds of each
backend's mean time per call (each round calls each backend for at least 200 ms, one after the
other, so a change in the machine's load hits all alike). The workloads are the benchmark LSTM of
`benchmarks/compiled/small_models.py` (and a GRU of the same size), the coverage sweep's LSTM and
GRU (`benchmarks/coverage_sweep.py`), an LSTM with `return_sequences` and a 256-step LSTM.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import numpy as np

from tfcheck.runtime.threads import use_all_cores

# name: (layer, units, [batch, steps, features], return_sequences)
CASES = {
    "lstm_small": ("LSTM", 128, [8, 50, 32], False),
    "gru_small": ("GRU", 128, [8, 50, 32], False),
    "lstm_coverage": ("LSTM", 32, [1, 20, 8], False),
    "gru_coverage": ("GRU", 32, [1, 20, 8], False),
    "lstm_sequences_100": ("LSTM", 64, [4, 100, 16], True),
    "lstm_256": ("LSTM", 128, [8, 256, 32], False),
}


def keras_case(layer: str, units: int, shape: list[int], sequences: bool) -> tuple[bytes, np.ndarray, np.ndarray]:
    """(TFLite flatbuffer, input, Keras output) of `layer(units)` followed by a dense layer."""
    import keras
    import tensorflow as tf

    from tfcheck.compiler.trace.bridge import freeze, to_tflite

    keras.utils.set_random_seed(0)
    rnn = getattr(keras.layers, layer)(units, return_sequences=sequences)
    model = keras.Sequential([keras.Input(tuple(shape[1:])), rnn, keras.layers.Dense(10)])
    function = tf.function(lambda x: model(x, training=False), input_signature=[tf.TensorSpec(shape, tf.float32)])
    flatbuffer = to_tflite(freeze(function.get_concrete_function()))
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    return flatbuffer, x, model(x, training=False).numpy()


def tvm_timer(flatbuffer: bytes, x: np.ndarray, expected: np.ndarray, unrolled: bool) -> tuple[Callable[[], float], str]:
    """A call timing one TVM build (ms per call) and what to print about the build."""
    import tempfile
    from pathlib import Path

    import tvm
    from tvm import relax

    from tfcheck.compiler.frontend.importer import import_tflite
    from tfcheck.compiler.frontend.loop_unroll import unroll_constant_loops
    from tfcheck.compiler.build.compile import compile_module
    from tfcheck.compiler.build.targets import host_cpu_target

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.tflite"
        path.write_bytes(flatbuffer)
        mod = import_tflite(path)
    started = time.perf_counter()
    mod = unroll_constant_loops(mod) if unrolled else mod
    executable = compile_module(mod, tvm.target.Target(host_cpu_target()), "cpu", None).executable
    seconds = time.perf_counter() - started
    vm = relax.VirtualMachine(executable, tvm.cpu())
    argument = tvm.runtime.tensor(x)
    error = float(np.abs(vm["main"](argument).numpy() - expected).max())
    evaluator = vm.time_evaluator("main", tvm.cpu(), number=1, repeat=1, min_repeat_ms=200)
    return (lambda: evaluator(argument).mean * 1e3), f"compile {seconds:.2f} s, max abs error {error:.1e}"


def tflite_timer(flatbuffer: bytes, x: np.ndarray) -> Callable[[], float]:
    """A call timing TFLite's interpreter (XNNPACK, as `tfcheck bench` runs it) for 200 ms, ms per call."""
    from tfcheck.compiler.trace.bridge import tflite_runner

    run = tflite_runner(flatbuffer, [x])
    run()

    def timed() -> float:
        calls, started = 0, time.perf_counter()
        while time.perf_counter() - started < 0.2:
            run()
            calls += 1
        return (time.perf_counter() - started) * 1e3 / calls

    return timed


def race(timers: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            samples[name].append(timer())
    return {name: statistics.median(times) for name, times in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    use_all_cores()  # as many TVM threads as a loaded artifact gets (before TVM's pool starts)
    names = args.only.split(",") if args.only else list(CASES)
    print("| case | loop (as imported) | unrolled | TFLite+XNNPACK | compile: loop / unrolled |")
    print("|---|---:|---:|---:|---|")
    for name in names:
        flatbuffer, x, expected = keras_case(*CASES[name])
        (loop, loop_note), (unrolled, unrolled_note) = (tvm_timer(flatbuffer, x, expected, flag) for flag in (False, True))
        medians: dict[str, Any] = race({"loop": loop, "unrolled": unrolled, "tflite": tflite_timer(flatbuffer, x)},
                                       args.rounds)
        print(f"| {name} | {medians['loop']:.3f} ms | {medians['unrolled']:.3f} ms | {medians['tflite']:.3f} ms "
              f"| {loop_note}; {unrolled_note} |", flush=True)


if __name__ == "__main__":
    main()
