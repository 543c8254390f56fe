"""The messages between the build's processes: JSON both ways, typed to the leaves, with a contract version."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import pytest

from tfcheck.compiler.process import messages
from tfcheck.compiler.process.messages import (CONTRACT_VERSION, BenchRequest, Budget, BudgetFallback, ChildError,
                                               Comparison, CompileOptions, CompileRequest, CompileResult, ContractError,
                                               DeviceCode, FatbinEntry, KeyParts, OperatorCount, RefusedSchedule,
                                               SymbolicFailure, TracedVariant, TraceRequest, TraceResult, TuningOptions,
                                               TuningSummary, WholeModel, as_json, from_message, to_message)
from tfcheck.compiler.process.target import BuildTarget
from tfcheck.runtime.manifest import SymbolicDim, TensorSpec

LLVM = BuildTarget.of({"kind": "llvm"})
KEY = KeyParts(LLVM, CompileOptions("tfcheck-default"), {"tvm": "0.27"})
INPUTS = [TensorSpec("x", ("batch", 4), "float32"), TensorSpec("k", (), "int32")]
DIMS = {"batch": SymbolicDim(1, 64, (1, 33, 64))}
# The one JSON-shaped field kind: the runtime's structure nodes (runtime/structure.py), which the
# manifest records as they are and the runtime checks where it reads them.
STRUCTURES = {("TracedVariant", "output_structure"), ("TracedVariant", "input_structure")}


def _round_trip(message: object) -> object:
    return from_message(type(message), json.loads(json.dumps(to_message(message))))


def test_nested_messages_survive_json() -> None:
    variant = TracedVariant("/w/variant-0", INPUTS, "ab" * 32, "cd" * 32, "ef" * 32,
                            outputs=[TensorSpec("output_0", ("batch", None), "float32")],
                            output_structure={"kind": "tuple", "length": 1},
                            operators=[OperatorCount("ADD", 1, "a")],
                            input_structure=[{"name": "x", "kind": "tensor"}, {"name": "k", "kind": "tensor"}],
                            dims=DIMS, weights=2)
    result = TraceResult("f", "m.f", {"tensorflow": "2.21.0"}, "00" * 32, [variant, variant])
    request = TraceRequest("/root", "m", "f", "m.py", "/w", KEY, config_shapes=[[[1, 4], []]],
                           config_dims={"batch": (1, None)})
    compile_request = CompileRequest("/w/variant-0", BuildTarget.of({"kind": "cuda", "arch": "sm_90"}), "/o",
                                     TuningOptions(8, "/db", "host:9190", "key"), INPUTS, DIMS, 2)
    compiled = CompileResult("0.27", 1.5, Comparison(True, 1e-7, 1e-6), ["avx2"],
                             DeviceCode("fatbin", "sm_90", ["00" * 32], [FatbinEntry("cubin", "sm_90")]),
                             TuningSummary("/db", 3, 1, 2, 0, 0, 8, 1.25, WholeModel("tuned", 1.0, 2.0)),
                             [BudgetFallback("fused_conv", "schedule_fallback", [RefusedSchedule("contraction", 9)], 8)])
    failure = ChildError("no symbolic size", "RESHAPE", SymbolicFailure(DIMS, INPUTS, True))
    bench = BenchRequest("tvm", "m", "f", "/root", [TensorSpec("x", (1, 4), "float32")], Budget(min_runs=3),
                         "/w/out.npz", [5, 6], artifact="/a")
    for message in (result, request, compile_request, compiled, failure, bench):
        assert _round_trip(message) == message
    assert _round_trip(variant).inputs[0].shape == ("batch", 4)  # tuples again, not JSON's lists  # type: ignore[attr-defined]


def _message_classes() -> list[type]:
    return [value for value in vars(messages).values()
            if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == messages.__name__]


def _untyped(hint: Any) -> bool:
    """Whether `hint` lets an untyped value through: `Any`, or a dict or list of `Any`."""
    if hint is Any:
        return True
    return any(_untyped(argument) for argument in typing.get_args(hint))


def test_no_message_field_is_an_untyped_dict() -> None:
    """Every field of every message is typed down to its leaves (issue 38), but for the structure
    nodes, whose form the runtime owns and checks."""
    untyped = [(kind.__name__, name) for kind in _message_classes()
               for name, hint in typing.get_type_hints(kind).items() if _untyped(hint)]
    assert set(untyped) == STRUCTURES


def test_records_are_written_as_the_manifest_always_had_them() -> None:
    """`as_json` leaves out what is None: the manifest's `tuning`, `compile_options` and
    `budget_fallbacks` read as before the messages were typed."""
    assert as_json(CompileOptions("tfcheck-default")) == {"schedules": "tfcheck-default"}
    assert as_json(CompileOptions("metaschedule-or-default", 64)) == {"schedules": "metaschedule-or-default", "trials": 64}
    summary = TuningSummary("/db", 3, 1, 2, 0, 0, 8, 1.25, WholeModel("default"))
    assert list(as_json(summary)) == ["database", "tasks", "tasks_reused", "tasks_tuned", "tasks_kept_default",
                                      "tasks_of_unknown_size", "trials", "seconds", "whole_model"]
    assert as_json(summary)["whole_model"] == {"kept": "default"}
    assert as_json(BudgetFallback("k", "unscheduled", [RefusedSchedule("rows", 9)], 8)) == {
        "kernel": "k", "schedule": "unscheduled", "refused": [{"rule": "rows", "code_size": 9}], "budget": 8}


def test_another_contract_version_is_refused() -> None:
    data = {**to_message(KEY), "contract_version": CONTRACT_VERSION + 1}
    with pytest.raises(ContractError, match=f"KeyParts: contract version {CONTRACT_VERSION + 1}, this tfcheck "
                                            f"speaks {CONTRACT_VERSION}"):
        from_message(KeyParts, data)


@pytest.mark.parametrize(("change", "message"), [
    ({"surprise": 1}, "unknown fields surprise"),
    ({"versions": None, "target": None, "compile_options": None}, None),
])
def test_fields_must_be_the_dataclass_fields(change: dict[str, object], message: str | None) -> None:
    data = {**to_message(KEY), **change}
    if message is None:
        assert from_message(KeyParts, data) == KeyParts(None, None, None)  # type: ignore[arg-type]
        del data["target"]
        message = "missing 1 required positional argument: 'target'"
    with pytest.raises(ContractError, match=message):
        from_message(KeyParts, data)


def test_key_parts_add_the_tensorflow_version() -> None:
    assert KEY.versions_with("2.21.0") == {"tvm": "0.27", "tensorflow": "2.21.0"}
