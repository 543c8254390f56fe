"""Run an exported library on the tracing step's saved inputs as production runs it: in a process of
its own that imports neither TVM's Python package nor TensorFlow (`python -m
tfcheck.compiler.build.run_saved`), through the runtime's own loader and bundled libraries.

The compile child has TVM imported, and with it every function that TVM's Python package and its
compiler library register. A library that calls one (TVM runs `unique` and `nonzero` through NumPy
functions of its Python package, and converts SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND and
MATRIX_SET_DIAG to `topi.*` functions of its compiler library) ran there, verified, and failed in
production on its first call, whose runtime has neither (issue 42). Run apart, such a library fails its verification instead, naming
the function it needs.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tfcheck.compiler.process.io_file import INPUT

_OUTPUTS = "outputs-{}.npz"
_ERROR = "error-{}.txt"


def run_apart(library: Path, io_paths: list[Path], device: str, weights: int = 0) -> list[list[np.ndarray] | str]:
    """For each saved set of inputs, the library's outputs or the error it raised (`Type: message`),
    from one child process. A child that dies (a signal) fails every set it did not finish."""
    with tempfile.TemporaryDirectory(prefix="tfcheck-verify-") as folder:
        out = Path(folder)
        child = subprocess.run(
            [sys.executable, "-m", __name__, str(library), device, str(weights), str(out), *map(str, io_paths)],
            capture_output=True, text=True, check=False)
        results: list[list[np.ndarray] | str] = []
        for index in range(len(io_paths)):
            outputs, error = out / _OUTPUTS.format(index), out / _ERROR.format(index)
            if outputs.exists():
                with np.load(outputs) as saved:
                    results.append([saved[f"arr_{i}"] for i in range(len(saved.files))])
            elif error.exists():
                results.append(error.read_text(encoding="utf-8"))
            else:
                results.append(_death(child))
        return results


def _death(child: subprocess.CompletedProcess[str]) -> str:
    """What ended a child that left no result: its signal or exit status, and its last words."""
    status = f"signal {-child.returncode}" if child.returncode < 0 else f"exit status {child.returncode}"
    words = child.stderr.strip().splitlines()[-1:] or ["(nothing on stderr)"]
    return f"the process running the library ended with {status}: {words[0]}"


def run_library(library: Path, io_path: Path, device: str, weights: int = 0) -> list[np.ndarray]:
    """Load the exported library as the runtime does, with the `weights` values of the weights
    file beside it (`tfcheck/runtime/weights.py`), and run its entry on the saved inputs."""
    from tfcheck.runtime.bundled import wheel_libraries
    from tfcheck.runtime.inputs import aligned
    from tfcheck.runtime.manifest import ENTRY
    from tfcheck.runtime.tvm_backend import Executable
    from tfcheck.runtime.weights import WEIGHTS, read_weights

    data = np.load(io_path)
    count = sum(1 for key in data.files if key.startswith(INPUT))
    values = read_weights(library.parent / WEIGHTS, weights) if weights else ()
    executable = Executable(library, ENTRY, device, wheel_libraries(device), values)
    return executable.run([aligned(data[f"{INPUT}{i}"]) for i in range(count)])


def main(argv: Sequence[str]) -> int:
    """`LIBRARY DEVICE WEIGHTS OUT IO...`: each set's outputs (or error) into OUT."""
    library, device, weights, out, *io_paths = argv
    for index, io_path in enumerate(io_paths):
        try:
            outputs = run_library(Path(library), Path(io_path), device, int(weights))
        except Exception as error:  # noqa: BLE001 - any failure of the library is the verification's finding
            Path(out, _ERROR.format(index)).write_text(f"{type(error).__name__}: {error}", encoding="utf-8")
            continue
        np.savez(Path(out, _OUTPUTS.format(index)), *[np.asarray(output) for output in outputs])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
