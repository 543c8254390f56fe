"""The operator coverage report reads the installed TVM frontend's own converter table."""

from __future__ import annotations

from tfcheck.compiler.importer import supported_tflite_ops, unimportable


def test_common_builtins_are_importable_and_custom_ops_are_not() -> None:
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "WHILE", "SOFTMAX"} <= supported_tflite_ops()
    operators = [{"op": "ADD", "count": 2, "example": "add"},
                 {"op": "CUSTOM:MyOp", "count": 1, "example": "model/my_op"},
                 {"op": "SKIP_GRAM", "count": 1, "example": "skip"}]
    assert [entry["op"] for entry in unimportable(operators)] == ["CUSTOM:MyOp", "SKIP_GRAM"]
