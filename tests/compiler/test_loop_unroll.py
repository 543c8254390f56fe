"""`compiler/frontend/loop_unroll.py`: loops with a build-time trip count become straight-line dataflow.

The module below has the form TVM's TFLite importer gives a `WHILE` (a recursive function over
the loop state, with its condition and body as private functions); `main` starts it either with
a constant limit (unrolled) or with one read from an input (left alone). Both builds are run and
compared, so a wrong unrolling (one step too many or too few) fails here. The slow test builds
Keras LSTM and GRU layers with `tfcheck build`, which verifies them against TensorFlow.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tvm
from click.testing import Result
from tvm import relax
from tvm.script import from_source

from tfcheck.compiler.frontend import loop_unroll
from tfcheck.compiler.frontend.loop_unroll import unroll_constant_loops, while_loop

STEPS = 5

LOOP = """
@I.ir_module
class Module:
    @R.function(private=True)
    def cond(i: R.Tensor((), "int32"), n: R.Tensor((), "int32"), h: R.Tensor((2, 4), "float32"),
             x: R.Tensor((5, 2, 4), "float32")) -> R.Tensor((), "bool"):
        with R.dataflow():
            gv: R.Tensor((), "bool") = R.logical_and(R.less(i, n), R.less(i, R.const(5, "int32")))
            R.output(gv)
        return gv

    @R.function(private=True)
    def body(i: R.Tensor((), "int32"), n: R.Tensor((), "int32"), h: R.Tensor((2, 4), "float32"),
             x: R.Tensor((5, 2, 4), "float32")):
        with R.dataflow():
            step = R.take(x, R.astype(i, "int64"), axis=0)
            gv = (R.add(i, R.const(1, "int32")), n, R.tanh(R.add(R.multiply(h, R.const(0.5, "float32")), step)), x)
            R.output(gv)
        return gv

    @R.function(private=True)
    def loop(i: R.Tensor((), "int32"), n: R.Tensor((), "int32"), h: R.Tensor((2, 4), "float32"),
             x: R.Tensor((5, 2, 4), "float32")) -> R.Tuple(R.Tensor((), "int32"), R.Tensor((), "int32"),
                                                          R.Tensor((2, 4), "float32"), R.Tensor((5, 2, 4), "float32")):
        cls = Module
        c: R.Tensor((), "bool") = cls.cond(i, n, h, x)
        if c:
            r = cls.body(i, n, h, x)
            r0 = r[0]
            r1 = r[1]
            r2 = r[2]
            r3 = r[3]
            out = cls.loop(r0, r1, r2, r3)
        else:
            out = (i, n, h, x)
        return out

    @R.function
    def main(x: R.Tensor((5, 2, 4), "float32"), limit: R.Tensor((), "int32")) -> R.Tensor((2, 4), "float32"):
        cls = Module
        with R.dataflow():
            s = cls.loop(R.const(0, "int32"), LIMIT, R.ones((2, 4), "float32"), x)
            gv = s[2]
            R.output(gv)
        return gv
"""


def _module(limit: str) -> tvm.IRModule:
    """The loop started with `limit`: a constant (`R.const(3, "int32")`) or main's input `limit`."""
    return from_source(LOOP.replace("LIMIT", limit))


def _run(mod: tvm.IRModule, x: np.ndarray, limit: int) -> np.ndarray:
    executable = tvm.compile(mod, target=tvm.target.Target({"kind": "llvm"}))
    vm = relax.VirtualMachine(executable, tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(np.array(limit, "int32"))).numpy()


def _reference(x: np.ndarray, steps: int) -> np.ndarray:
    h = np.ones((2, 4), "float32")
    for t in range(steps):
        h = np.tanh(h * 0.5 + x[t])
    return h


def _calls_global(func: relax.Function) -> bool:
    found = []
    relax.analysis.post_order_visit(func.body, lambda e: found.append(isinstance(e, relax.Call)
                                                                      and isinstance(e.op, relax.GlobalVar)))
    return any(found)


def test_the_importers_while_form_is_recognised() -> None:
    mod = _module("limit")
    loop = while_loop(mod.get_global_var("loop"), mod["loop"])
    assert loop is not None and loop.cond.name_hint == "cond" and loop.body.name_hint == "body"
    assert while_loop(mod.get_global_var("body"), mod["body"]) is None


