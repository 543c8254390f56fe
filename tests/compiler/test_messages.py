"""The messages between the build's processes: JSON both ways, with a contract version."""

from __future__ import annotations

import json

import pytest

from tfcheck.compiler.process.messages import (CONTRACT_VERSION, Budget, BenchRequest, ContractError, KeyParts,
                                       TracedVariant, TraceRequest, TraceResult, from_message, to_message)
from tfcheck.compiler.process.target import BuildTarget

LLVM = BuildTarget.of({"kind": "llvm"})


def test_nested_messages_survive_json() -> None:
    variant = TracedVariant("/w/variant-0", [{"name": "x", "shape": [1, 4], "dtype": "float32"}],
                            "ab" * 32, "cd" * 32, "ef" * 32, operators=[{"op": "ADD", "count": 1, "example": "a"}])
    result = TraceResult("f", "m.f", {"tensorflow": "2.21.0"}, "00" * 32, [variant, variant])
    request = TraceRequest("/root", "m", "f", "m.py", "/w", KeyParts(LLVM, {}, {"tvm": "0.27"}))
    bench = BenchRequest("tvm", "m", "f", "/root", [], Budget(min_runs=3), "/w/out.npz", [5, 6], artifact="/a")
    for message in (result, request, bench):
        assert from_message(type(message), json.loads(json.dumps(to_message(message)))) == message


def test_another_contract_version_is_refused() -> None:
    data = {**to_message(KeyParts(LLVM, {}, {})), "contract_version": CONTRACT_VERSION + 1}
    with pytest.raises(ContractError, match="KeyParts: contract version 2, this tfcheck speaks 1"):
        from_message(KeyParts, data)


@pytest.mark.parametrize(("change", "message"), [
    ({"surprise": 1}, "unknown fields surprise"),
    ({"versions": None, "target": None, "compile_options": None}, None),
])
def test_fields_must_be_the_dataclass_fields(change: dict[str, object], message: str | None) -> None:
    data = {**to_message(KeyParts(LLVM, {}, {})), **change}
    if message is None:
        assert from_message(KeyParts, data) == KeyParts(None, None, None)  # type: ignore[arg-type]
        del data["target"]
        message = "missing 1 required positional argument: 'target'"
    with pytest.raises(ContractError, match=message):
        from_message(KeyParts, data)


def test_key_parts_add_the_tensorflow_version() -> None:
    assert KeyParts(LLVM, {}, {"tvm": "0.27"}).versions_with("2.21.0") == {"tvm": "0.27", "tensorflow": "2.21.0"}
