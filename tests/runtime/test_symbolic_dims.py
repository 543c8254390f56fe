"""The runtime's side of symbolic dimensions, without TensorFlow or a library: the manifest's
`dims`, and which input shapes an artifact takes (any size within the bounds, the same size
wherever a dimension appears), with errors naming the input and the dimension."""

import json
from pathlib import Path

import pytest

from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.inputs import shape_problem
from tfcheck.runtime.manifest import SymbolicDim, TensorSpec, read_manifest

SPECS = (TensorSpec("tokens", ("batch", "tokens_1"), "int32"), TensorSpec("scale", ("batch", 4), "float32"))
DIMS = {"batch": SymbolicDim(1, 8, (1, 5, 8)), "tokens_1": SymbolicDim(2, None, (2, 17, 32))}


@pytest.mark.parametrize("shapes", [[(1, 2), (1, 4)], [(8, 300), (8, 4)], [(3, 17), (3, 4)]])
def test_any_size_within_the_bounds_fits(shapes: list) -> None:
    assert shape_problem("f", SPECS, DIMS, shapes) is None


@pytest.mark.parametrize("shapes, message", [
    ([(9, 4), (9, 4)], "argument 'tokens' has shape (9, 4), expected tokens: int32[batch, tokens_1]: "
                       "dimension 0 (batch) is 9, the artifact takes 1 to 8"),
    ([(2, 1), (2, 4)], "dimension 1 (tokens_1) is 1, the artifact takes at least 2"),
    ([(2, 5), (3, 4)], "argument 'scale' has shape (3, 4), expected scale: float32[batch, 4]: "
                       "dimension 0 (batch) is 3, but batch of 'tokens' is 2"),
    ([(2, 5), (2, 5)], "argument 'scale' has shape (2, 5), expected scale: float32[batch, 4]"),
    ([(2, 5, 1), (2, 4)], "argument 'tokens' has shape (2, 5, 1)"),
])
def test_other_sizes_are_refused_naming_the_input_and_dimension(shapes: list, message: str) -> None:
    problem = shape_problem("f", SPECS, DIMS, shapes)
    assert problem is not None and problem.startswith("f(): ") and message in problem


def _manifest(folder: Path, **changes: object) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "lib.so").write_bytes(b"")
    data = {"format_version": 1, "function": "f", "device": "cpu", "library": "lib.so", "library_sha256": "0",
            "entry": "main", "output_structure": {"kind": "tensor"},
            "inputs": [{"name": "x", "shape": ["batch", 128], "dtype": "float32"}],
            "outputs": [{"name": "output_0", "shape": ["batch", None], "dtype": "float32"}],
            "dims": {"batch": {"min": 1, "max": 64, "verified": [1, 33, 64]}}, **changes}
    (folder / "manifest.json").write_text(json.dumps(data))
    return folder


def test_a_manifest_with_dims_reads_back(tmp_path: Path) -> None:
    manifest = read_manifest(_manifest(tmp_path / "a"))
    assert manifest.inputs[0].shape == ("batch", 128) and manifest.outputs[0].shape == ("batch", None)
    assert manifest.dims == {"batch": SymbolicDim(1, 64, (1, 33, 64))}
    assert manifest.describe() == "f(x: float32[batch, 128]; batch 1 to 64) [cpu]"
    assert read_manifest(_manifest(tmp_path / "b")).to_json()["dims"] == manifest.to_json()["dims"]


@pytest.mark.parametrize("changes, message", [
    ({"dims": {"batch": {"min": 4, "max": 2, "verified": []}}}, r"'dims'\.batch = .* needs an integer 'min'"),
    ({"dims": []}, r"'dims' must be a JSON object"),
    ({"inputs": [{"name": "x", "shape": ["length", 128], "dtype": "float32"}]}, r"inputs\[0\] = .* needs a 'shape'"),
    ({"inputs": [{"name": "x", "shape": [None, 128], "dtype": "float32"}]}, r"inputs\[0\] = .* needs a 'shape'"),
])
def test_a_bad_dims_record_is_named(tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(ArtifactError, match=message):
        read_manifest(_manifest(tmp_path / "a", **changes))
