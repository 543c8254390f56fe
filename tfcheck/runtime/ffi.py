"""A ctypes binding of TVM-FFI's stable C ABI (`tvm/ffi/c_api.h`), just what the runtime needs.

The `apache-tvm-ffi` wheel is 12 MB installed (a Cython core, headers, third-party sources, a
testing library), of which running an artifact needs `libtvm_ffi.so` (2.5 MB) alone; that library
is bundled with every exported folder (`bundled.py`) and driven from here: load a module from a
file, get a module's function or a global function by name, call it with ints, strings, pointers,
devices, data types, objects and DLPack producers (NumPy arrays, zero-copy), and get back tensors or
(nested) arrays of them. A tensor's memory is read zero-copy through `__array_interface__`, so
`np.asarray(tensor)` keeps the owning object alive as the array's base.

A call through ctypes costs what Python does around it, so the hot path makes little per call: a
`Call` keeps its argument array and result slot, and a `LentTensor` is one Tensor per argument
that is pointed at each call's memory instead of a new Tensor made and released per call.

Every object handle this module receives is owned by a Python `Object` and released with
`TVMFFIObjectDecRef` when that is collected, and every temporary made for a call is released
after it. An error raised on the C side becomes an `ArtifactError` with its kind and message.
ctypes releases the GIL around each C call, so calls on different VMs run in parallel.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tfcheck.runtime.errors import ArtifactError

ABI_VERSION = (0, 1)  # the c_api.h major.minor whose layouts this module mirrors

# TVMFFITypeIndex values (c_api.h)
_NONE, _INT, _BOOL, _FLOAT, _OPAQUE_PTR = 0, 1, 2, 3, 4
_DATA_TYPE, _DEVICE, _RAW_STR = 5, 6, 8
_STATIC_OBJECT_BEGIN, _FUNCTION, _TENSOR, _ARRAY, _MODULE = 64, 68, 70, 71, 73
_OBJECT_HEADER = 24  # sizeof(TVMFFIObject): ref counts, type index, padding, deleter
_TYPE_INDEX_OFFSET = 8
_USED_DLTENSOR = b"used_dltensor"  # a module constant: a capsule keeps the pointer to its name
_NUMPY_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}  # DLDataTypeCode -> array-interface kind
_CPU = 1  # kDLCPU
_STRONG_COUNT = 0xFFFFFFFF  # the lower half of TVMFFIObject.combined_ref_count
# A DLTensor read in one go: data, device type and id, ndim, dtype code, bits and lanes, shape,
# strides, byte_offset (48 bytes; the same layout as the DLTensor structure below).
_DLTENSOR_LAYOUT = struct.Struct("=QiiiBBHQQQ")
_DLTENSOR_BYTES = ctypes.c_char * _DLTENSOR_LAYOUT.size


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Value(ctypes.Union):
    _fields_ = [("v_int64", ctypes.c_int64), ("v_float64", ctypes.c_double),
                ("v_ptr", ctypes.c_void_p), ("v_dtype", DLDataType), ("v_device", DLDevice)]


class _ManagedTensor(ctypes.Structure):  # DLManagedTensor
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class TVMFFIAny(ctypes.Structure):
    _fields_ = [("type_index", ctypes.c_int32), ("small_len", ctypes.c_uint32), ("value", _Value)]


class _ByteArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]

    def text(self) -> str:
        return ctypes.string_at(self.data, self.size).decode("utf-8", "replace") if self.size else ""


class _ErrorCell(ctypes.Structure):  # the head of TVMFFIErrorCell
    _fields_ = [("kind", _ByteArray), ("message", _ByteArray), ("backtrace", _ByteArray)]


class _SeqCell(ctypes.Structure):  # the head of TVMFFISeqCell: Array elements are TVMFFIAny
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_int64)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("patch", ctypes.c_uint32)]


_HANDLE = ctypes.c_void_p
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "TVMFFIGetVersion": (None, [ctypes.POINTER(_Version)]),
    "TVMFFIObjectIncRef": (ctypes.c_int, [_HANDLE]),
    "TVMFFIObjectDecRef": (ctypes.c_int, [_HANDLE]),
    "TVMFFIFunctionGetGlobal": (ctypes.c_int, [ctypes.POINTER(_ByteArray), ctypes.POINTER(_HANDLE)]),
    "TVMFFIFunctionCall": (ctypes.c_int, [_HANDLE, ctypes.POINTER(TVMFFIAny), ctypes.c_int32,
                                          ctypes.POINTER(TVMFFIAny)]),
    "TVMFFIErrorMoveFromRaised": (None, [ctypes.POINTER(_HANDLE)]),
    "TVMFFITensorFromDLPack": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                                              ctypes.POINTER(_HANDLE)]),
    "TVMFFIDataTypeFromString": (ctypes.c_int, [ctypes.POINTER(_ByteArray), ctypes.POINTER(DLDataType)]),
}


class FFI:
    """One opened `libtvm_ffi.so` (RTLD_GLOBAL: the TVM runtime libraries opened after it link
    against this copy by its soname)."""

    def __init__(self, path: Path) -> None:
        try:
            self._lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            raise ArtifactError(f"{path}: cannot open the TVM runtime: {error}") from None
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(self._lib, name)
            function.restype, function.argtypes = restype, argtypes
        version = _Version()
        self._lib.TVMFFIGetVersion(ctypes.byref(version))
        if (version.major, version.minor) != ABI_VERSION:
            raise ArtifactError(f"{path}: TVM-FFI {version.major}.{version.minor}.{version.patch}; "
                                f"this tfcheck speaks the C ABI of {ABI_VERSION[0]}.{ABI_VERSION[1]}")
        self._capsule_pointer = _capsule_api()
        self._globals: dict[str, Function] = {}
        self.release = self._lib.TVMFFIObjectDecRef  # release(handle): one reference less
        # TVMFFIFunctionCall without argtypes, for callers that pass ctypes objects made once
        # (`Call`): converting four Python values on every call costs a quarter of the call.
        self.call_prepared = self._lib["TVMFFIFunctionCall"]
        self.call_prepared.restype = ctypes.c_int

    def get_global_func(self, name: str) -> Function:
        """The registered global function `name` (ArtifactError when there is none)."""
        function = self._globals.get(name)
        if function is None:
            encoded = name.encode()
            handle = _HANDLE()
            self._check(self._lib.TVMFFIFunctionGetGlobal(
                ctypes.byref(_ByteArray(ctypes.cast(encoded, ctypes.c_void_p), len(encoded))),
                ctypes.byref(handle)))
            if not handle.value:
                raise ArtifactError(f"the TVM runtime has no global function {name!r}")
            function = self._globals[name] = Function(self, handle.value)
        return function

    def load_module(self, path: str) -> Module:
        """The module in the library file `path`, kept loaded for the life of the process (what
        `tvm_ffi.load_module` does: its functions must never outlive its code)."""
        module = self.get_global_func("ffi.ModuleLoadFromFile")(path)
        self.get_global_func("ffi.ModuleGlobalsAdd")(module)
        return module

    def dtype(self, name: str) -> DLDataType:
        """`float32`, `int64`, `bool`, ... as a DLDataType."""
        encoded, dtype = name.encode(), DLDataType()
        self._check(self._lib.TVMFFIDataTypeFromString(
            ctypes.byref(_ByteArray(ctypes.cast(encoded, ctypes.c_void_p), len(encoded))),
            ctypes.byref(dtype)))
        return dtype

    def from_dlpack(self, producer: Any) -> Tensor:
        """A Tensor over the memory of a CPU DLPack producer (a NumPy array), without a copy: the
        capsule's DLManagedTensor is handed to TVM, which calls its deleter when it is done."""
        capsule = producer.__dlpack__()
        get_pointer, set_name, set_destructor = self._capsule_pointer
        managed = get_pointer(capsule, b"dltensor")
        handle = _HANDLE()
        self._check(self._lib.TVMFFITensorFromDLPack(managed, 0, 1, ctypes.byref(handle)))
        set_destructor(capsule, None)  # consumed: the producer's memory is now TVM's to release
        set_name(capsule, _USED_DLTENSOR)
        return Tensor(self, handle.value)

    def call(self, handle: int, args: tuple[Any, ...]) -> Any:
        """Call the function object `handle`; temporaries made for the arguments are released
        after the call, the result is owned by the value returned."""
        packed = (TVMFFIAny * len(args))()
        keep: list[Any] = []  # Python objects whose memory an argument points to
        for slot, arg in zip(packed, args):
            self._pack(slot, arg, keep)
        result = TVMFFIAny()  # kTVMFFINone, as the callee expects
        code = self._lib.TVMFFIFunctionCall(handle, packed, len(args), ctypes.byref(result))
        del keep  # DLPack temporaries: their Tensors release their references now
        self._check(code)
        return self._take(result)

    def _pack(self, slot: TVMFFIAny, arg: Any, keep: list[Any]) -> None:
        """Write one argument as a TVMFFIAny view (borrowed: the caller keeps it alive)."""
        if hasattr(arg, "__dlpack__") and not isinstance(arg, Object):
            arg = self.from_dlpack(arg)
            keep.append(arg)
        if isinstance(arg, Object):
            slot.type_index, slot.value.v_ptr = arg.type_index, arg.handle
        elif arg is None:
            slot.type_index = _NONE
        elif isinstance(arg, bool):
            slot.type_index, slot.value.v_int64 = _BOOL, int(arg)
        elif isinstance(arg, int):
            slot.type_index, slot.value.v_int64 = _INT, arg
        elif isinstance(arg, float):
            slot.type_index, slot.value.v_float64 = _FLOAT, arg
        elif isinstance(arg, str):
            encoded = ctypes.c_char_p(arg.encode())
            keep.append(encoded)
            slot.type_index, slot.value.v_ptr = _RAW_STR, ctypes.cast(encoded, ctypes.c_void_p).value
        elif isinstance(arg, ctypes.c_void_p):
            slot.type_index, slot.value.v_ptr = _OPAQUE_PTR, arg.value
        elif isinstance(arg, DLDevice):
            slot.type_index, slot.value.v_device = _DEVICE, arg
        elif isinstance(arg, DLDataType):
            slot.type_index, slot.value.v_dtype = _DATA_TYPE, arg
        else:
            raise TypeError(f"cannot pass a {type(arg).__name__} to a TVM function")

    def _take(self, result: TVMFFIAny) -> Any:
        """An owned result as Python: None, a number, an Object, or a list for an Array."""
        index = result.type_index
        if index == _ARRAY:
            return self._elements(Object(self, result.value.v_ptr))
        if index >= _STATIC_OBJECT_BEGIN:
            return _CLASSES.get(index, Object)(self, result.value.v_ptr)
        if index == _NONE:
            return None
        if index in (_INT, _BOOL):
            return bool(result.value.v_int64) if index == _BOOL else result.value.v_int64
        if index == _FLOAT:
            return result.value.v_float64
        raise ArtifactError(f"a TVM function returned a value of type index {index}, which "
                            "tfcheck's runtime does not read")

    def _elements(self, array: Object) -> list[Any]:
        """The elements of an Array object, each object taking a reference of its own."""
        cell = _SeqCell.from_address(array.handle + _OBJECT_HEADER)
        elements = (TVMFFIAny * cell.size).from_address(cell.data) if cell.size else ()
        items = []
        for element in elements:
            if element.type_index >= _STATIC_OBJECT_BEGIN:
                self._lib.TVMFFIObjectIncRef(element.value.v_ptr)
            items.append(self._take(element))
        return items

    def _check(self, code: int) -> None:
        """Raise the error the C side raised (kind: message) when `code` is not 0."""
        if code == 0:
            return
        handle = _HANDLE()
        self._lib.TVMFFIErrorMoveFromRaised(ctypes.byref(handle))
        if not handle.value:
            raise ArtifactError(f"the TVM runtime failed (code {code}) without an error")
        error = Object(self, handle.value)
        cell = _ErrorCell.from_address(error.handle + _OBJECT_HEADER)
        raise ArtifactError(f"{cell.kind.text()}: {cell.message.text()}")


