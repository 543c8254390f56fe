"""The TVM runtime an artifact was built against: exact versions, the copies bundled into an
exported folder (tfcheck/runtime/bundled.py, compiler/build/export.py), and moving data to a
device without `tvm`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from runtime_artifacts import read_manifest, runtime_record, write_manifest

import tfcheck
from tfcheck.compiler.build.export import bundle_runtime
from tfcheck.runtime import ArtifactError
from tfcheck.runtime.bundled import RUNTIME_DIR, bundled_libraries, read_runtime
from tfcheck.runtime.manifest import read_manifest as parse_manifest


def _set_runtime(folder: Path, **changes: object) -> None:
    manifest = read_manifest(folder)
    manifest["runtime"] = {**manifest["runtime"], **changes}
    write_manifest(folder, manifest)


def _exported(artifacts) -> Path:
    """An `--out` folder with one artifact and its bundled runtime, as `tfcheck build --out` makes."""
    out = artifacts(("scale", (1, 4)))
    assert bundle_runtime(read_manifest(out / "scale__1x4")["runtime"], out) is None
    return out


_ZEROS = {"libtvm_ffi.so": "0" * 64, "libtvm_runtime.so": "0" * 64, "libtvm_runtime_extra.so": "0" * 64}


@pytest.mark.parametrize("changes, reason", [
    # The tests' process imported apache-tvm (to build artifacts), so its runtime is the only one.
    ({"tvm_ffi": "0.1.13"}, r"imported apache-tvm 0\.27\.0\.post1 with apache-tvm-ffi 0\.1\.14\.post0, "
                            r"whose runtime is not the one the artifact was built with \(TVM "
                            r"0\.27\.0\.post1, tvm-ffi 0\.1\.13\)"),
    ({"tvm": "0.19.0"}, r"whose runtime is not the one the artifact was built with \(TVM 0\.19\.0, "),
    ({"libraries": _ZEROS}, "already runs another build of libtvm_ffi.so; the artifact needs TVM "
                            "runtime tvm-0.27.0.post1-[0-9a-f]{12} \\(open: .*/tvm_ffi/lib/libtvm_ffi.so\\)"),
    ({"libraries": {**_ZEROS, "libtvm_ffi.so": runtime_record()["libraries"]["libtvm_ffi.so"]}},
     "already runs another build of libtvm_runtime.so"),
    ({"libraries": {"libtvm_runtime.so": "0" * 64, "libtvm_runtime_extra.so": "0" * 64}},
     "runtime libraries must be exactly libtvm_ffi.so, libtvm_runtime.so, libtvm_runtime_extra.so"),
    ({"tag": "../../etc"}, "runtime tag '../../etc' is not of the form"),
    ({"tag": "tvm-0.27/../x"}, "is not of the form"),
    ({"libraries": {"../libc.so.6": "0" * 64}}, "runtime libraries must be exactly"),
    ({"libraries": {"libtvm_runtime.so": "x", "libtvm_runtime_extra.so": "0" * 64}},
     "runtime libraries must be exactly"),
])
def test_a_runtime_other_than_the_recorded_one_is_refused(artifacts, changes, reason):
    out = artifacts(("scale", (1, 4)))
    _set_runtime(out / "scale__1x4", **changes)
    with pytest.raises(ArtifactError, match=reason):
        tfcheck.load(out)


def test_an_artifact_without_a_runtime_record_is_refused(artifacts):
    out = artifacts(("scale", (1, 4)))
    manifest = read_manifest(out / "scale__1x4")
    del manifest["runtime"]
    write_manifest(out / "scale__1x4", manifest)
    with pytest.raises(ArtifactError, match="no 'runtime' record"):
        tfcheck.load(out)


def test_export_bundles_the_runtime_once_and_repairs_a_damaged_copy(artifacts):
    out = _exported(artifacts)
    record = read_manifest(out / "scale__1x4")["runtime"]
    folder = out / RUNTIME_DIR / record["tag"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(record["libraries"])
    runtime = read_runtime(parse_manifest(out / "scale__1x4"))
    assert bundled_libraries(out / "scale__1x4", runtime) == tuple(
        (folder / name).resolve() for name, _ in runtime.libraries)
    (folder / "libtvm_runtime.so").write_bytes(b"damaged")
    assert bundle_runtime(read_manifest(out / "scale__1x4")["runtime"], out) is None
    assert bundled_libraries(out / "scale__1x4", runtime)[0].stat().st_size > 1_000_000


def test_export_refuses_to_bundle_a_runtime_it_does_not_have(artifacts):
    out = artifacts(("scale", (1, 4)))
    manifest = read_manifest(out / "scale__1x4")
    manifest["runtime"]["libraries"]["libtvm_runtime.so"] = "0" * 64
    assert "cannot bundle libtvm_runtime.so" in bundle_runtime(manifest["runtime"], out)


@pytest.mark.parametrize("damage, reason", [
    ("modify", "SHA-256 .* does not match the manifest's .* bundled TVM runtime was modified"),
    ("remove", "libtvm_runtime_extra.so: missing from the bundled TVM runtime"),
    ("link outside", "libtvm_runtime_extra.so: points outside"),
    ("no folder", r"no TVM runtime: .*/tvm-runtime/tvm-[^ ]+ does not exist \(export with `tfcheck "
                  r"build --out`\) and apache-tvm 0\.27\.0\.post1 is not installed"),
])
def test_a_damaged_bundled_runtime_is_refused(artifacts, tmp_path, damage, reason):
    out = _exported(artifacts)
    manifest = parse_manifest(out / "scale__1x4")
    library = out / RUNTIME_DIR / manifest.runtime["tag"] / "libtvm_runtime_extra.so"
    if damage == "modify":
        library.write_bytes(library.read_bytes() + b"\0")
    elif damage == "remove":
        library.unlink()
    elif damage == "no folder":
        shutil.rmtree(out / RUNTIME_DIR)
    else:
        outside = tmp_path / "libtvm_runtime_extra.so"
        outside.write_bytes(library.read_bytes())
        library.unlink()
        library.symlink_to(outside)
    with pytest.raises(ArtifactError, match=reason):
        bundled_libraries(out / "scale__1x4", read_runtime(manifest))


@pytest.mark.parametrize("preamble", ["", "import tvm_ffi"])
def test_an_exported_folder_runs_on_its_bundled_runtime_without_tvm(artifacts, tmp_path, preamble):
    """A `tvm` package that marks its import shadows the wheel: the runtime must neither import it
    nor find libraries through it, and must map the bundled copies. A process that imported
    `tvm_ffi` first keeps that one libtvm_ffi.so (same bytes) rather than mapping a second copy."""
    out = _exported(artifacts)
    shadow, marker = tmp_path / "shadow", tmp_path / "imported-tvm"
    (shadow / "tvm").mkdir(parents=True)
    (shadow / "tvm" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    script = textwrap.dedent(f"""
        import json, sys
        {preamble}
        import numpy as np
        import tfcheck
        lib = tfcheck.load({str(out)!r})
        result = lib.scale(np.arange(4, dtype=np.float32).reshape(1, 4))
        maps = open("/proc/self/maps").read()
        mapped = sorted({{line.split()[-1] for line in maps.splitlines() if "libtvm_" in line}})
        print(json.dumps({{"result": result.tolist(), "mapped": mapped}}))
    """)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               timeout=120, env={"PYTHONPATH": str(shadow), "PATH": "/usr/bin:/bin"})
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["result"] == [[1.0, 3.0, 5.0, 7.0]]
    bundled = str((out / RUNTIME_DIR).resolve())
    runtime = [path for path in report["mapped"] if "libtvm_runtime" in path]
    ffi = [path for path in report["mapped"] if path.endswith("/libtvm_ffi.so")]
    assert len(runtime) == 2 and all(path.startswith(bundled) for path in runtime)
    assert len(ffi) == 1 and ffi[0].startswith(bundled) == (preamble == "")
    assert not marker.exists()


def test_cuda_artifacts_record_and_bundle_the_cuda_runtime(artifacts):
    out = artifacts(("scale", (1, 4)))
    manifest = read_manifest(out / "scale__1x4")
    manifest.update(device="cuda", target={"kind": "cuda", "arch": "sm_90"},
                    runtime=runtime_record("cuda"))
    write_manifest(out / "scale__1x4", manifest)
    assert bundle_runtime(manifest["runtime"], out) is None
    runtime = read_runtime(parse_manifest(out / "scale__1x4"))
    names = [path.name for path in bundled_libraries(out / "scale__1x4", runtime)]
    assert names == ["libtvm_ffi.so", "libtvm_runtime.so", "libtvm_runtime_extra.so",
                     "libtvm_runtime_cuda.so"]


def test_device_copies_round_trip_through_the_runtime_functions():
    """The CUDA path's copies, run against the CPU device (this machine has no GPU)."""
    from tfcheck.runtime.bundled import open_runtime, wheel_libraries
    from tfcheck.runtime.tvm_backend import DeviceCopies

    copies = DeviceCopies(open_runtime(wheel_libraries("cpu")), "cpu")
    for array in (np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2], np.array([True, False]),
                  np.arange(6, dtype=np.int64)):
        tensor = copies.to_device(array)
        assert tensor.device_type == 1 and tensor.shape == array.shape
        np.testing.assert_array_equal(copies.to_numpy(tensor), array)



def test_a_runtime_library_that_does_not_open_is_an_artifact_error(tmp_path):
    """For example libtvm_runtime_cuda.so on a machine without libcudart: a reason, not a crash."""
    from tfcheck.runtime.bundled import open_runtime

    library = tmp_path / "libtvm_runtime_cuda.so"
    library.write_bytes(b"not an ELF file")
    with pytest.raises(ArtifactError, match="libtvm_runtime_cuda.so: cannot open the TVM runtime"):
        open_runtime((library,))
