"""Nested inputs and outputs in `tfcheck.load`: flattening by the manifest's `input_structure`,
checks that name the nested path, outputs rebuilt from `output_structure`, bad structures refused.

The `addmul` artifact computes (x, y) -> ((x + y) * x, x + y); its manifest is rewritten here as
if built from `def addmul(pair, scale)`-like signatures, which is all the runtime reads."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_artifacts import read_manifest, write_manifest

import tfcheck
from tfcheck.runtime import ArtifactError, InputError
from tfcheck.runtime.structure import StructureError, leaf_paths, pack

X = np.arange(6, dtype=np.float32).reshape(2, 3)
Y = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)

PAIR = {"name": "pair", "kind": "dict", "keys": ["x", "y"]}
STATS = {"kind": "dict", "keys": ["stats"],
         "items": [{"kind": "namedtuple", "name": "Stats", "fields": ["prod", "sum"]}]}


def nested(artifacts, arguments=(PAIR,), outputs=STATS, names=("pair['x']", "pair['y']")):
    out = artifacts(("addmul", (2, 3)))
    [folder] = out.iterdir()
    manifest = read_manifest(folder)
    for spec, name in zip(manifest["inputs"], names):
        spec["name"] = name
    manifest.update(input_structure=list(arguments), output_structure=outputs)
    write_manifest(folder, manifest)
    return out


def test_dict_input_and_nested_output(artifacts):
    lib = tfcheck.load(nested(artifacts))
    result = lib.addmul({"x": X, "y": Y})
    stats = result["stats"]
    assert type(stats).__name__ == "Stats" and stats._fields == ("prod", "sum")
    np.testing.assert_array_equal(stats.prod, (X + Y) * X)
    np.testing.assert_array_equal(stats[1], X + Y)
    again = lib.addmul(pair={"y": Y, "x": X})["stats"]  # keyword, keys in any order
    assert type(again) is type(stats)
    np.testing.assert_array_equal(again.sum, X + Y)


def test_input_checks_name_the_nested_path(artifacts):
    lib = tfcheck.load(nested(artifacts))
    with pytest.raises(InputError, match=r"argument pair is missing key\(s\) 'y'"):
        lib.addmul({"x": X})
    with pytest.raises(InputError, match=r"argument pair has unexpected key\(s\) 'z'"):
        lib.addmul({"x": X, "y": Y, "z": Y})
    with pytest.raises(InputError, match=r"argument pair must be a dict with keys 'x', 'y', got tuple"):
        lib.addmul((X, Y))
    with pytest.raises(InputError, match=r"argument pair\['y'\] has shape \(3, 2\), expected "
                                         r"pair\['y'\]: float32\[2, 3\]"):
        lib.addmul({"x": X, "y": Y.T.copy()})
    with pytest.raises(InputError, match=r"missing input pair\['x'\]: float32\[2, 3\], pair\['y'\]"):
        lib.addmul()


def test_sequences_and_namedtuples_as_inputs(artifacts):
    arguments = ({"name": "point", "kind": "tuple", "length": 1, "items": [{"kind": "list", "length": 1}]},
                 {"name": "y", "kind": "tensor"})
    lib = tfcheck.load(nested(artifacts, arguments, {"kind": "tuple", "length": 2}, ("point[0][0]", "y")))
    prod, total = lib.addmul(([X],), Y)
    np.testing.assert_array_equal(total, X + Y)
    with pytest.raises(InputError, match=r"argument point\[0\] must be a list of 1 item\(s\), got list of 2"):
        lib.addmul(([X, X],), Y)


@pytest.mark.parametrize(("structure", "message"), [
    ({"kind": "dict", "keys": ["b", "a"]}, "sorted, distinct string 'keys'"),
    ({"kind": "namedtuple", "name": "P", "fields": ["_x", "y"]}, "Python identifiers"),
    ({"kind": "namedtuple", "name": "class", "fields": ["x", "y"]}, "Python identifiers"),
    ({"kind": "tuple", "length": 3}, "holds 3 tensors, the manifest lists 2"),
    ({"kind": "set", "length": 2}, "is not a structure node"),
    ({"kind": "tuple", "length": 2, "items": [{"kind": "tensor"}]}, "has 2 children"),
])
def test_bad_output_structures_are_refused_when_read(artifacts, structure, message):
    out = nested(artifacts, outputs=structure)
    with pytest.raises(ArtifactError, match=message):
        tfcheck.load(out)


def test_bad_input_structure_is_refused_when_read(artifacts):
    out = nested(artifacts, arguments=({"kind": "dict", "keys": ["x", "y"]},))
    with pytest.raises(ArtifactError, match="'input_structure': each argument needs a string 'name'"):
        tfcheck.load(out)


def test_too_deep_structures_are_refused():
    deep: dict = {"kind": "tensor"}
    for _ in range(40):
        deep = {"kind": "tuple", "length": 1, "items": [deep]}
    from tfcheck.runtime.structure import leaf_count

    with pytest.raises(StructureError, match="deeper than"):
        leaf_count(deep)


def test_paths_follow_the_structure():
    node = {"kind": "dict", "keys": ["a", "b"],
            "items": [{"kind": "tuple", "length": 2}, {"kind": "namedtuple", "name": "P", "fields": ["x"]}]}
    assert leaf_paths(node, "f") == ["f['a'][0]", "f['a'][1]", "f['b'].x"]
    assert pack(node, [1, 2, 3])["a"] == (1, 2)
    with pytest.raises(StructureError, match="fewer values"):
        pack(node, [1, 2])
    with pytest.raises(StructureError, match="more values"):
        pack(node, [1, 2, 3, 4])