def _capsule_api() -> tuple[Any, Any, Any]:
    """PyCapsule_GetPointer, PyCapsule_SetName and PyCapsule_SetDestructor, typed."""
    api = ctypes.pythonapi
    get_pointer, set_name, set_destructor = (api.PyCapsule_GetPointer, api.PyCapsule_SetName,
                                             api.PyCapsule_SetDestructor)
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    set_name.restype, set_name.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
    set_destructor.restype, set_destructor.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_void_p]
    return get_pointer, set_name, set_destructor


class Object:
    """An owned reference to a TVM-FFI object, released when this is collected."""

    __slots__ = ("_ffi", "handle")

    def __init__(self, ffi: FFI, handle: int) -> None:
        self._ffi = ffi
        self.handle = handle

    @property
    def type_index(self) -> int:
        return ctypes.c_int32.from_address(self.handle + _TYPE_INDEX_OFFSET).value

    def __del__(self) -> None:
        self._ffi.release(self.handle)


class Function(Object):
    """A TVM-FFI function object."""

    __slots__ = ()

    def __call__(self, *args: Any) -> Any:
        return self._ffi.call(self.handle, args)


class Module(Object):
    """A TVM-FFI module: `module["name"]` is its function `name`."""

    __slots__ = ()

    def __getitem__(self, name: str) -> Function:
        function = self._ffi.get_global_func("ffi.ModuleGetFunction")(self, name, False)
        if not isinstance(function, Function):
            raise ArtifactError(f"the TVM module has no function {name!r}")
        return function


