"""CUDA artifacts: device code compiled by nvcc for the requested arch, even without a GPU."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tfcheck.compiler.build.cuda import CudaExportError, fatbin_entries, fatbins_in, swap_source_for_binary
from tfcheck.compiler.process.messages import FatbinEntry
from tfcheck.runtime.target import cuda_available

EM_CUDA = 190


def _string(value: bytes) -> bytes:
    return struct.pack("<Q", len(value)) + value


def packed_blob(source: bytes) -> bytes:
    """A blob shaped like TVM's packed imports: host placeholder, then one CUDA source module."""
    function_map = struct.pack("<Q", 1) + _string(b"add_kernel") + b"\x01\x02\x03"
    payload = _string(b"cuda") + function_map + _string(source)
    body = _string(b"_lib") + _string(b"cuda") + struct.pack("<Q", len(payload)) + payload
    return struct.pack("<Q", len(body)) + body


def test_source_payload_is_swapped_for_the_binary_with_lengths_fixed() -> None:
    blob = swap_source_for_binary(packed_blob(b"__global__ void add_kernel() {}"), b"__global__ void add_kernel() {}",
                                  b"FATBIN-BYTES")
    (total,) = struct.unpack_from("<Q", blob)
    assert total == len(blob) - 8
    record = blob.index(_string(b"cuda"), 8 + len(_string(b"_lib")))
    (payload_length,) = struct.unpack_from("<Q", blob, record + 12)
    payload = blob[record + 20:]
    assert len(payload) == payload_length
    assert payload.startswith(_string(b"fatbin")) and payload.endswith(_string(b"FATBIN-BYTES"))
    assert _string(b"add_kernel") in payload


def test_a_blob_without_that_source_is_refused() -> None:
    with pytest.raises(CudaExportError):
        swap_source_for_binary(packed_blob(b"other source"), b"__global__ void k() {}", b"x")


AFFINE = '''
import tensorflow as tf
import tfcheck

weights = tf.Variable(tf.random.normal([16, 8]))


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([4, 16], tf.float32)])
def affine(x):
    return tf.nn.softmax(tf.matmul(x, weights) + 0.5)
'''


@pytest.fixture(scope="module")
def cuda_build(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One `--target cuda --arch sm_90` build, shared by the tests below."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc (the CUDA toolkit) is not installed")
    folder = tmp_path_factory.mktemp("cuda")
    (folder / "affine.py").write_text(AFFINE)
    process = subprocess.run(
        [sys.executable, "-m", "tfcheck", "build", "affine.py", "--target", "cuda", "--arch", "sm_90",
         "--cache-dir", "cache", "--format", "json"],
        cwd=folder, capture_output=True, text=True, timeout=900, check=False)
    assert process.returncode == 0, process.stdout + process.stderr
    [record] = json.loads(process.stdout)["functions"]
    return record


@pytest.mark.slow
def test_cuda_artifact_holds_machine_code_for_the_requested_arch(cuda_build: dict[str, Any]) -> None:
    assert cuda_build["status"] == "built" and cuda_build["target"] == "cuda:sm_90"
    folder = Path(cuda_build["artifact"])
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["device"] == "cuda" and manifest["target"]["arch"] == "sm_90"
    assert manifest["target"]["host"]["kind"] == "llvm"
    assert {"kind": "cubin", "arch": "sm_90"} in manifest["device_code"]["entries"]
    [fatbin] = fatbins_in(folder / "lib.so")
    assert FatbinEntry("cubin", "sm_90") in fatbin_entries(fatbin)
    cubin = fatbin[fatbin.index(b"\x7fELF"):]
    assert struct.unpack_from("<H", cubin, 18)[0] == EM_CUDA
    if not cuda_available():
        assert cuda_build["verified"] is None  # built, not run: there is no GPU here


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs an NVIDIA GPU")
def test_cuda_artifact_matches_tensorflow_on_a_gpu(cuda_build: dict[str, Any]) -> None:
    assert cuda_build["verified"] is True
    assert cuda_build["max_abs_error"] < 1e-4
