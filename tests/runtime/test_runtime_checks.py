"""Refusing artifacts: SHA-256, CPU features, GPU, format, unreadable manifests (the TVM runtime's
versions and libraries: test_bundled_runtime.py)."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_artifacts import read_manifest, write_manifest

import tfcheck
from tfcheck.runtime import ArtifactError
from tfcheck.runtime.target import feature_key, host_cpu_features


def _edit(folder, **changes):
    manifest = read_manifest(folder)
    manifest.update(changes)
    write_manifest(folder, manifest)


def test_modified_library_is_refused_with_a_rebuild_hint(artifacts):
    out = artifacts(("scale", (1, 4)))
    library = out / "scale__1x4" / "lib.so"
    library.write_bytes(library.read_bytes() + b"\0")
    with pytest.raises(ArtifactError, match=r"SHA-256 .* does not match.*tfcheck build demo/models.py"):
        tfcheck.load(out)


def test_lazy_load_checks_the_sha_on_first_call(artifacts):
    out = artifacts(("scale", (1, 4)))
    _edit(out / "scale__1x4", library_sha256="f" * 64)
    lib = tfcheck.load(out, lazy=True)
    with pytest.raises(ArtifactError, match="does not match"):
        lib.scale(np.zeros((1, 4), np.float32))


@pytest.mark.parametrize("changes, reason", [
    ({"cpu_features": ["avx2", "made_up_feature"]}, "this CPU lacks made_up_feature"),
    ({"device": "cuda", "target": {"kind": "cuda", "arch": "sm_90"}}, "no usable NVIDIA GPU"),
    ({"format_version": 3}, "artifact format 3, this tfcheck reads 1 and 2"),
    ({"target": {"kind": "llvm", "mtriple": "aarch64-linux-gnu"}}, "compiled for aarch64-linux-gnu"),
])
def test_artifacts_this_machine_cannot_run_are_refused(artifacts, changes, reason):
    if "device" in changes:
        from tfcheck.runtime.target import cuda_available

        if cuda_available():
            pytest.skip("this machine has a GPU")
    out = artifacts(("scale", (1, 4)))
    _edit(out / "scale__1x4", **changes)
    with pytest.raises(ArtifactError, match=reason) as caught:
        tfcheck.load(out)
    assert "rebuild it on this machine with `tfcheck build demo/models.py`" in str(caught.value)


def test_one_bad_artifact_does_not_hide_the_others(artifacts):
    out = artifacts(("scale", (1, 4)), ("addmul", (2, 3)), ("pair", (2, 3)))
    _edit(out / "addmul__2x3", cpu_features=["made_up_feature"])
    (out / "pair__2x3" / "manifest.json").write_text("{not json", encoding="utf-8")
    lib = tfcheck.load(out)
    np.testing.assert_array_equal(lib.scale(np.zeros((1, 4), np.float32)), np.ones((1, 4)))
    with pytest.raises(AttributeError, match="'addmul' cannot run on this machine.*made_up_feature"):
        lib.addmul
    assert len(lib.skipped) == 1 and "pair__2x3/manifest.json: cannot read manifest" in lib.skipped[0]


def test_manifest_without_required_fields_names_them(artifacts):
    out = artifacts(("scale", (1, 4)))
    manifest = read_manifest(out / "scale__1x4")
    del manifest["library_sha256"], manifest["entry"]
    write_manifest(out / "scale__1x4", manifest)
    with pytest.raises(ArtifactError, match="manifest lacks library_sha256, entry"):
        tfcheck.load(out / "scale__1x4")


def test_same_name_in_two_modules_needs_the_qualified_name(artifacts):
    out = artifacts(("scale", (1, 4)), ("scale", (3, 4)))
    _edit(out / "scale__3x4", qualname="other.scale")
    lib = tfcheck.load(out)
    with pytest.raises(KeyError, match="ambiguous"):
        lib["scale"]
    assert lib["other.scale"](np.zeros((3, 4), np.float32)).shape == (3, 4)


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ArtifactError, match="no such artifact folder"):
        tfcheck.load(tmp_path / "nope")
    with pytest.raises(ArtifactError, match="none found"):
        tfcheck.load(tmp_path)


@pytest.mark.parametrize("llvm, cpuinfo", [("sse4.1", "sse4_1"), ("avx512vnni", "avx512_vnni"),
                                           ("+avx2", "avx2"), ("bmi", "bmi1"), ("sse3", "pni")])
def test_llvm_and_cpuinfo_feature_names_agree(llvm, cpuinfo):
    assert feature_key(llvm) == feature_key(cpuinfo)


def test_host_features_are_read():
    assert not host_cpu_features() or "sse2" in host_cpu_features()


def test_module_dot_aot_name_finds_a_function_whose_python_name_differs(artifacts):
    out = artifacts(("scale", (1, 4)))
    _edit(out / "scale__1x4", qualname="demo.models.iterate")  # tfcheck.aot(iterate, name="scale")
    lib = tfcheck.load(out)
    assert lib["demo.models.scale"] is lib["demo.models.iterate"] is lib.scale
    assert "scale" in dir(lib)
