"""`tfcheck bench --profile`: where one inference of a compiled artifact spends its time, kernel by kernel.

A slow model on someone's CPU is explained by its kernels: which took the time, which schedule
rule each got and how far from the CPU's peak it ran. Each artifact is loaded with TVM in a child
process (`python -m tfcheck.compiler.bench.profile request.json`) whose Relax VM times every call
it makes (`VirtualMachine.set_instrument`: wall time around each kernel inside the whole model, so
caches and threads are as the model has them). The times are joined by name with what the build
recorded of each kernel in the artifact's `kernels.json` (`KernelTable`: the rule, the buffers, the
multiply-adds). `benchmarks/app_kernels.py` profiles the modules it builds with the same
`KernelProfile` and prints the same table (`markdown`).
"""

from __future__ import annotations

import collections
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tfcheck.compiler.bench.latency import time_calls
from tfcheck.compiler.process.child import EventWriter, StepError, child_main, run_child
from tfcheck.compiler.process.messages import (KERNELS, Budget, KernelRecord, KernelTable, KernelTime, ProfileRequest,
                                               ProfileResult, from_message)
from tfcheck.runtime.manifest import Manifest, TensorSpec

# The columns of the table, in the order `table_rows` fills them.
COLUMNS = ("kernel", "calls", "ms per inference", "share", "rule", "GFLOP/s", "buffers")


@dataclass
class FunctionProfile:
    """The kernels of one artifact of one function; `error` when it could not be profiled."""

    function: str
    inputs: list[TensorSpec]
    backend: str  # "tvm" or "tvm-tuned", as `tfcheck bench` names the artifact
    median_ms: float | None = None  # one inference with its kernels timed
    runs: int = 0
    kernels: list[KernelTime] = field(default_factory=list)
    error: str | None = None

    def total_ms(self) -> float:
        """Time in kernels per inference (the VM's own work between them left out)."""
        return sum(kernel.ms for kernel in self.kernels)

    def by_rule(self) -> dict[str, float]:
        """Kernel time per inference by schedule rule, the largest first."""
        spent: dict[str, float] = collections.defaultdict(float)
        for kernel in self.kernels:
            spent[kernel.rule] += kernel.ms
        return dict(sorted(spent.items(), key=lambda item: -item[1]))

    def to_json(self) -> dict[str, Any]:
        total = self.total_ms()
        kernels = [{**asdict(k), "share": round(k.ms / total, 4) if total else None} for k in self.kernels]
        return {"function": self.function, "inputs": [spec.to_json() for spec in self.inputs], "backend": self.backend,
                "median_ms": self.median_ms, "runs": self.runs, "kernel_ms": round(total, 4),
                "by_rule": {rule: round(ms, 4) for rule, ms in self.by_rule().items()}, "kernels": kernels,
                "error": self.error}


def table_rows(profile: FunctionProfile, top: int | None = None) -> list[list[str]]:
    """The cells of `COLUMNS` for the `top` slowest kernels (all with None)."""
    total = profile.total_ms() or 1.0
    return [[k.kernel, str(k.calls), f"{k.ms:.3f}", f"{k.ms / total:.1%}", k.rule,
             "-" if k.gflops is None else f"{k.gflops:.1f}", k.buffers] for k in profile.kernels[:top]]


def summary(profile: FunctionProfile) -> str:
    """One line: the inference (median), the kernels' time in one (mean), and that time by rule."""
    calls = sum(kernel.calls for kernel in profile.kernels)
    rules = ", ".join(f"{rule} {ms:.2f} ms" for rule, ms in profile.by_rule().items())
    return (f"{profile.function} ({profile.backend}): {profile.median_ms:.2f} ms per inference (median of "
            f"{profile.runs}); kernels {profile.total_ms():.2f} ms in {calls} calls; by rule: {rules}")


