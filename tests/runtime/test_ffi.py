"""tfcheck/runtime/ffi.py, the ctypes binding of TVM-FFI's C ABI: references released, errors
turned into ArtifactErrors, outputs read in place while their tensor lives."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from tfcheck.runtime import ArtifactError
from tfcheck.runtime.bundled import open_runtime, wheel_libraries
from tfcheck.runtime.ffi import Tensor
from tfcheck.runtime.tvm_backend import Executable

PAGE = 4096
MB = 1_000_000


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def _executable(compiled, kind: str, shape: tuple[int, ...]) -> Executable:
    return Executable(compiled(kind, shape) / "lib.so", "main", "cpu", wheel_libraries("cpu"))


def test_ten_thousand_calls_do_not_grow_the_process(compiled):
    """Each call makes an input Tensor over DLPack and gets an output Tensor (16 KB each here, and
    a tuple's Array for `pair`): one reference not released would keep about 160 MB alive."""
    functions = [(_executable(compiled, "scale", (64, 64)), np.ones((64, 64), np.float32)),
                 (_executable(compiled, "pair", (64, 64)), np.ones((64, 64), np.int32))]
    for executable, x in functions:
        for _ in range(1000):  # warm up: pools, caches, the VM of this thread
            executable.run([x])
        gc.collect()
        before = _resident_bytes()
        for _ in range(10_000):
            outputs = executable.run([x])
        gc.collect()
        assert _resident_bytes() - before < 8 * MB
        assert outputs[0][0, 0] in (3.0, 2)  # scale: 1 * 2 + 1; pair: 1 + 1


def test_an_error_raised_by_the_runtime_is_an_artifact_error_with_its_message(compiled):
    executable = _executable(compiled, "scale", (1, 4))
    with pytest.raises(ArtifactError, match=r"shape\[0\] mismatch to specified constant"):
        executable.run([np.ones((2, 4), np.float32)])
    assert executable.run([np.zeros((1, 4), np.float32)])[0].tolist() == [[1.0] * 4]


def test_a_file_that_is_no_library_is_refused_with_the_runtimes_reason(tmp_path):
    text = tmp_path / "lib.so"
    text.write_text("not a library")
    with pytest.raises(ArtifactError, match=r"lib.so: cannot load the TVM library: .*"):
        Executable(text, "main", "cpu", wheel_libraries("cpu"))


def test_a_missing_function_is_named(compiled):
    ffi = open_runtime(wheel_libraries("cpu"))
    module = ffi.load_module(str(compiled("scale", (1, 4)) / "lib.so"))
    with pytest.raises(ArtifactError, match="the TVM module has no function 'no_such'"):
        module["no_such"]
    with pytest.raises(ArtifactError, match="no global function 'tfcheck.no_such'"):
        ffi.get_global_func("tfcheck.no_such")


def test_an_output_is_read_in_place_and_keeps_its_tensor_alive(compiled):
    ffi = open_runtime(wheel_libraries("cpu"))
    vm = ffi.load_module(str(compiled("pair", (2, 3)) / "lib.so"))["vm_load_executable"]()
    vm["vm_initialization"](1, 0, 2)
    result = vm["main"](np.arange(6, dtype=np.int32).reshape(2, 3))
    assert [type(item) for item in result] == [Tensor, Tensor]
    doubled = np.asarray(result[0])
    assert isinstance(doubled.base, Tensor) and not doubled.flags.owndata
    del result, vm
    gc.collect()
    assert doubled.tolist() == [[0, 2, 4], [6, 8, 10]]
