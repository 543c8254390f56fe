"""Load compiled artifacts and run them without TensorFlow (`tfcheck.load`).

Importing this package pulls in NumPy and, when the first library is loaded, `tvm_ffi` plus the
TVM C++ runtime: never TensorFlow, `tvm` (the compiler) or `tfcheck.compiler`.
"""

from __future__ import annotations

from tfcheck.runtime.errors import ArtifactError, InputError, NotCompiledError
from tfcheck.runtime.library import CompiledFunction, Library, load

__all__ = ["ArtifactError", "CompiledFunction", "InputError", "Library", "NotCompiledError", "load"]
