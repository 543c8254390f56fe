"""Running an exported TVM Relax executable with the smallest possible import cost.

`import tvm` costs about a second because it loads the compiler's Python side. Running an exported
library needs none of it: `tvm_ffi` (about 0.25 s) plus the C++ runtime libraries the artifact was
built against (`libtvm_runtime.so`, and `libtvm_runtime_cuda.so` for CUDA), found and opened by
`bundled`. Data moves to and from a GPU through the runtime's own global functions, so CUDA
artifacts need no `tvm` either.

A Relax VM keeps per-call state (registers, frames), so one VM must not run two calls at once.
Each thread gets its own VM over the shared, read-only executable module: calls from many threads
run in parallel and never share a VM.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.runtime.bundled import open_runtime
from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.threads import use_all_cores

_DEVICE_TYPES = {"cpu": 1, "cuda": 2}
_POOLED_ALLOCATOR = 2


class Executable:
    """One loaded library; `run` takes checked NumPy inputs and returns NumPy outputs."""

    def __init__(self, library: Path, entry: str, device: str, runtime: Sequence[Path]) -> None:
        use_all_cores()  # before the runtime's thread pool starts, which reads the count once
        self._ffi = open_runtime(tuple(runtime))
        try:
            self._module = self._ffi.load_module(str(library))
        except Exception as error:  # the FFI raises its own error types for bad libraries
            raise ArtifactError(f"{library}: cannot load the TVM library: {error}") from None
        self._entry = entry
        self._device = device
        self._copies = None if device == "cpu" else DeviceCopies(self._ffi, device)
        self._local = threading.local()

    def run(self, inputs: list[Any]) -> list[np.ndarray]:
        """Run the entry function on this thread's VM; `inputs` are NumPy arrays or CPU DLPack
        producers (see `inputs.for_tvm`); outputs are flattened in manifest order."""
        function = self._thread_function()
        result = function(*[self._to_device(value) for value in inputs])
        return [self._to_numpy(tensor) for tensor in _flatten(result, self._ffi.Tensor)]

    def _thread_function(self) -> Any:
        function = getattr(self._local, "function", None)
        if function is None:
            vm = self._module["vm_load_executable"]()
            init_args = [_DEVICE_TYPES[self._device], 0, _POOLED_ALLOCATOR]
            if self._device != "cpu":
                init_args += [_DEVICE_TYPES["cpu"], 0, _POOLED_ALLOCATOR]  # for shape functions
            vm["vm_initialization"](*init_args)
            self._local.vm = vm
            function = self._local.function = vm[self._entry]
        return function

    def _to_device(self, value: Any) -> Any:
        if self._copies is None:
            return self._ffi.from_dlpack(value)
        return self._copies.to_device(np.asarray(value))

    def _to_numpy(self, tensor: Any) -> np.ndarray:
        if self._copies is None:
            return np.from_dlpack(tensor)
        return self._copies.to_numpy(tensor)


class DeviceCopies:
    """Synchronous copies between NumPy and device memory with the runtime's registered
    functions (what `tvm.runtime.tensor` and `Tensor.numpy` call), so that no `tvm` is needed."""

    def __init__(self, ffi: Any, device: str) -> None:
        self._ffi = ffi
        self._device = ffi.device(device, 0)
        self._alloc = ffi.get_global_func("runtime.TVMTensorAllocWithScope")
        self._from_bytes = ffi.get_global_func("runtime.TVMTensorCopyFromBytes")
        self._to_bytes = ffi.get_global_func("runtime.TVMTensorCopyToBytes")

    def to_device(self, array: np.ndarray) -> Any:
        """A new device tensor holding `array`."""
        array = np.ascontiguousarray(array)
        tensor = self._alloc(self._ffi.Shape(array.shape), self._ffi.dtype(str(array.dtype)),
                             self._device, None)
        self._from_bytes(tensor, array.ctypes.data_as(ctypes.c_void_p), array.nbytes)
        return tensor

    def to_numpy(self, tensor: Any) -> np.ndarray:
        """A new NumPy array holding the device tensor (the copy waits for the device)."""
        array = np.empty(tuple(tensor.shape), dtype=str(tensor.dtype))
        self._to_bytes(tensor, array.ctypes.data_as(ctypes.c_void_p), array.nbytes)
        return array


def _flatten(result: Any, tensor_type: type) -> list[Any]:
    """The VM returns a tensor or a (possibly nested) tuple of tensors."""
    if isinstance(result, tensor_type):
        return [result]
    return [tensor for item in result for tensor in _flatten(item, tensor_type)]
