"""Load compiled artifacts and run them without TensorFlow (`tfcheck.load`).

Loading pulls in NumPy and, when the first library is loaded, ctypes plus the TVM C++ runtime
libraries (`libtvm_ffi.so` driven by `ffi.py`): never TensorFlow, `tvm`, `tvm_ffi` or
`tfcheck.compiler`. Importing this package itself pulls in
nothing: `tfcheck ls` and `tfcheck clean` read `tfcheck.runtime.manifest` in a linter-only install,
which has no NumPy.
"""

from __future__ import annotations

import importlib
from typing import Any

from tfcheck.runtime.errors import ArtifactError, InputError, NotCompiledError

_LAZY = {"CompiledFunction": "tfcheck.runtime.library", "Library": "tfcheck.runtime.library",
         "load": "tfcheck.runtime.library"}

__all__ = ["ArtifactError", "CompiledFunction", "InputError", "Library", "NotCompiledError", "load"]


def __getattr__(name: str) -> Any:
    """Import the loader (and NumPy) on first use of `load`, `Library` or `CompiledFunction`."""
    if name not in _LAZY:
        raise AttributeError(f"module 'tfcheck.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