class Tensor(Object):
    """A TVM-FFI tensor; `np.asarray(tensor)` reads CPU memory in place, keeping this alive."""

    __slots__ = ()

    def _fields(self) -> tuple[int, ...]:
        """The DLTensor's fields (see `_DLTENSOR_LAYOUT`), read with one unpack."""
        return _DLTENSOR_LAYOUT.unpack_from(_DLTENSOR_BYTES.from_address(self.handle + _OBJECT_HEADER))

    @property
    def shape(self) -> tuple[int, ...]:
        fields = self._fields()
        return _int64_reader(fields[3])(fields[7])

    @property
    def device_type(self) -> int:
        return self._fields()[1]

    @property
    def typestr(self) -> str:
        """The NumPy array-interface type (`<f4`, `|b1`, ...); ArtifactError for types NumPy lacks."""
        fields = self._fields()
        return _typestr(*fields[4:7])

    @property
    def __array_interface__(self) -> dict[str, Any]:
        data, device, _, ndim, code, bits, lanes, shape, strides, offset = self._fields()
        if device != _CPU:
            raise ArtifactError("a device tensor cannot be read in place; copy it to the host")
        read = _int64_reader(ndim)
        dims = read(shape)
        steps = read(strides) if strides else None
        return {"version": 3, "shape": dims, "typestr": _typestr(code, bits, lanes), "data": (data + offset, False),
                "strides": None if steps is None or steps == _compact_strides(dims)
                else tuple(step * (bits // 8) for step in steps)}


@functools.cache
def _int64_reader(count: int) -> Callable[[int], tuple[int, ...]]:
    """Reads `count` int64 values at an address (a DLTensor's shape or strides) with one unpack."""
    layout = struct.Struct(f"={count}q")
    memory = ctypes.c_char * layout.size
    return lambda address: layout.unpack_from(memory.from_address(address))


@functools.lru_cache(maxsize=256)
def _compact_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides (in elements) of a C-contiguous tensor of `shape`, which NumPy need not be told."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


_TYPESTRS: dict[tuple[int, int, int], str] = {}


def _typestr(code: int, bits: int, lanes: int) -> str:
    """The array-interface type of a DLDataType (`<f4`), remembered per type."""
    typestr = _TYPESTRS.get((code, bits, lanes))
    if typestr is None:
        kind = _NUMPY_KINDS.get(code)
        if kind is None or lanes != 1 or bits % 8 or not bits:
            raise ArtifactError(f"a TVM tensor of type code {code}, {bits} bits, {lanes} lanes has no NumPy dtype")
        typestr = _TYPESTRS[(code, bits, lanes)] = f"{'|' if bits == 8 else '<'}{kind}{bits // 8}"
    return typestr


class LentTensor(Tensor):
    """A CPU Tensor over memory its caller owns and lends it for one call at a time.

    Made once for a data type and shape, then pointed at each call's memory with `lend` (a write
    into the Tensor's own DLTensor), where a Tensor made per call would cost two more C calls and
    their Python objects. Pointing it elsewhere is safe only while this is the Tensor's one
    reference, which `returned` checks after each call: when the runtime kept a reference (a
    function that returns its input), the Tensor is set aside with the memory's owner until the
    runtime lets go (`release_kept`), and the caller makes a new one. The DLManagedTensor has no
    deleter: the memory is never the runtime's to free.
    """

    __slots__ = ("_managed", "_dims", "_data", "_count")

    def __init__(self, ffi: FFI, handle: int, managed: _ManagedTensor, dims: ctypes.Array[ctypes.c_int64]) -> None:
        super().__init__(ffi, handle)
        self._managed, self._dims = managed, dims  # the Tensor points into both (dims: its shape)
        self._data = ctypes.c_void_p.from_address(handle + _OBJECT_HEADER)
        self._count = ctypes.c_uint64.from_address(handle)

    @classmethod
    def make(cls, ffi: FFI, dtype: tuple[int, int, int], shape: tuple[int, ...]) -> LentTensor:
        """A LentTensor of this DLDataType (code, bits, lanes) and shape, not yet lent anything."""
        dims = (ctypes.c_int64 * len(shape))(*shape)
        managed = _ManagedTensor()
        tensor = managed.dl_tensor
        tensor.device, tensor.ndim, tensor.dtype, tensor.shape = DLDevice(_CPU, 0), len(shape), DLDataType(*dtype), dims
        handle = _HANDLE()
        ffi._check(ffi._lib.TVMFFITensorFromDLPack(ctypes.byref(managed), 0, 0, ctypes.byref(handle)))
        return cls(ffi, handle.value, managed, dims)

    def lend(self, address: int) -> None:
        """Point the Tensor at the memory at `address` (the caller keeps it alive for the call)."""
        self._data.value = address

    def returned(self, owner: Any) -> bool:
        """After a call: whether this is the Tensor's one reference again, so that it may be lent
        again; if not, `owner` (of the memory lent) is kept alive with it until the runtime lets go."""
        if self.only_reference():
            return True
        with _kept_lock:
            _kept.append((self, owner))
        return False

    def only_reference(self) -> bool:
        return self._count.value & _STRONG_COUNT == 1


# Lent tensors the runtime still held after their call, with their memory's owners (see LentTensor).
_kept: list[tuple[LentTensor, Any]] = []
_kept_lock = threading.Lock()


def release_kept() -> None:
    """Let go of the kept lent tensors (and their memory) that the runtime no longer holds."""
    if _kept:  # unlocked: an entry kept meanwhile waits for the next call
        with _kept_lock:
            _kept[:] = [(tensor, owner) for tensor, owner in _kept if not tensor.only_reference()]


class Call:
    """One function called again and again from one thread (an instance is not thread-safe): the
    argument array and the result slot are made once, arguments are set when they change."""

    def __init__(self, function: Function, count: int) -> None:
        self._function = function  # alive as long as its handle is used
        self._ffi = function._ffi
        self._handle = ctypes.c_void_p(function.handle)
        self._count = ctypes.c_int32(count)
        self._args = (TVMFFIAny * count)()
        self._result = TVMFFIAny()
        self._result_ref = ctypes.byref(self._result)

    def __setitem__(self, index: int, value: Object) -> None:
        """Pass `value` as argument `index` from now on (borrowed: the caller keeps it alive)."""
        slot = self._args[index]
        slot.type_index, slot.value.v_ptr = value.type_index, value.handle

    def __call__(self) -> Any:
        """Call with the arguments set; the result as `FFI.call` returns it."""
        self._result.type_index = _NONE  # the previous result is owned by the objects made of it
        code = self._ffi.call_prepared(self._handle, self._args, self._count, self._result_ref)
        if code:
            self._ffi._check(code)
        return self._ffi._take(self._result)


_CLASSES: dict[int, type[Object]] = {_TENSOR: Tensor, _FUNCTION: Function, _MODULE: Module}
