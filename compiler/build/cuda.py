"""Exporting CUDA artifacts with compiled device code (a fatbin for the requested arch).

TVM 0.27 keeps the CUDA module as *source* (format `cuda`) whenever its CUDA runtime library
cannot be loaded at build time, which is the case on any machine without an NVIDIA driver, and
then compiles that source with NVRTC or nvcc when the artifact is loaded. A deployable artifact
should not need a CUDA compiler where it runs, so the export compiles each CUDA module's source
with `nvcc --fatbin` for the requested arch (SASS for it, plus PTX for newer GPUs) and swaps the
binary in while the imported modules are packed into the library.

The packed blob is TVM's module serialization: `u64 total`, then per module a length-prefixed
kind, and for a device module `u64 payload_length` followed by its payload, which for a CUDA
module is `fmt, function map, data` with `data` (the source, here) last. Only `fmt`, `data` and the
two lengths change; a blob that does not have this shape raises instead of being guessed at.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

from tfcheck.compiler.process.messages import DeviceCode, FatbinEntry

_U64 = struct.Struct("<Q")
_C_BYTE = re.compile(rb"0x([0-9a-f]{2})")
FATBIN_MAGIC = b"\x50\xed\x55\xba"


class CudaExportError(RuntimeError):
    """nvcc is missing or failed, or the packed module blob is not in the expected shape."""


def _string(value: bytes) -> bytes:
    return _U64.pack(len(value)) + value


def cuda_modules(module: Any) -> list[Any]:
    """Every imported module of kind `cuda`, depth first."""
    found = []
    for child in module.imports:
        if child.kind == "cuda":
            found.append(child)
        found.extend(cuda_modules(child))
    return found


def nvcc_fatbin(source: str, arch: str, work_dir: Path) -> bytes:
    """Compile CUDA source into a fatbin holding SASS for `arch` and PTX for later GPUs."""
    nvcc = shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_PATH", "/usr/local/cuda"), "bin", "nvcc")
    if not os.path.exists(nvcc):
        raise CudaExportError("a CUDA build needs nvcc (the CUDA toolkit) on PATH or in $CUDA_PATH")
    compute = "compute_" + arch.removeprefix("sm_")
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    source_path = work_dir / f"device-{digest}.cu"
    output_path = work_dir / f"device-{digest}.fatbin"
    source_path.write_text(source, encoding="utf-8")
    command = [nvcc, "--fatbin", "-O3", f"-gencode=arch={compute},code=[{arch},{compute}]",
               "-o", str(output_path), str(source_path)]
    process = subprocess.run(command, capture_output=True, text=True, check=False)
    if process.returncode != 0:
        raise CudaExportError(f"nvcc failed for {arch}:\n{process.stderr.strip()[-3000:]}")
    return output_path.read_bytes()


def swap_source_for_binary(blob: bytes, source: bytes, binary: bytes) -> bytes:
    """Replace one CUDA module's source payload by `binary` (format `fatbin`) in a packed blob."""
    header = _string(b"cuda")
    data = _string(source)
    start = blob.find(header)
    while start != -1:
        payload_at = start + len(header) + _U64.size
        (payload_length,) = _U64.unpack_from(blob, start + len(header))
        payload = blob[payload_at:payload_at + payload_length]
        if payload.startswith(_string(b"cuda")) and payload.endswith(data):
            new_payload = _string(b"fatbin") + payload[len(_string(b"cuda")):-len(data)] + _string(binary)
            rebuilt = blob[:start + len(header)] + _U64.pack(len(new_payload)) + new_payload \
                + blob[payload_at + payload_length:]
            return _U64.pack(len(rebuilt) - _U64.size) + rebuilt[_U64.size:]
        start = blob.find(header, start + 1)
    raise CudaExportError("the packed library has no CUDA source module in the expected layout")


def _blob_from_c(text: str) -> bytes:
    """The bytes of the `__tvm_ffi__library_bin` array in the C file TVM generates."""
    body = text[text.index("= {") + 3:text.rindex("};")]
    return bytes(int(match, 16) for match in _C_BYTE.findall(body.encode()))


def _c_from_blob(text: str, blob: bytes) -> str:
    """The same C file with the array's contents and length replaced."""
    head = text[:text.index("__tvm_ffi__library_bin[", text.index("const unsigned char"))]
    tail = text[text.rindex("};") + 2:]
    rows = ",\n  ".join(",".join(f"0x{b:02x}" for b in blob[i:i + 20]) for i in range(0, len(blob), 20))
    return f"{head}__tvm_ffi__library_bin[{len(blob)}] = {{\n  {rows},\n}};{tail}"


def export_cuda_library(executable: Any, library: Path, arch: str, work_dir: Path) -> DeviceCode:
    """Export `executable` to `library` with every CUDA module compiled to a fatbin for `arch`.

    Returns what the manifest records about the device code. Modules that TVM already compiled
    (format other than source, e.g. on a machine with a driver) are left as they are.
    """
    from tvm.runtime import _ffi_api

    swaps = []
    for module in cuda_modules(executable.mod):
        source = module.inspect_source("")
        if "__global__" in source:
            swaps.append((source.encode(), nvcc_fatbin(source, arch, work_dir)))

    def pack_imports(mod: Any, is_system_lib: bool, prefix: str, workspace_dir: str) -> str:
        text = _ffi_api.ModulePackImportsToC(mod, is_system_lib, prefix)
        blob = _blob_from_c(text)
        for source, binary in swaps:
            blob = swap_source_for_binary(blob, source, binary)
        path = os.path.join(workspace_dir, f"{prefix}devc.c")
        Path(path).write_text(_c_from_blob(text, blob), encoding="utf-8")
        return path

    executable.export_library(str(library), fpack_imports=pack_imports)
    embedded = fatbins_in(library)
    if len(embedded) < len(swaps):
        raise CudaExportError(f"{library} holds {len(embedded)} fatbins, {len(swaps)} were packed")
    return DeviceCode("fatbin" if swaps else "tvm", arch, [hashlib.sha256(binary).hexdigest() for binary in embedded],
                      [entry for binary in embedded for entry in fatbin_entries(binary)])


def fatbins_in(library: Path) -> list[bytes]:
    """The fatbins embedded in a library file (found by magic and their own size header)."""
    data = library.read_bytes()
    found = []
    start = data.find(FATBIN_MAGIC)
    while start != -1:
        header_size = struct.unpack_from("<H", data, start + 6)[0]
        body_size = struct.unpack_from("<Q", data, start + 8)[0]
        found.append(data[start:start + header_size + body_size])
        start = data.find(FATBIN_MAGIC, start + header_size + body_size)
    return found


def fatbin_entries(fatbin: bytes) -> list[FatbinEntry]:
    """What a fatbin holds: `cubin` entries (machine code, for `sm_90`) or `ptx` (for
    `compute_90`), read from its entry headers (kind u16, header size
    u32 at 4, payload size u64 at 8, SM version u32 at 28)."""
    header_size = struct.unpack_from("<H", fatbin, 6)[0]
    offset, end = header_size, len(fatbin)
    entries = []
    while offset + 32 <= end:
        kind, entry_header, payload = struct.unpack_from("<H2xIQ", fatbin, offset)
        sm_version = struct.unpack_from("<I", fatbin, offset + 28)[0]
        if entry_header == 0:
            break
        name = {1: "ptx", 2: "cubin"}.get(kind, f"kind{kind}")
        entries.append(FatbinEntry(name, f"{'compute' if name == 'ptx' else 'sm'}_{sm_version}"))
        offset += entry_header + payload
    return entries