def markdown(profile: FunctionProfile, top: int | None = None) -> str:
    """The summary line and the kernel table, as Markdown."""
    if profile.error:
        return f"{profile.function} ({profile.backend}): not profiled: {profile.error}"
    lines = [summary(profile), "", "| " + " | ".join(COLUMNS) + " |", "|---|---:|---:|---:|---|---:|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(profile, top)]
    return "\n".join(lines)


# --- main process ---------------------------------------------------------------------------------


def profile_artifacts(artifacts: Sequence[Manifest], inputs: list[TensorSpec], budget: Budget,
                      timeout: float) -> list[FunctionProfile]:
    """Profile each artifact of one function (default and tuned) in a child of its own."""
    profiles = []
    work = Path(tempfile.mkdtemp(prefix="tfcheck-profile-"))
    try:
        for artifact in artifacts:
            backend = "tvm-tuned" if artifact.tuned else "tvm"
            request = ProfileRequest(artifact=str(artifact.folder), inputs=inputs, budget=budget)
            outcome = run_child("tfcheck.compiler.bench.profile", request, ProfileResult, work / backend,
                                on_stage=lambda _stage: None, timeout=timeout)
            profile = FunctionProfile(artifact.qualname, inputs, backend, error=outcome.error)
            if outcome.result is not None:
                profile.median_ms, profile.runs = outcome.result.median_ms, outcome.result.runs
                profile.kernels = outcome.result.kernels
            profiles.append(profile)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return profiles


# --- child process --------------------------------------------------------------------------------


class KernelProfile:
    """A Relax VM whose every call is timed: wall time around each kernel the VM calls, inside
    the whole model, so caches and threads are as the model has them. `calls` counts inferences."""

    def __init__(self, executable: Any, arguments: Sequence[Any], clock: Callable[[], float] = time.perf_counter) -> None:
        import tvm
        from tvm import relax

        self._vm = relax.VirtualMachine(executable, tvm.cpu())
        self._arguments = list(arguments)
        self._clock = clock
        self._started: list[float] = []
        self.spent: dict[str, float] = collections.defaultdict(float)
        self.count: collections.Counter[str] = collections.Counter()
        self.calls = 0
        self._vm.set_instrument(self._instrument)

    def _instrument(self, _func: Any, symbol: str, before: bool, _ret: Any, *_args: Any) -> int:
        if before:
            self._started.append(self._clock())
        else:
            self.spent[symbol] += self._clock() - self._started.pop()
            self.count[symbol] += 1
        return 0  # VMInstrumentReturnKind.NO_OP: run the call

    def call(self) -> None:
        """One inference."""
        self._vm["main"](*self._arguments)
        self.calls += 1

    def reset(self) -> None:
        """Forget what was timed so far (the warm-up calls)."""
        self.spent.clear()
        self.count.clear()
        self.calls = 0

    def kernels(self, records: dict[str, KernelRecord]) -> list[KernelTime]:
        """Per kernel, slowest first: calls and ms per inference, with the build's record of it
        (the VM's own functions, `vm.builtin.*`, have none: rule "vm")."""
        found = []
        for symbol, seconds in self.spent.items():
            record = records.get(symbol)
            rule = record.rule if record else "vm" if symbol.startswith("vm.") else "unknown"
            adds = record.multiply_adds if record else None
            gflops = None if not adds or not seconds else round(2 * adds * self.count[symbol] / seconds / 1e9, 2)
            calls = max(self.calls, 1)
            found.append(KernelTime(symbol, self.count[symbol] // calls, round(seconds / calls * 1e3, 5), rule,
                                    record.buffers if record else "", gflops))
        return sorted(found, key=lambda kernel: -kernel.ms)


def read_kernel_records(folder: Path) -> dict[str, KernelRecord]:
    """The build's record of each kernel of the artifact in `folder`, by name; empty for an
    artifact built before the build wrote one."""
    path = folder / KERNELS
    if not path.is_file():
        return {}
    table = from_message(KernelTable, json.loads(path.read_text(encoding="utf-8")))
    return {record.kernel: record for record in table.kernels}


def profile_artifact(request: ProfileRequest, events: EventWriter) -> ProfileResult:
    """Child: load the artifact's library in a timed VM, warm it up, then time inferences within
    the budget."""
    from tfcheck.runtime.threads import use_all_cores

    use_all_cores()  # before TVM's thread pool starts, as `tfcheck.load` does
    events.stage("prepare")
    profile = KernelProfile(*_executable_and_arguments(Path(request.artifact), request.inputs))
    records = read_kernel_records(Path(request.artifact))
    events.stage("measure")
    for _ in range(request.budget.warmup):
        profile.call()
    profile.reset()
    times = time_calls(profile.call, replace(request.budget, warmup=0))
    if not times:
        raise StepError("no inference was timed")
    return ProfileResult(median_ms=round(statistics.median(times) * 1e3, 4), runs=len(times),
                         kernels=profile.kernels(records))


def _executable_and_arguments(folder: Path, inputs: list[TensorSpec]) -> tuple[Any, list[Any]]:
    """The artifact's library as TVM loads it, and `main`'s arguments: the bench's inputs, then
    the weights of a format 2 artifact."""
    import tvm

    from tfcheck.compiler.trace.bridge import generate_inputs
    from tfcheck.runtime.manifest import read_manifest
    from tfcheck.runtime.target import incompatibilities
    from tfcheck.runtime.weights import load_weights

    manifest = read_manifest(folder)
    reasons = incompatibilities(manifest)
    if reasons:
        raise StepError(f"this machine cannot run {folder}: {'; '.join(reasons)}")
    arrays = [*generate_inputs(inputs, manifest.input_values), *load_weights(manifest)]
    return tvm.runtime.load_module(str(manifest.library_path)), [tvm.runtime.tensor(a) for a in arrays]


if __name__ == "__main__":
    child_main(profile_artifact, ProfileRequest)