@pytest.mark.parametrize("limit", [3, 7])  # 7: the condition's second bound (5) ends the loop
def test_a_constant_trip_count_is_unrolled_into_main(limit: int) -> None:
    mod = _module(f'R.const({limit}, "int32")')
    unrolled = unroll_constant_loops(mod)
    assert [gvar.name_hint for gvar in unrolled.get_global_vars()] == ["main"]
    assert not _calls_global(unrolled["main"])
    x = np.random.default_rng(0).standard_normal((5, 2, 4)).astype("float32")
    expected = _reference(x, min(limit, STEPS))
    np.testing.assert_allclose(_run(unrolled, x, limit), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_run(mod, x, limit), expected, rtol=1e-5, atol=1e-6)


def test_a_trip_count_read_from_an_input_is_left_as_a_loop() -> None:
    mod = _module("limit")
    assert unroll_constant_loops(mod) is mod
    x = np.random.default_rng(1).standard_normal((5, 2, 4)).astype("float32")
    np.testing.assert_allclose(_run(mod, x, 4), _reference(x, 4), rtol=1e-5, atol=1e-6)


def test_a_body_with_control_flow_is_left_as_a_loop() -> None:
    """A body that is not one dataflow block (here: plain bindings, as a body holding an `IF`
    would be) cannot be inlined into the caller's dataflow block."""
    lines = LOOP.splitlines()
    start = lines.index("    def body(i: R.Tensor((), \"int32\"), n: R.Tensor((), \"int32\"), h: R.Tensor((2, 4), \"float32\"),")
    end = lines.index("        return gv", start)
    body = [line[4:] if line.startswith(" " * 12) else line for line in lines[start:end]
            if line.strip() not in ("with R.dataflow():", "R.output(gv)")]
    mod = from_source("\n".join(lines[:start] + body + lines[end:]).replace("LIMIT", 'R.const(3, "int32")'))
    assert not isinstance(mod["body"].body.blocks[0], relax.DataflowBlock)
    assert unroll_constant_loops(mod) is mod


def test_a_loop_longer_than_the_bound_is_left_as_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_unroll, "MAX_STEPS", 3)
    mod = _module('R.const(4, "int32")')
    assert unroll_constant_loops(mod) is mod
    assert loop_unroll.trip_count(mod, while_loop(mod.get_global_var("loop"), mod["loop"]),
                                  [np.array(0, "int32"), np.array(3, "int32"), None, None]) == 3


RNNS = '''
import keras
import tensorflow as tf
import tfcheck

keras.utils.set_random_seed(0)
LSTM = keras.Sequential([keras.Input((4, 3)), keras.layers.LSTM(8), keras.layers.Dense(2)])
GRU = keras.layers.GRU(8, return_sequences=True)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 4, 3], tf.float32)])
def lstm(x):
    return LSTM(x, training=False)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 4, 3], tf.float32)])
def gru_sequences(x):
    return GRU(x)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32), tf.TensorSpec([], tf.int32)])
def steps_at_run_time(x, steps):
    for _ in tf.range(steps):
        x = tf.tanh(x) * 1.5
    return x
'''


def _vm_functions(library: Path) -> list[str]:
    """The names of the functions in an exported artifact's VM executable (kernels included)."""
    stats = relax.VMExecutable(tvm.runtime.load_module(str(library))).stats()
    [line] = [line for line in stats.splitlines() if line.strip().startswith("Globals")]
    return [name.strip() for name in line.split("[", 1)[1].rstrip("]").split(",")]


@pytest.mark.slow
def test_rnn_layers_build_unrolled_and_match_tensorflow(project: Callable[..., Path],
                                                       run_cli: Callable[..., Result]) -> None:
    folder = project({"rnns.py": RNNS})
    result = run_cli(folder, "build", "--cache-dir", str(folder / "cache"), "--out", str(folder / "out"),
                     "--format", "json")
    records = {r["function"].rsplit(".", 1)[-1]: r for r in json.loads(result.stdout)["functions"]}
    assert result.exit_code == 0, result.stdout
    for name, record in records.items():
        assert record["status"] == "built" and record["verified"] is True, (name, record)
    loops = {name: [f for f in _vm_functions(folder / "out" / name / "lib.so") if f.startswith("tflite_while")]
             for name in records}
    # The Keras layers' WHILE loops are gone; the loop whose trip count is an input stays one.
    assert loops["lstm"] == loops["gru_sequences"] == []
    assert loops["steps_at_run_time"], loops
