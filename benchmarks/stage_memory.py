"""Peak resident memory and time per build stage of one `@tfcheck.aot` function (issue 15).

    .venv/bin/python benchmarks/stage_memory.py trace MODULE.py FUNCTION WORK_DIR [--weights inputs] [--onednn]
    .venv/bin/python benchmarks/stage_memory.py compile WORK_DIR [--constants-in-library]

The two halves run the build's own stage functions by hand, each in its own process as `tfcheck
build` runs them (trace: TensorFlow -> frozen graph -> TFLite; compile: TFLite -> Relax ->
schedules -> tvm.compile -> export -> verify), with `compiler/build/memory.py` reading each stage's peak
RSS from /proc (tracemalloc cannot see TensorFlow's, TVM's or LLVM's native memory). `trace` writes
`model.tflite` and `io.npz` (and, with `--weights inputs`, `weights.npz`) into WORK_DIR for
`compile`. `--weights` picks the route as `@tfcheck.aot(weights=...)` does: "constants" freezes,
"inputs" lifts the variables into inputs (docs/build.md, "Memory"). `trace` imports TensorFlow as
the tracing child does, its oneDNN kernels off; `--onednn` keeps them on, as tfcheck did before.
With `weights.npz`, `compile` exports as the build does: the packed weights go to the artifact's
weights file beside `lib.so` (`compiler/build/library_weights.py`); `--constants-in-library` exports
them inside `lib.so` instead, as tfcheck did before. Output: one Markdown table per half. Static input shapes only (the
function's input_signature).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tfcheck.compiler.build.memory import StagePeaks  # noqa: E402


def trace(module_path: Path, function: str, work: Path, weights: str, onednn: bool) -> StagePeaks:
    """Import the module, freeze the function (or lift its weights), convert it and save
    TensorFlow's and TFLite's outputs."""
    from tfcheck.compiler.trace.bridge import (freeze, generate_inputs, import_tensorflow, lift_weights, load_function,
                                          reference_outputs, tflite_outputs, to_tflite, weight_values)
    from tfcheck.compiler.trace.tracing import frozen_graph_sha256, lifted_graph_sha256, saved_weights
    from tfcheck.compiler.process.io_file import save_io
    from tfcheck.compiler.process.weights_file import WEIGHTS_FILE, save_weights

    peaks = StagePeaks()
    lifting = weights == "inputs"
    with peaks.stage("import TensorFlow and the module (builds the model)"):
        import_tensorflow(onednn=onednn)
        tf_function, _ = load_function(str(module_path.parent), module_path.stem, function)
    with peaks.stage("trace + lift weights" if lifting else "trace + freeze"):
        concrete = tf_function.get_concrete_function()
        lifted = lift_weights(concrete) if lifting else None
        converted = lifted.function if lifted is not None else freeze(concrete)
    with peaks.stage("graph SHA-256 (cache key)"):
        lifted_graph_sha256(lifted) if lifted is not None else frozen_graph_sha256(converted)
    with peaks.stage("convert to TFLite"):
        flatbuffer = to_tflite(converted)
        work.mkdir(parents=True, exist_ok=True)
        (work / "model.tflite").write_bytes(flatbuffer)
    if lifted is not None:
        with peaks.stage("save weights.npz"):
            save_weights(weight_values(lifted), work / WEIGHTS_FILE)
    with peaks.stage("reference outputs (TensorFlow)"):
        user = concrete.inputs[:len(concrete.inputs) - len(concrete.captured_inputs)]
        specs = [TensorSpec(t.name, tuple(int(d) for d in t.shape), t.dtype.name) for t in user]
        arrays = generate_inputs(specs)
        outputs = reference_outputs(concrete, arrays)
    with peaks.stage("TFLite outputs"):
        second = tflite_outputs(flatbuffer, arrays, saved_weights(work, len(lifted.handles) if lifted else 0)) or []
    save_io(work / "io.npz", arrays, outputs, second)
    return peaks


def compile_(work: Path, constants_in_library: bool) -> StagePeaks:
    """The compile child's stages on `work/model.tflite`, for this machine's CPU."""
    from tfcheck.runtime.threads import use_all_cores

    use_all_cores()
    import tvm

    from tfcheck.compiler.frontend.importer import import_variant
    from tfcheck.compiler.build.library_weights import LiftedConstants, lift_constants, save_constants
    from tfcheck.compiler.schedules import apply as schedules
    from tfcheck.compiler.build.targets import host_cpu_target
    from tfcheck.compiler.build.verify import compare_all
    from tfcheck.compiler.process.weights_file import WEIGHTS_FILE
    from tfcheck.runtime.weights import WEIGHTS

    target = tvm.target.Target(host_cpu_target())
    peaks = StagePeaks()
    weights = work / WEIGHTS_FILE
    out = work / ("embedded" if constants_in_library else "library")
    out.mkdir(exist_ok=True)
    with peaks.stage("import TFLite -> Relax (+ bind and fold the weights)" if weights.exists() else "import TFLite -> Relax"):
        mod = import_variant(work, weights=len(np.load(weights).files) if weights.exists() else 0)
    with peaks.stage("legalize + fold + fuse"):
        mod = schedules.legalize_and_fuse(mod, target)
    with peaks.stage("schedule"):
        mod = schedules.schedule_module(mod, target)
    with peaks.stage("pack weights (FoldConstant)"):
        mod = schedules.fold_packed_weights(mod, target)
    lift = weights.exists() and not constants_in_library
    with peaks.stage("lift constants out of main" if lift else "(constants stay in main)"):
        lifted = lift_constants(mod) if lift else LiftedConstants(mod, [])
        del mod
    with peaks.stage("tvm.compile (LLVM)"):
        executable = schedules.compile_cpu(lifted.mod, target)
        constants = lifted.values
        del lifted
    with peaks.stage("export_library" + (" (constants inside)" if constants_in_library else "")):
        executable.export_library(str(out / "lib.so"))
        del executable
    with peaks.stage(f"save {WEIGHTS} ({len(constants)} constants)"):
        count = save_constants(constants, out / WEIGHTS) if constants else 0
        del constants
    with peaks.stage("verify (load + run)"):
        result = compare_all(out / "lib.so", [work / "io.npz"], "cpu", count)
    print(f"verify: {result}", file=sys.stderr)
    print(f"lib.so: {(out / 'lib.so').stat().st_size / 2**20:.1f} MB"
          + (f", {WEIGHTS}: {(out / WEIGHTS).stat().st_size / 2**20:.1f} MB" if count else ""), file=sys.stderr)
    return peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parts = parser.add_subparsers(dest="part", required=True)
    trace_part = parts.add_parser("trace")
    trace_part.add_argument("module", type=Path)
    trace_part.add_argument("function")
    trace_part.add_argument("work", type=Path)
    trace_part.add_argument("--weights", choices=["constants", "inputs"], default="constants")
    trace_part.add_argument("--onednn", action="store_true", help="keep TensorFlow's oneDNN kernels on")
    compile_part = parts.add_parser("compile")
    compile_part.add_argument("work", type=Path)
    compile_part.add_argument("--constants-in-library", action="store_true",
                              help="export the packed weights inside lib.so (tfcheck before the weights file)")
    args = parser.parse_args()
    peaks = (trace(args.module, args.function, args.work, args.weights, args.onednn) if args.part == "trace"
             else compile_(args.work, args.constants_in_library))
    print(peaks.table())


if __name__ == "__main__":
    main()
