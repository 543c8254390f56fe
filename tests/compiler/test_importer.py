"""The operator coverage report reads the installed TVM frontend's own converter table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfcheck.compiler.importer import ImporterError, import_tflite, supported_tflite_ops, unimportable


def test_common_builtins_are_importable_and_custom_ops_are_not() -> None:
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "WHILE", "SOFTMAX"} <= supported_tflite_ops()
    operators = [{"op": "ADD", "count": 2, "example": "add"},
                 {"op": "CUSTOM:MyOp", "count": 1, "example": "model/my_op"},
                 {"op": "SKIP_GRAM", "count": 1, "example": "skip"}]
    assert [entry["op"] for entry in unimportable(operators)] == ["CUSTOM:MyOp", "SKIP_GRAM"]


def test_an_importer_failure_outside_any_operator_is_reported_as_such(tmp_path: Path) -> None:
    """Failures while converting an operator name it (tests/compiler/test_importer_fixes.py); any
    other failure of the importer is still an `ImporterError` that says what to do."""
    path = tmp_path / "model.tflite"
    path.write_bytes(b"not a flatbuffer, only some text")
    with pytest.raises(ImporterError, match="importer failed outside any operator: .*remove @tfcheck.aot"):
        import_tflite(path)
