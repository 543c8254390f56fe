"""Running an exported TVM Relax executable with the smallest possible import cost.

`import tvm` costs about a second because it loads the compiler's Python side. Running an exported
library needs none of it: `tvm_ffi` (about 0.25 s) plus the C++ runtime library `libtvm_runtime.so`
from the apache-tvm wheel, opened with RTLD_GLOBAL so the library's VM loader finds its symbols.
CUDA artifacts also need `libtvm_runtime_cuda.so`, and use `tvm` itself to move data to the GPU.

A Relax VM keeps per-call state (registers, frames), so one VM must not run two calls at once.
Each thread gets its own VM over the shared, read-only executable module: calls from many threads
run in parallel and never share a VM.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import threading
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.threads import use_all_cores

_DEVICE_TYPES = {"cpu": 1, "cuda": 2}
_POOLED_ALLOCATOR = 2


@functools.cache
def _runtime(device: str) -> Any:
    """Import tvm_ffi and open the TVM runtime libraries that `device` needs, once (after setting
    the thread count, which TVM reads when its thread pool starts)."""
    use_all_cores()
    import tvm_ffi

    spec = importlib.util.find_spec("tvm")
    if spec is None or not spec.submodule_search_locations:
        raise ArtifactError("apache-tvm is not installed: `pip install tfcheck[runtime]`")
    lib_dir = Path(spec.submodule_search_locations[0]) / "lib"
    names = ["libtvm_runtime.so"] + (["libtvm_runtime_cuda.so"] if device == "cuda" else [])
    for name in names:
        ctypes.CDLL(str(lib_dir / name), mode=ctypes.RTLD_GLOBAL)
    return tvm_ffi


class Executable:
    """One loaded library; `run` takes checked NumPy inputs and returns NumPy outputs."""

    def __init__(self, library: Path, entry: str, device: str) -> None:
        self._ffi = _runtime(device)
        try:
            self._module = self._ffi.load_module(str(library))
        except Exception as error:  # the FFI raises its own error types for bad libraries
            raise ArtifactError(f"{library}: cannot load the TVM library: {error}") from None
        self._entry = entry
        self._device = device
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
        if self._device == "cpu":
            return self._ffi.from_dlpack(value)
        import tvm

        return tvm.runtime.tensor(np.asarray(value), device=tvm.cuda(0))

    def _to_numpy(self, tensor: Any) -> np.ndarray:
        if self._device == "cpu":
            return np.from_dlpack(tensor)
        return tensor.numpy()


def _flatten(result: Any, tensor_type: type) -> list[Any]:
    """The VM returns a tensor or a (possibly nested) tuple of tensors."""
    if isinstance(result, tensor_type):
        return [result]
    return [tensor for item in result for tensor in _flatten(item, tensor_type)]
