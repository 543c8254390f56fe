"""Peak resident memory and time per build stage of one `@tfcheck.aot` function (issue 15).

    .venv/bin/python benchmarks/stage_memory.py trace MODULE.py FUNCTION WORK_DIR
    .venv/bin/python benchmarks/stage_memory.py compile WORK_DIR

The two halves run the build's own stage functions by hand, each in its own process as `tfcheck
build` runs them (trace: TensorFlow -> frozen graph -> TFLite; compile: TFLite -> Relax ->
schedules -> tvm.compile -> export -> verify), with `compiler/memory.py` reading each stage's peak
RSS from /proc (tracemalloc cannot see TensorFlow's, TVM's or LLVM's native memory). `trace` writes
`model.tflite` and `io.npz` into WORK_DIR for `compile`. Output: one Markdown table per half.
Static input shapes only (the function's input_signature).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tfcheck.compiler.memory import StagePeaks  # noqa: E402


def trace(module_path: Path, function: str, work: Path) -> StagePeaks:
    """Import the module, freeze the function, convert it and save TensorFlow's and TFLite's outputs."""
    from tfcheck.compiler.tf_side import (freeze, generate_inputs, import_tensorflow, load_function, reference_outputs,
                                          tflite_outputs, to_tflite)
    from tfcheck.compiler.trace import frozen_graph_sha256
    from tfcheck.compiler.verify import TFLITE_OUTPUT

    peaks = StagePeaks()
    with peaks.stage("import TensorFlow and the module (builds the model)"):
        import_tensorflow()
        tf_function, _ = load_function(str(module_path.parent), module_path.stem, function)
    with peaks.stage("trace + freeze"):
        concrete = tf_function.get_concrete_function()
        frozen = freeze(concrete)
    with peaks.stage("graph SHA-256 (cache key)"):
        frozen_graph_sha256(frozen)
    with peaks.stage("convert to TFLite"):
        flatbuffer = to_tflite(frozen)
        work.mkdir(parents=True, exist_ok=True)
        (work / "model.tflite").write_bytes(flatbuffer)
    with peaks.stage("reference outputs (TensorFlow)"):
        specs = [{"shape": [int(d) for d in t.shape], "dtype": t.dtype.name} for t in frozen.inputs]
        arrays = generate_inputs(specs)
        outputs = reference_outputs(concrete, arrays)
    with peaks.stage("TFLite outputs"):
        second = tflite_outputs(flatbuffer, arrays) or []
    np.savez(work / "io.npz", **{f"input_{i}": a for i, a in enumerate(arrays)},
             **{f"output_{i}": a for i, a in enumerate(outputs)},
             **{f"{TFLITE_OUTPUT}{i}": a for i, a in enumerate(second)})
    return peaks


def compile_(work: Path) -> StagePeaks:
    """The compile child's stages on `work/model.tflite`, for this machine's CPU."""
    from tfcheck.runtime.threads import use_all_cores

    use_all_cores()
    import tvm

    from tfcheck.compiler.importer import import_tflite
    from tfcheck.compiler.schedules import apply as schedules
    from tfcheck.compiler.targets import host_cpu_target
    from tfcheck.compiler.verify import compare_all

    target = tvm.target.Target(host_cpu_target())
    peaks = StagePeaks()
    with peaks.stage("import TFLite -> Relax"):
        mod = import_tflite(work / "model.tflite")
    with peaks.stage("legalize + fold + fuse"):
        mod = schedules.legalize_and_fuse(mod, target)
    with peaks.stage("schedule"):
        mod = schedules.schedule_module(mod, target)
    with peaks.stage("pack weights (FoldConstant)"):
        mod = schedules.fold_packed_weights(mod, target)
    with peaks.stage("tvm.compile (LLVM)"):
        executable = schedules.compile_cpu(mod, target)
        del mod
    with peaks.stage("export_library"):
        executable.export_library(str(work / "lib.so"))
        del executable
    with peaks.stage("verify (load + run)"):
        result = compare_all(work / "lib.so", [work / "io.npz"], "cpu")
    print(f"verify: {result}", file=sys.stderr)
    return peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parts = parser.add_subparsers(dest="part", required=True)
    trace_part = parts.add_parser("trace")
    trace_part.add_argument("module", type=Path)
    trace_part.add_argument("function")
    trace_part.add_argument("work", type=Path)
    compile_part = parts.add_parser("compile")
    compile_part.add_argument("work", type=Path)
    args = parser.parse_args()
    peaks = trace(args.module, args.function, args.work) if args.part == "trace" else compile_(args.work)
    print(peaks.table())


if __name__ == "__main__":
    main()
