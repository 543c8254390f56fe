"""Running an exported TVM Relax executable with the smallest possible import cost.

`import tvm` costs about a second because it loads the compiler's Python side, and `import tvm_ffi`
about 0.1-0.25 s. Running an exported library needs neither: the C++ runtime libraries the
artifact was built against (`libtvm_ffi.so`, `libtvm_runtime.so`, and `libtvm_runtime_cuda.so` for
CUDA), found and opened by `bundled`, driven through `ffi` (ctypes over TVM-FFI's C ABI). Data
moves to and from a GPU through the runtime's own global functions, so CUDA artifacts need no
`tvm` either.

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
from tfcheck.runtime.ffi import FFI, DLDevice, Function, Tensor
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
        except ArtifactError as error:
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
        return [self._to_numpy(tensor) for tensor in _flatten(result)]

    def _thread_function(self) -> Function:
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
        """A CPU input as it is (the call passes it over DLPack), or a copy on the device."""
        if self._copies is None:
            return value
        return self._copies.to_device(np.asarray(value))

    def _to_numpy(self, tensor: Tensor) -> np.ndarray:
        """A CPU output in place (the array keeps the tensor alive), or a copy from the device."""
        if self._copies is None:
            return np.asarray(tensor)
        return self._copies.to_numpy(tensor)


class DeviceCopies:
    """Synchronous copies between NumPy and device memory with the runtime's registered
    functions (what `tvm.runtime.tensor` and `Tensor.numpy` call), so that no `tvm` is needed."""

    def __init__(self, ffi: FFI, device: str) -> None:
        self._ffi = ffi
        self._device = DLDevice(_DEVICE_TYPES[device], 0)
        self._alloc = ffi.get_global_func("runtime.TVMTensorAllocWithScope")
        self._from_bytes = ffi.get_global_func("runtime.TVMTensorCopyFromBytes")
        self._to_bytes = ffi.get_global_func("runtime.TVMTensorCopyToBytes")

    def to_device(self, array: np.ndarray) -> Tensor:
        """A new device tensor holding `array`."""
        array = np.ascontiguousarray(array)
        shape = self._ffi.get_global_func("ffi.Shape")(*(int(dim) for dim in array.shape))
        tensor = self._alloc(shape, self._ffi.dtype(str(array.dtype)), self._device, None)
        self._from_bytes(tensor, ctypes.c_void_p(array.ctypes.data), array.nbytes)
        return tensor

    def to_numpy(self, tensor: Tensor) -> np.ndarray:
        """A new NumPy array holding the device tensor (the copy waits for the device)."""
        array = np.empty(tensor.shape, dtype=tensor.typestr)
        self._to_bytes(tensor, ctypes.c_void_p(array.ctypes.data), array.nbytes)
        return array


def _flatten(result: Any) -> list[Tensor]:
    """The VM returns a tensor or a (possibly nested) tuple of tensors (a list here)."""
    if isinstance(result, Tensor):
        return [result]
    if not isinstance(result, list):
        raise ArtifactError(f"the library returned a {type(result).__name__}, not tensors")
    return [tensor for item in result for tensor in _flatten(item)]
