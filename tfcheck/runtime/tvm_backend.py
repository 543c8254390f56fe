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

A call with NumPy arrays takes the binding's cheapest route (`ArrayCall`): per argument one
`LentTensor` pointed at the array's memory, the argument array and the result slot made once per
thread; per call little more than the C call itself is left in Python.

An artifact with a weights file (`runtime/weights.py`) has a `main` that takes its large constants
after the user's inputs: they are copied into runtime tensors once, when the library is loaded,
and every call passes the same tensors (set once in each thread's argument array), so a call costs
what it did with the constants inside the library.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.runtime.bundled import open_runtime
from tfcheck.runtime.errors import ArtifactError
from tfcheck.runtime.ffi import FFI, Call, DLDevice, Function, LentTensor, Tensor, release_kept
from tfcheck.runtime.inputs import as_array, lendable
from tfcheck.runtime.threads import use_all_cores

_DEVICE_TYPES = {"cpu": 1, "cuda": 2}
_POOLED_ALLOCATOR = 2
_DLPACK_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}  # NumPy kind -> DLDataTypeCode


class Executable:
    """One loaded library; `run` takes checked NumPy inputs and returns NumPy outputs."""

    def __init__(self, library: Path, entry: str, device: str, runtime: Sequence[Path],
                 weights: Iterable[np.ndarray] = ()) -> None:
        """`weights`: the values `entry` takes after the user's inputs, read one at a time."""
        use_all_cores()  # before the runtime's thread pool starts, which reads the count once
        self._ffi = open_runtime(tuple(runtime))
        try:
            self._module = self._ffi.load_module(str(library))
        except ArtifactError as error:
            raise ArtifactError(f"{library}: cannot load the TVM library: {error}") from None
        self._entry = entry
        self._device = device
        self._copies = None if device == "cpu" else DeviceCopies(self._ffi, device)
        # Runtime-allocated (aligned as the kernels assume), on the device, each NumPy value dropped once copied.
        copies = self._copies or DeviceCopies(self._ffi, "cpu")
        self._weights = tuple(copies.to_device(value) for value in weights)
        self._local = threading.local()

    def run(self, inputs: list[Any]) -> list[np.ndarray]:
        """Run the entry function on this thread's VM; `inputs` are NumPy arrays or CPU DLPack
        producers (see `inputs.for_tvm`); outputs are flattened in manifest order."""
        if self._copies is not None:
            result = self._thread_function()(*[self._copies.to_device(np.asarray(value)) for value in inputs],
                                             *self._weights)
            return [self._copies.to_numpy(tensor) for tensor in _flatten(result)]
        if all(type(value) is np.ndarray for value in inputs):
            result, kept = self._thread_array_call(len(inputs))(inputs)
        else:  # DLPack producers (a TensorFlow tensor), passed over DLPack as they are
            result, kept = self._thread_function()(*inputs, *self._weights), True
        outputs = [np.asarray(tensor) for tensor in _flatten(result)]  # in place, keeping the tensor alive
        return _not_aliasing(outputs, inputs) if kept else outputs

    def _thread_array_call(self, count: int) -> ArrayCall:
        array_call = getattr(self._local, "array_call", None)
        if array_call is None or array_call.count != count:
            array_call = self._local.array_call = ArrayCall(self._ffi, self._thread_function(), count, self._weights)
        return array_call

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


class ArrayCall:
    """One thread's calls of a function with NumPy arrays on the CPU: each argument a
    `LentTensor`, made again only when the argument's dtype or shape changes (or when the runtime
    kept the last one), pointed at the array's memory for the call; the `weights` after them, set
    once (borrowed from the `Executable`, which outlives its calls)."""

    def __init__(self, ffi: FFI, function: Function, count: int, weights: Sequence[Tensor] = ()) -> None:
        self._ffi = ffi
        self._call = Call(function, count + len(weights))
        for index, weight in enumerate(weights, start=count):
            self._call[index] = weight
        self.count = count
        self._tensors: list[LentTensor | None] = [None] * count
        self._kinds: list[tuple[Any, ...] | None] = [None] * count  # (dtype, shape) of each tensor

    def __call__(self, arrays: Sequence[np.ndarray]) -> tuple[Any, bool]:
        """Call with `arrays`, which this keeps alive for the call (the runtime reads them in
        place); the result as `Function` returns it, and whether the runtime kept a reference to
        an input's tensor (so that an output may be, or view, an input)."""
        tensors, kinds, lent = self._tensors, self._kinds, []
        for index, given in enumerate(arrays):
            array, address = lendable(given)
            lent.append(array)
            kind = (array.dtype, array.shape)
            if kinds[index] != kind:
                self._new_tensor(index, kind)
            tensors[index].lend(address)  # type: ignore[union-attr]
        try:
            result = self._call()
        finally:
            kept = False
            for index, array in enumerate(lent):
                if not tensors[index].returned(array):  # type: ignore[union-attr]
                    tensors[index] = kinds[index] = None
                    kept = True
            release_kept()
        return result, kept

    def _new_tensor(self, index: int, kind: tuple[np.dtype, tuple[int, ...]]) -> None:
        """Argument `index`'s tensor for arrays of this (dtype, shape)."""
        dtype, shape = kind
        tensor = self._tensors[index] = LentTensor.make(self._ffi, _dlpack_dtype(dtype), shape)
        self._kinds[index] = kind
        self._call[index] = tensor


def _not_aliasing(outputs: list[np.ndarray], inputs: Sequence[Any]) -> list[np.ndarray]:
    """`outputs`, each that may share memory with an input copied: a function that returns its
    input (or a view of it) must not hand the caller's own array back, which the caller may
    overwrite after the call (a reused input buffer) and so change the earlier result."""
    arrays = [value for value in inputs if isinstance(value, np.ndarray)]
    arrays += [as_array(value) for value in inputs if not isinstance(value, np.ndarray)]
    return [output.copy() if any(np.may_share_memory(output, array) for array in arrays) else output
            for output in outputs]


def _dlpack_dtype(dtype: np.dtype) -> tuple[int, int, int]:
    """A NumPy dtype as DLDataType (code, bits, lanes)."""
    code = _DLPACK_CODES.get(dtype.kind)
    if code is None:
        raise ArtifactError(f"a {dtype} array cannot be passed to a TVM function")
    return code, dtype.itemsize * 8, 1


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
