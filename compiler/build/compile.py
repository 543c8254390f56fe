"""Child process: TFLite flatbuffer -> Relax -> schedules (or tuning) -> compile -> export -> verify.

Run as `python -m tfcheck.compiler.build.compile request.json` (see `compiler/process/child.py`), so that a
crash inside TVM or LLVM fails one function instead of the whole build. The request names the
traced variant's folder, the target JSON and the folder to export `lib.so` into; the result says
what the manifest needs (CPU features, device code, verification). A CPU build with its weights as
inputs exports `lib.so` without its large constants and writes them to the artifact's weights
file beside it (`compiler/build/library_weights.py`, docs/build.md "Memory").
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from tfcheck.compiler.process.child import EventWriter, child_main
from tfcheck.compiler.process.messages import (KERNELS, BudgetFallback, Comparison, CompileRequest, CompileResult,
                                               DeviceCode, KernelRecord, KernelTable, RefusedSchedule, TuningOptions,
                                               TuningSummary, WholeModel, to_message)
from tfcheck.compiler.process.target import BuildTarget
from tfcheck.runtime.manifest import LIBRARY
from tfcheck.runtime.threads import use_all_cores
from tfcheck.runtime.weights import WEIGHTS


def preload() -> None:
    """What every compiling child imports first, once for all of them in the fork server
    (`compiler/process/forkserver.py`): TVM, the importer and the schedules."""
    use_all_cores()
    import tvm  # noqa: F401

    import tfcheck.compiler.frontend.importer  # noqa: F401
    import tfcheck.compiler.frontend.loop_unroll  # noqa: F401
    import tfcheck.compiler.schedules  # noqa: F401


def compile_variant(request: CompileRequest, events: EventWriter) -> CompileResult:
    """Compile one traced variant for one target and verify the exported library."""
    # Before any TVM code can start the thread pool (constant folding runs the weight-packing
    # kernels): the race and the tuning measurements must time with a loaded artifact's threads.
    use_all_cores()
    import tvm

    from tfcheck.compiler.frontend.importer import import_variant
    from tfcheck.compiler.build.library_weights import save_constants
    from tfcheck.compiler.frontend.loop_unroll import unroll_constant_loops

    events.stage("compile")
    started = time.monotonic()
    variant = Path(request.variant_dir)
    target = tvm.target.Target(request.target.json)
    device = request.target.device
    # No reference to the imported module outlives compiling it: its constants (every weight) would
    # stay resident through export and verification (docs/build.md, "Memory"). Loops with a trip
    # count known here (RNN layers over a static sequence) run unrolled (`compiler/frontend/loop_unroll.py`).
    # A function whose weights are inputs keeps them out of the library as well (`lift_constants`).
    compiled = compile_module(
        unroll_constant_loops(import_variant(variant, request.inputs, request.dims, request.weights, request.float64)),
        target, device, request.tuning, lift=device == "cpu" and request.weights > 0)
    library = Path(request.out_dir) / LIBRARY
    library_weights = save_constants(compiled.weights, Path(request.out_dir) / WEIGHTS) if compiled.weights else 0
    device_code, cpu_features = _export(compiled.executable, library, request.target, target, variant)
    if device == "cpu":
        table = to_message(KernelTable(compiled.kernels))
        (Path(request.out_dir) / KERNELS).write_text(json.dumps(table, indent=1), encoding="utf-8")
    tuning, budget_fallbacks = compiled.tuning, compiled.budget_fallbacks
    del compiled  # its constants (every weight) need not stay resident through verification
    compile_seconds = round(time.monotonic() - started, 3)
    events.stage("verify")
    return CompileResult(tvm=tvm.__version__, compile_seconds=compile_seconds,
                         verify=_verify(library, sorted(variant.glob("io*.npz")), device, library_weights),
                         cpu_features=cpu_features, device_code=device_code, tuning=tuning,
                         budget_fallbacks=budget_fallbacks, library_weights=library_weights)


def _export(executable: Any, library: Path, build_target: BuildTarget, target: Any,
            variant: Path) -> tuple[DeviceCode | None, list[str] | None]:
    """Write the library: for CUDA with its device code compiled (and what the manifest records of
    that), for a CPU with the ISA features its code may use."""
    if build_target.device == "cuda":
        from tfcheck.compiler.build.cuda import export_cuda_library

        return export_cuda_library(executable, library, build_target.json["arch"], variant), None
    executable.export_library(str(library))
    return None, compiled_cpu_features(target)


class Compiled(NamedTuple):
    """A compiled module and what the build report says about how it was scheduled."""

    executable: Any
    weights: list[Any]  # the constants `main` takes after the user's inputs (`lift_constants`); [] for none
    kernels: list[KernelRecord]  # every kernel of a CPU build (`schedules.kernel_table`), for `bench --profile`
    tuning: TuningSummary | None  # what tuning did, when it ran
    # kernels whose first-choice default schedule was over the code-size budget (schedules/budget.py)
    budget_fallbacks: list[BudgetFallback]


def compile_module(mod: Any, target: Any, device: str, tuning: TuningOptions | None, lift: bool = False) -> Compiled:
    """Schedule and compile the imported module; with `lift` (CPU only), `main`'s large constants
    become its last parameters once scheduled and packed (`lift_constants`).

    GPU kernels need thread bindings, which TVM's dlight rules add; the CPU gets the project's
    default schedules, or the faster, as a whole model, of them and MetaSchedule's tuning.
    """
    import tvm

    if device == "cuda":
        return Compiled(tvm.compile(_gpu_schedules(mod, target), target=target), [], [], None, [])
    from tfcheck.compiler.schedules import apply_default_schedules, budget_fallbacks

    default = apply_default_schedules(mod, target)
    fallbacks = [_budget_fallback(entry) for entry in budget_fallbacks(default)]
    if not tuning:
        return Compiled(*_compile_cpu(_lifted(default, lift), target), None, fallbacks)
    return Compiled(*_tune(mod, default, target, tuning, lift), fallbacks)


def _budget_fallback(entry: dict[str, Any]) -> BudgetFallback:
    """One entry of `schedules.budget_fallbacks`' report (the schedules import nothing of the
    build's messages) as the message records it."""
    refused = [RefusedSchedule(str(item["rule"]), int(item["code_size"])) for item in entry["refused"]]
    return BudgetFallback(str(entry["kernel"]), str(entry["schedule"]), refused, int(entry["budget"]))


