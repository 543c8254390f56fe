"""tfcheck/runtime/ffi.py, the ctypes binding of TVM-FFI's C ABI: references released, errors
turned into ArtifactErrors, outputs read in place while their tensor lives."""

from __future__ import annotations

import gc
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tfcheck.runtime import ArtifactError
from tfcheck.runtime.bundled import open_runtime, wheel_libraries
from tfcheck.runtime.ffi import Tensor
from tfcheck.runtime.inputs import aligned, lendable
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


def test_each_call_reads_its_own_arrays_memory(compiled):
    """A call's input tensor is made once and pointed at each call's array (ffi.LentTensor)."""
    executable = _executable(compiled, "scale", (1, 4))
    ones, twos = np.ones((1, 4), np.float32), np.full((1, 4), 2, np.float32)
    assert [executable.run([x])[0].tolist() for x in (ones, twos, ones)] == [[[3.0] * 4], [[5.0] * 4], [[3.0] * 4]]


def test_an_output_that_is_its_input_is_a_copy_the_caller_cannot_change(compiled):
    """`echo` returns its input tensor itself: the output must not be the caller's array, or
    writing into that array after the call (a reused input buffer) would change the result."""
    executable = _executable(compiled, "echo", (2, 3))
    first = np.arange(6, dtype=np.float32).reshape(2, 3)
    same, doubled = executable.run([first])
    first[...] = -1
    assert not np.shares_memory(same, first)
    assert same.tolist() == [[0, 1, 2], [3, 4, 5]] and doubled.tolist() == [[0, 2, 4], [6, 8, 10]]


def test_an_input_the_runtime_kept_is_neither_lent_again_nor_leaked(compiled):
    """After `echo`, the runtime may still hold its input tensor: it must be neither pointed at
    the next call's array nor keep the array it read alive once the runtime lets go."""
    executable = _executable(compiled, "echo", (2, 3))
    first = np.arange(6, dtype=np.float32).reshape(2, 3)
    owner = weakref.ref(first)
    same, _ = executable.run([first])
    del first
    gc.collect()
    later, _ = executable.run([np.full((2, 3), 7, np.float32)])  # another array, same shape
    [np.full((2, 3), -1, np.float32) for _ in range(100)]  # would reuse the first array's memory
    assert same.tolist() == [[0, 1, 2], [3, 4, 5]] and later.tolist() == [[7] * 3] * 2
    del same, later
    gc.collect()
    executable.run([np.zeros((2, 3), np.float32)])  # lets go of the tensors nothing holds now
    assert owner() is None


@pytest.mark.parametrize("make", [
    lambda: np.arange(8, dtype=np.float32).reshape(1, 8)[:, ::2],  # strided
    lambda: np.arange(0, 8, 2, dtype=np.float32).reshape(1, 4).astype(">f4"),  # big-endian
    lambda: np.asfortranarray(np.arange(0, 8, 2, dtype=np.float32).reshape(1, 4)),
    lambda: aligned(np.arange(-2, 8, 2, dtype=np.float32))[1:].reshape(1, 4),  # 4 bytes past a 64-byte line
], ids=["strided", "big-endian", "fortran", "unaligned"])
def test_an_array_the_code_cannot_read_as_it_is_is_copied(compiled, make):
    executable = _executable(compiled, "scale", (1, 4))
    x = make()
    assert executable.run([x])[0].tolist() == [[1.0, 5.0, 9.0, 13.0]]


def test_only_memory_the_code_may_use_as_it_is_is_lent_without_a_copy():
    """`lendable`: an aligned, writable, C-contiguous, native array is lent itself, at its own
    address; anything else is an aligned copy with the same values."""
    x = aligned(np.arange(8, dtype=np.float32))
    assert lendable(x)[0] is x and lendable(x)[1] == x.ctypes.data
    read_only = x.copy()
    read_only.setflags(write=False)
    for odd in (x[1:], x[::2], x.astype(">f4"), read_only, np.zeros((0, 3), np.float32)):
        copy, address = lendable(odd)
        assert copy is not odd and copy.flags.writeable and copy.flags.c_contiguous and copy.dtype.isnative
        assert address == copy.ctypes.data and (address % 64 == 0 or copy.size == 0)
        np.testing.assert_array_equal(copy, odd)


def test_a_read_only_array_is_not_handed_to_the_runtime(compiled):
    """Generated code may write its inputs' memory; a read-only array is copied first."""
    executable = _executable(compiled, "scale", (1, 4))
    x = np.zeros((1, 4), np.float32)
    x.setflags(write=False)
    assert executable.run([x])[0].tolist() == [[1.0] * 4]


def test_threads_whose_inputs_the_runtime_keeps_each_read_their_own(compiled):
    """`echo` outputs held over several calls on six threads at once: each still reads the array
    its call was given while the threads keep and release their tensors."""
    executable = _executable(compiled, "echo", (2, 3))

    def calls(start: int) -> bool:
        values = range(start, start + 5)
        outputs = [executable.run([np.full((2, 3), value, np.float32)])[0] for value in values]
        return all(output.tolist() == [[value] * 3] * 2 for output, value in zip(outputs, values))

    with ThreadPoolExecutor(max_workers=6) as pool:
        assert all(pool.map(calls, range(0, 600, 5)))
