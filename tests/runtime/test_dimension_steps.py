"""Symbolic dimensions that go in steps (a U-Net of four poolings: multiples of 16, issue 42), on
the runtime's side, without TensorFlow or a library: the manifest's `step`, and the sizes an
artifact takes, refused naming the dimension, the step and the nearest sizes it takes."""

import json
from pathlib import Path

import pytest

from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.inputs import shape_problem
from tfcheck.runtime.manifest import SymbolicDim, TensorSpec, read_manifest

SPECS = (TensorSpec("images", (1, "images_1", "images_2", 3), "float32"),)
DIMS = {"images_1": SymbolicDim(32, 256, (32, 144, 256), 16), "images_2": SymbolicDim(36, None, (36, 52, 68), 16)}


@pytest.mark.parametrize("shape", [(1, 32, 36, 3), (1, 144, 52, 3), (1, 256, 3636, 3)])
def test_sizes_on_the_step_fit(shape: tuple) -> None:
    assert shape_problem("segment", SPECS, DIMS, [shape]) is None


@pytest.mark.parametrize("shape, message", [
    ((1, 145, 36, 3), "dimension 1 (images_1) is 145, the artifact takes multiples of 16, 32 to 256 (the nearest: 144, 160)"),
    ((1, 40, 36, 3), "dimension 1 (images_1) is 40, the artifact takes multiples of 16, 32 to 256 (the nearest: 32, 48)"),
    ((1, 16, 36, 3), "dimension 1 (images_1) is 16, the artifact takes multiples of 16, 32 to 256"),
    ((1, 272, 36, 3), "dimension 1 (images_1) is 272, the artifact takes multiples of 16, 32 to 256"),
    ((1, 32, 48, 3), "dimension 2 (images_2) is 48, the artifact takes at least 36 in steps of 16 (the nearest: 36, 52)"),
])
def test_sizes_off_the_step_are_refused_naming_it(shape: tuple, message: str) -> None:
    problem = shape_problem("segment", SPECS, DIMS, [shape])
    assert problem is not None and problem.endswith(message), problem


def _manifest(folder: Path, dims: dict) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "lib.so").write_bytes(b"")
    data = {"format_version": 1, "function": "segment", "device": "cpu", "library": "lib.so", "library_sha256": "0",
            "entry": "main", "output_structure": {"kind": "tensor"},
            "inputs": [{"name": "images", "shape": [1, "images_1", 8, 3], "dtype": "float32"}],
            "outputs": [{"name": "output_0", "shape": [1, "images_1", 8, 2], "dtype": "float32"}], "dims": dims}
    (folder / "manifest.json").write_text(json.dumps(data))
    return folder


def test_a_step_reads_back_and_is_written_only_where_it_is_not_1(tmp_path: Path) -> None:
    stepped = {"images_1": {"min": 32, "max": 256, "verified": [32, 144, 256], "step": 16}}
    manifest = read_manifest(_manifest(tmp_path / "a", stepped))
    assert manifest.dims == {"images_1": SymbolicDim(32, 256, (32, 144, 256), 16)}
    assert manifest.describe() == "segment(images: float32[1, images_1, 8, 3]; images_1 multiples of 16, 32 to 256) [cpu]"
    assert manifest.to_json()["dims"] == stepped
    plain = {"images_1": {"min": 1, "max": None, "verified": [1, 17, 32]}}
    assert read_manifest(_manifest(tmp_path / "b", plain)).to_json()["dims"] == plain  # as before steps


@pytest.mark.parametrize("step", [0, -16, 2.5, "16", True])
def test_a_bad_step_is_named(tmp_path: Path, step: object) -> None:
    with pytest.raises(ArtifactError, match=r"'dims'\.images_1 = .* if given, an integer 'step' >= 1"):
        read_manifest(_manifest(tmp_path / "a", {"images_1": {"min": 32, "max": None, "verified": [], "step": step}}))
