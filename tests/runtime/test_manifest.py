"""The artifact contract: a `Manifest` written by the build reads back equal, and the JSON on disk
keeps the keys of docs/artifact-format.md."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tfcheck.runtime import ArtifactError
from tfcheck.runtime.manifest import Manifest, SymbolicDim, TensorSpec, Verification, manifest_from_json, read_manifest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "artifact-format.md"


def _full_manifest(folder: Path) -> Manifest:
    """Every key the build writes, optional ones included."""
    return Manifest(
        function="classify", qualname="models.vision.classify", module="models.vision",
        inputs=(TensorSpec("x", (1, 4), "float32"),), outputs=(TensorSpec("output_0", (1, 2), "float32"),),
        output_structure={"kind": "tensor"}, device="cpu", library="lib.so", library_sha256="a" * 64,
        key="b" * 64, source_file="models/vision.py", source_fingerprint="c" * 64,
        captures_fingerprint="d" * 64, graph_fingerprint="e" * 64,
        target={"kind": "llvm", "mcpu": "znver3"}, cpu_features=("avx2", "fma"),
        versions={"tfcheck": "0.1.0", "tensorflow": "2.21.0"},
        runtime={"tag": "tvm-0.27.0-0123456789ab", "tvm": "0.27.0", "tvm_ffi": "0.1.14",
                 "libraries": {"libtvm_runtime.so": "f" * 64}},
        tuned=True, compile_options={"schedules": "metaschedule-or-default", "trials": 8},
        verify=Verification(1e-6, 2e-6, True), operators=({"op": "ADD", "count": 1, "example": "add"},),
        compile_seconds=1.5, tuning={"tasks": 1}, created="2026-11-22T10:00:00Z", folder=folder,
        input_structure=({"name": "x", "kind": "tensor"},), instance="classifier",
        dims={"batch": SymbolicDim(1, 64, (1, 33, 64))},
        weights={"file": "weights.npz", "size": 4096, "sha256": "0" * 64, "count": 1}, format_version=2,
        input_values=((-1.0, 1.0),),
    )


def test_a_written_manifest_reads_back_equal(tmp_path: Path) -> None:
    written = _full_manifest(tmp_path)
    written.write(tmp_path)
    read = read_manifest(tmp_path)
    assert read == written and read.folder == tmp_path
    assert json.loads((tmp_path / "manifest.json").read_text()) == written.to_json()


def test_the_json_keeps_the_documented_keys(tmp_path: Path) -> None:
    """The example and the table of docs/artifact-format.md name every key the build writes."""
    text = DOCS.read_text(encoding="utf-8")
    example = set(re.findall(r'^  "(\w+)":', text.split("## manifest.json", 1)[1].split("```")[1], re.M))
    table = set(re.findall(r"^\| `(\w+)`", text, re.M))
    written = set(_full_manifest(tmp_path).to_json()) | {"device_code", "budget_fallbacks"}  # CUDA builds; kernels over the budget
    assert written == example | table


def test_keys_without_a_value_are_left_out(tmp_path: Path) -> None:
    data = Manifest("f", (), (), {"kind": "tuple", "length": 0}, "cpu", "lib.so", "0" * 64).to_json()
    assert "tuning" not in data and "cpu_features" not in data and "device_code" not in data
    assert data["qualname"] == "f" and data["verify"] == {"max_abs_error": None, "max_rel_error": None,
                                                          "passed": None}


@pytest.mark.parametrize(("key", "value", "message"), [
    ("function", 3, "'function' = 3 is not a JSON string"),
    ("cpu_features", "avx2", "'cpu_features' = 'avx2' is not a JSON array"),
    ("tuned", 1, "'tuned' = 1 is not a JSON boolean"),
    ("compile_seconds", True, "'compile_seconds' = True is not a JSON integer or number"),
    ("verify", {"passed": "yes"}, "'verify' = .* needs numbers"),
    ("inputs", [{"shape": [None], "dtype": "float32"}], r"inputs\[0\] .* needs a 'shape' of sizes and names of 'dims'"),
    ("weights", "weights.npz", "'weights' = 'weights.npz' is not a JSON object"),
    ("weights", {"file": "weights.npz", "size": -1, "sha256": "0" * 64, "count": 1}, "'weights' = .* needs a string"),
    ("weights", {"file": "weights.npz", "size": 1, "sha256": "0" * 64}, "'weights' = .* integers 'size' and 'count'"),
    ("input_values", [[2, 0]], r"'input_values' = .* one \[low, high\] \(low < high\) or null per input"),
    ("input_values", [[0, 2], None], r"'input_values' = .* one \[low, high\]"),
    ("input_values", {"x": [0, 2]}, "'input_values' = .* is not a JSON array"),
])
def test_a_key_of_the_wrong_type_is_named(tmp_path: Path, key: str, value: Any, message: str) -> None:
    data = {**_full_manifest(tmp_path).to_json(), key: value}
    with pytest.raises(ArtifactError, match=message) as error:
        manifest_from_json(data, tmp_path)
    assert str(tmp_path / "manifest.json") in str(error.value)


def test_keys_this_tfcheck_does_not_know_are_ignored(tmp_path: Path) -> None:
    data = {**_full_manifest(tmp_path).to_json(), "from_a_newer_tfcheck": 1}
    assert manifest_from_json(data, tmp_path) == _full_manifest(tmp_path)


def test_a_weights_file_is_a_name_inside_the_artifact_folder(tmp_path: Path) -> None:
    """Like the library: a weights file named by a path is refused, naming the folder and the key."""
    data = {**_full_manifest(tmp_path).to_json(),
            "weights": {"file": "../weights.npz", "size": 1, "sha256": "0" * 64, "count": 1}}
    with pytest.raises(ArtifactError, match=r"'weights'.file '../weights.npz' contains '/'") as error:
        manifest_from_json(data, tmp_path)
    assert str(tmp_path) in str(error.value)