def _lifted(mod: Any, lift: bool) -> Any:
    """`lift_constants(mod)`, or `mod` as it is (a `LiftedConstants` either way)."""
    from tfcheck.compiler.build.library_weights import LiftedConstants, lift_constants

    return lift_constants(mod) if lift else LiftedConstants(mod, [])


def _compile_cpu(lifted: Any, target: Any) -> tuple[Any, list[Any], list[KernelRecord]]:
    """The executable of a `LiftedConstants`' module, the constants it takes and its kernels."""
    from tfcheck.compiler.schedules import compile_cpu

    return compile_cpu(lifted.mod, target), lifted.values, _kernels(lifted.mod)


def _kernels(mod: Any) -> list[KernelRecord]:
    """`schedules.kernel_table(mod)` (the schedules import nothing of the build's messages) as
    the artifact records it."""
    from tfcheck.compiler.schedules import kernel_table

    return [KernelRecord(**entry) for entry in kernel_table(mod)]


def _gpu_schedules(mod: Any, target: Any) -> Any:
    """Thread bindings for every kernel, from dlight's rules (most specific first)."""
    from tvm import relax
    from tvm.s_tir import dlight

    with target:
        mod = relax.get_pipeline("zero")(mod)
        return dlight.ApplyDefaultSchedule(
            dlight.gpu.Matmul(), dlight.gpu.GEMV(), dlight.gpu.Reduction(),
            dlight.gpu.GeneralReduction(), dlight.gpu.Fallback(),
        )(mod)


def _tune(mod: Any, default: Any, target: Any, tuning: TuningOptions,
          lift: bool) -> tuple[Any, list[Any], list[KernelRecord], TuningSummary]:
    """Tune per operator, then race the tuned model against the default one as a whole and keep
    the faster: per-kernel timings do not add up to the model's (see `compiler/tuning/model_timing.py`).
    With `lift`, each candidate takes its own constants as parameters (random ones in the race)."""
    from tfcheck.compiler.tuning.model_timing import UntimeableModel, race
    from tfcheck.compiler.tuning.metaschedule import RpcConfig, tune_module

    rpc = RpcConfig.parse(tuning.rpc_tracker, tuning.rpc_key or "") if tuning.rpc_tracker else None
    tuned = tune_module(mod, target, trials=tuning.trials, database_dir=Path(tuning.database_dir), rpc=rpc)
    summary = tuned.summary()
    if not tuned.tasks_taking_tuned:
        return *_compile_cpu(_lifted(default, lift), target), replace(summary, whole_model=WholeModel("default"))
    candidates = {"tuned": _lifted(tuned.mod, lift), "default": _lifted(default, lift)}
    try:
        result = race({name: candidate.mod for name, candidate in candidates.items()}, target, rpc)
    except UntimeableModel as error:
        return (*_compile_cpu(candidates["tuned"], target),
                replace(summary, whole_model=WholeModel("tuned", why=str(error))))
    winner = candidates[result.winner]
    return (result.executables[result.winner], winner.values, _kernels(winner.mod),
            replace(summary, whole_model=result.summary()))


def compiled_cpu_features(target: Any) -> list[str]:
    """The ISA features the code may use: LLVM's features for the target's CPU that are x86 vector
    extensions (`targets.VECTOR_FEATURES`) or that this (the building) machine's /proc/cpuinfo
    lists. LLVM's list mixes in tuning flags such as `prefer-256-bit` that no CPU reports; keeping
    only real flags lets the runtime compare. The vector extensions are kept whatever the building
    machine has: built for `znver4` on an AVX2 machine, the code still needs AVX-512, and the runtime
    must refuse it on an AVX2 CPU (issue 39)."""
    from tvm.target.codegen import llvm_get_cpu_features

    from tfcheck.compiler.build.targets import VECTOR_FEATURES
    from tfcheck.runtime.target import feature_key, host_cpu_features

    host = host_cpu_features()
    return sorted(name for name in llvm_get_cpu_features(target)
                  if name in VECTOR_FEATURES or feature_key(name) in host)


def _verify(library: Path, io_paths: list[Path], device: str, weights: int) -> Comparison:
    """Run (with the `weights` values of the weights file beside the library, if any) and compare
    where the device exists, at every size the tracing step saved inputs for
    (one `io.npz`, or `io-<i>.npz` per verified size of a symbolic build); a CUDA build on a
    machine without a GPU is reported as not verified rather than failed."""
    from tfcheck.compiler.build.verify import compare_all

    if device == "cuda":
        from tfcheck.runtime.target import cuda_available

        if not cuda_available():
            return Comparison(None, message="not run: this machine has no NVIDIA GPU")
    return compare_all(library, io_paths, device, weights)


if __name__ == "__main__":
    child_main(compile_variant, CompileRequest)
