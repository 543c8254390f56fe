"""The operator coverage report reads the installed TVM frontend's own converter table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tfcheck.compiler.frontend.importer import ImporterError, import_tflite, supported_tflite_ops, unimportable
from tfcheck.compiler.process.messages import OperatorCount


def test_common_builtins_are_importable_and_custom_ops_are_not() -> None:
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "WHILE", "SOFTMAX"} <= supported_tflite_ops()
    operators = [OperatorCount("ADD", 2, "add"), OperatorCount("CUSTOM:MyOp", 1, "model/my_op"),
                 OperatorCount("SKIP_GRAM", 1, "skip")]
    assert [entry.op for entry in unimportable(operators)] == ["CUSTOM:MyOp", "SKIP_GRAM"]


def test_an_importer_failure_outside_any_operator_is_reported_as_such(tmp_path: Path) -> None:
    """Failures while converting an operator name it (tests/compiler/test_importer_fixes.py); any
    other failure of the importer is still an `ImporterError` that says what to do."""
    path = tmp_path / "model.tflite"
    path.write_bytes(b"not a flatbuffer, only some text")
    with pytest.raises(ImporterError, match="importer failed outside any operator: .*remove @tfcheck.aot"):
        import_tflite(path)


class _Tensor:
    def __init__(self, name: str) -> None:
        self.tensor = self
        self.name = name

    def Name(self) -> bytes:  # noqa: N802 - the flatbuffer's accessor
        return self.name.encode()


class _Converter:
    """What `_named_error` reads of TVM's converter: the operator's code and output tensors."""

    def __init__(self, code: str, node: str) -> None:
        self.code, self.node = code, node

    def get_op_code_str(self, op: object) -> str:
        return self.code

    def get_output_tensors(self, op: object) -> list[_Tensor]:
        return [_Tensor(self.node)]

    def get_input_tensors(self, op: object) -> list[_Tensor]:
        return []


def test_a_converter_crash_on_correct_code_is_reported_as_the_importers_gap() -> None:
    """GPT-2's causal mask over any length (akanyaani/gpt-2-tensorflow2.0, issue 42's sweep) crashed
    TVM's NEG converter with a KeyError, and the message told the user to rewrite the computation:
    a crash is the importer's gap, and says so; a refusal (NotImplementedError, which says what form
    it does not take) still points at the computation."""
    from tfcheck.compiler.frontend.importer import _named_error

    node = "gpt2/att_masking/attention_mask/MatrixBandPart9"
    crash = str(_named_error(_Converter("NEG", node), object(), KeyError("arith.constant20")))
    assert f"TVM cannot import TFLite operator NEG from TensorFlow node '{node}': KeyError: 'arith.constant20'" in crash
    assert "Rewrite" not in crash and "not a fault in the function" in crash
    assert "Please report it" in crash and "remove @tfcheck.aot" in crash
    refused = str(_named_error(_Converter("STRIDED_SLICE", "crop"), object(), NotImplementedError("a slice ...")))
    assert "Rewrite that computation" in refused and "not a fault" not in refused


def _tensorflow_gather(data: np.ndarray, indices: np.ndarray, axis: int, batch_dims: int) -> np.ndarray:
    """``tf.gather(data, indices, axis, batch_dims)`` in NumPy, batch by batch."""
    batch = data.shape[:batch_dims]
    flat_data = data.reshape(-1, *data.shape[batch_dims:])
    flat_indices = indices.reshape(-1, *indices.shape[batch_dims:])
    taken = [np.take(d, i, axis=axis - batch_dims) for d, i in zip(flat_data, flat_indices)]
    return np.stack(taken).reshape(*batch, *taken[0].shape)


@pytest.mark.parametrize(("data_shape", "indices_shape", "axis", "batch_dims"), [
    ((8, 10), (8,), 1, 1),  # one element per row (the shape TVM got wrong: [8, 8])
    ((4, 3, 10, 5), (4, 6, 2), 2, 1),  # an axis between batch and gathered axis, 2-D indices, trailing axis
    ((2, 3, 7, 5), (2, 3, 4), 2, 2),  # two batch axes
])
def test_gather_with_batch_dims_matches_tensorflow_semantics(data_shape, indices_shape, axis, batch_dims) -> None:
    import tvm
    from tvm import relax

    from tfcheck.compiler.frontend.importer import _batched_take

    from ..isa import host_target

    rng = np.random.default_rng(0)
    data = rng.standard_normal(data_shape).astype("float32")
    indices = rng.integers(0, data_shape[axis], indices_shape).astype("int32")
    bb = relax.BlockBuilder()
    params = [relax.Var("data", relax.TensorType(data_shape, "float32")),
              relax.Var("indices", relax.TensorType(indices_shape, "int32"))]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(_batched_take(*params, list(data_shape), list(indices_shape), axis, batch_dims))
        bb.emit_func_output(out)
    vm = relax.VirtualMachine(tvm.compile(bb.get(), target=host_target()), tvm.cpu())
    actual = vm["main"](tvm.runtime.tensor(data), tvm.runtime.tensor(indices)).numpy()
    np.testing.assert_array_equal(actual, _tensorflow_gather(data, indices, axis, batch_dims))
