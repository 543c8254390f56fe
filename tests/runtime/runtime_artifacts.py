"""Artifacts for the runtime tests, made with TVM directly (no TensorFlow, no `tfcheck build`).

Each is a small Relax module exported with `export_library` plus a manifest written exactly as
docs/artifact-format.md describes, so these tests pin the format from the runtime's side.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
from pathlib import Path
from typing import Any

HOST_TARGET = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "x86-64", "num-cores": 2}


_BODIES = {
    "addmul": ("x: {t}, y: {t}", "s = R.add(x, y)\n            p = R.multiply(s, x)\n"
               "            out = (p, s)"),
    "scale": ("x: {t}", "d = R.multiply(x, R.const(2.0, 'float32'))\n"
              "            out = R.add(d, R.const(1.0, 'float32'))"),
    "pair": ("x: {t}", "a = R.add(x, x)\n            b = R.multiply(x, x)\n            out = (a, b)"),
    "echo": ("x: {t}", "d = R.add(x, x)\n            out = (x, d)"),
}


def _relax_module(kind: str, shape: tuple[int, ...]) -> Any:
    """`addmul`: (x, y) -> {"prod": (x + y) * x, "sum": x + y}; `scale`: x -> x * 2 + 1;
    `pair`: int32 x -> (x + x, x * x); `echo`: x -> (x itself, x + x)."""
    from tvm.script import from_source

    dtype = "int32" if kind == "pair" else "float32"
    params, body = _BODIES[kind]
    tensor = f"R.Tensor({tuple(shape)!r}, {dtype!r})"
    source = (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        f"    def main({params.format(t=tensor)}):\n        with R.dataflow():\n"
        f"            {body}\n            R.output(out)\n        return out\n"
    )
    return from_source(source)


def runtime_record(device: str = "cpu") -> dict[str, Any]:
    """The `runtime` record for the installed apache-tvm and apache-tvm-ffi wheels' libraries."""
    lib_dir = Path(importlib.util.find_spec("tvm").submodule_search_locations[0]) / "lib"
    ffi_dir = Path(importlib.util.find_spec("tvm_ffi").submodule_search_locations[0]) / "lib"
    paths = [ffi_dir / "libtvm_ffi.so", lib_dir / "libtvm_runtime.so", lib_dir / "libtvm_runtime_extra.so"]
    paths += [lib_dir / "libtvm_runtime_cuda.so"] if device == "cuda" else []
    libraries = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}
    tvm = importlib.metadata.version("apache-tvm")
    shared = hashlib.sha256((libraries["libtvm_ffi.so"] + libraries["libtvm_runtime.so"]).encode())
    return {"tag": f"tvm-{tvm}-{shared.hexdigest()[:12]}", "tvm": tvm,
            "tvm_ffi": importlib.metadata.version("apache-tvm-ffi"), "libraries": libraries}


def _manifest(kind: str, shape: tuple[int, ...], sha: str) -> dict[str, Any]:
    dtype = "int32" if kind == "pair" else "float32"
    names = ["x", "y"] if kind == "addmul" else ["x"]
    outputs = 2 if kind in ("addmul", "pair", "echo") else 1
    structure = {"addmul": {"kind": "dict", "keys": ["prod", "sum"]}, "pair": {"kind": "tuple", "length": 2},
                 "echo": {"kind": "tuple", "length": 2}, "scale": {"kind": "tensor"}}[kind]
    return {
        "format_version": 1,
        "key": hashlib.sha256(f"{kind}{shape}".encode()).hexdigest(),
        "function": kind,
        "qualname": f"demo.models.{kind}",
        "module": "demo.models",
        "source_file": "demo/models.py",
        "source_fingerprint": "0" * 64,
        "captures_fingerprint": "0" * 64,
        "graph_fingerprint": "0" * 64,
        "inputs": [{"name": name, "shape": list(shape), "dtype": dtype} for name in names],
        "outputs": [{"name": f"output_{i}", "shape": list(shape), "dtype": dtype}
                    for i in range(outputs)],
        "output_structure": structure,
        "target": HOST_TARGET,
        "device": "cpu",
        "cpu_features": ["sse2"],
        "versions": {"tfcheck": "0.1.0", "tvm": "0.27.0", "tensorflow": "2.21.0"},
        "runtime": runtime_record(),
        "library": "lib.so",
        "library_sha256": sha,
        "entry": "main",
        "tuned": False,
        "verify": {"max_abs_error": 0.0, "max_rel_error": 0.0, "passed": True},
        "created": "2026-11-22T04:00:00Z",
    }


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def read_manifest(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "manifest.json").read_text(encoding="utf-8"))


def build_artifact(folder: Path, kind: str, shape: tuple[int, ...]) -> Path:
    """Compile `kind` for `shape` into `folder` (lib.so + manifest.json)."""
    import tvm

    folder.mkdir(parents=True)
    executable = tvm.compile(_relax_module(kind, shape), target=tvm.target.Target(HOST_TARGET))
    executable.export_library(str(folder / "lib.so"))
    sha = hashlib.sha256((folder / "lib.so").read_bytes()).hexdigest()
    write_manifest(folder, _manifest(kind, shape, sha))
    return folder
