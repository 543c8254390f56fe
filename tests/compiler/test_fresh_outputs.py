"""No output of a compiled function is a constant's or a weight's memory (`compiler/schedules/lowering/fresh_outputs.py`).

A Relax VM returns a constant (or a weight it was passed) that `main` returns as that very tensor:
a caller writing into its result would change what every later call returns (SSD-style detectors
return their anchor boxes). The CPU compile pipeline copies just those outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402

from tfcheck.compiler.schedules.lowering.fresh_outputs import copy_shared_outputs  # noqa: E402
from tfcheck.compiler.schedules import compile_cpu  # noqa: E402

TARGET = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "x86-64", "num-cores": 2}
SHAPE = (64, 64)
CONSTANT = np.arange(4096, dtype=np.float32).reshape(SHAPE)
WEIGHT = np.full(SHAPE, 3.0, np.float32)
COPY = "vm.builtin.to_device"


def _module() -> tvm.IRModule:
    """main(x; weight) -> (x * 2, CONSTANT, (weight, reshape(weight) to a vector), x): the
    constant pool, a weight passed after `num_input`, a view of one, in a nested tuple."""
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(SHAPE, "float32"))
    weight = relax.Var("weight", relax.TensorType(SHAPE, "float32"))
    with builder.function("main", [x, weight]):
        with builder.dataflow():
            doubled = builder.emit(relax.op.multiply(x, relax.const(2.0, "float32")))
            flat = builder.emit(relax.op.reshape(weight, (4096,)))
            pair = builder.emit(relax.Tuple([weight, flat]))
            out = builder.emit_output(relax.Tuple([doubled, relax.const(CONSTANT), pair, x]))
        builder.emit_func_output(out)
    mod = builder.get()
    mod["main"] = mod["main"].with_attr("num_input", 1)
    return mod


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`_module()` compiled as the build compiles it (`compile_cpu`) and exported."""
    path = tmp_path_factory.mktemp("fresh") / "lib.so"
    compile_cpu(_module(), tvm.target.Target(TARGET)).export_library(str(path))
    return path


def _copied_outputs(main: relax.Function) -> list[int]:
    """The flat indices of `main`'s returned tensors that are copies made by `vm.builtin.to_device`."""
    values = {binding.var: binding.value for block in main.body.blocks for binding in block.bindings}

    def leaves(expr: relax.Expr) -> list[relax.Expr]:
        if isinstance(values.get(expr), relax.Tuple):
            expr = values[expr]
        return [leaf for field in expr.fields for leaf in leaves(field)] if isinstance(expr, relax.Tuple) else [expr]

    return [index for index, leaf in enumerate(leaves(main.body.body))
            if isinstance(values.get(leaf), relax.Call) and getattr(values[leaf].op, "global_symbol", "") == COPY]


def test_constants_weights_and_their_views_are_the_outputs_copied() -> None:
    with tvm.target.Target(TARGET):
        lowered = relax.get_pipeline("default")(_module())
    assert _copied_outputs(lowered["main"]) == []
    assert _copied_outputs(copy_shared_outputs(lowered["main"])) == [1, 2, 3]  # not x * 2 (fresh), not x (the runtime's)


def test_the_compiled_main_copies_exactly_the_shared_outputs() -> None:
    text = compile_cpu(_module(), tvm.target.Target(TARGET)).as_text()
    copies = [line for line in text.splitlines() if line.split()[:2] == ["call", COPY]]
    assert len(copies) == 3, text  # ordinary outputs cost nothing more


def _dlpack(array: np.ndarray) -> Any:
    """A DLPack producer that is not an ndarray: the runtime's route for TensorFlow tensors."""

    class Producer:
        def __dlpack__(self, **kwargs: Any) -> Any:
            return array.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> tuple[int, int]:
            return array.__dlpack_device__()

    return Producer()


@pytest.mark.parametrize("wrap", [np.asarray, _dlpack], ids=["numpy", "dlpack"])
def test_writing_into_outputs_leaves_the_next_call_unchanged(library: Path, wrap: Callable[[np.ndarray], Any]) -> None:
    from tfcheck.runtime.bundled import wheel_libraries
    from tfcheck.runtime.tvm_backend import Executable

    executable = Executable(library, "main", "cpu", wheel_libraries("cpu"), weights=[WEIGHT])
    x = np.ones(SHAPE, np.float32)
    for output in executable.run([wrap(x)]):
        output[...] = -7
    doubled, constant, weight, flat, echoed = executable.run([wrap(x)])
    np.testing.assert_array_equal(doubled, 2 * x)
    np.testing.assert_array_equal(constant, CONSTANT)
    np.testing.assert_array_equal(weight, WEIGHT)
    np.testing.assert_array_equal(flat, WEIGHT.reshape(-1))
    np.testing.assert_array_equal(x, 1)  # the caller's input was copied, not written
    np.testing.assert_array_equal(echoed, x)


# A weight read as it is (the weights file's route) and a constant (the library's constant pool),
# returned in a dict and a tuple beside an ordinary output.
CONSTANTS = '''
import numpy as np
import tensorflow as tf
import tfcheck

table = tf.Variable(np.arange(4096, dtype=np.float32).reshape(64, 64))


@tfcheck.aot(weights="inputs")
@tf.function(input_signature=[tf.TensorSpec([64, 64], tf.float32)])
def with_table(x):
    return {"doubled": x * 2.0, "table": tf.identity(table) + 0.0}


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([64, 64], tf.float32)])
def with_constant(x):
    return x * 2.0, tf.constant(np.ones((64, 64), np.float32))
'''


@pytest.mark.slow
def test_built_functions_return_constants_and_weights_in_memory_of_their_own(
        project: Callable[..., Path], run_cli: Callable[..., Any]) -> None:
    tf = pytest.importorskip("tensorflow")
    import json

    import tfcheck

    folder = project({"constants.py": CONSTANTS})
    report = json.loads(run_cli(folder, "build", "--cache-dir", "cache", "--format", "json", "--no-lint").stdout)
    assert [(record["status"], record["verified"]) for record in report["functions"]] == [("built", True)] * 2
    weights = {json.loads(path.read_text())["function"]: json.loads(path.read_text()).get("weights")
               for path in (folder / "cache").glob("*/manifest.json")}
    assert weights["with_table"]["count"] >= 1 and weights["with_constant"] is None  # both routes
    library = tfcheck.load(folder / "cache")
    x = np.ones(SHAPE, np.float32)
    expected = {"with_table": {"doubled": 2 * x, "table": np.arange(4096, dtype=np.float32).reshape(SHAPE)},
                "with_constant": (2 * x, np.ones(SHAPE, np.float32))}
    for name, want in expected.items():
        for argument in (x, tf.constant(x)):  # NumPy, and TensorFlow's tensors over DLPack
            for output in tf.nest.flatten(library[name](argument)):
                output[...] = -7
            got = library[name](argument)
            tf.nest.map_structure(np.testing.assert_array_equal, got, want)
