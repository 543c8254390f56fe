"""Time whole compiled models against each other, on this machine or on an RPC tracker's device.

Why: MetaSchedule chooses each operator's schedule from isolated timings of one kernel with random
inputs, which do not add up to the model's time (caches, threads, the VM between kernels): a
ResNet50 whose operators each measured faster took 139 ms against 116 ms for its default build.
A tuned build therefore also races the whole tuned model against the whole default model on the
device and ships the faster one (see `race`).

Candidates are timed interleaved, round by round, with the median of each kept, so that a change
in the machine's load during the race hits both alike.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import tvm
from tvm import relax

from tfcheck.compiler.schedules import compile_cpu
from tfcheck.compiler.process.messages import WholeModel
from tfcheck.runtime.threads import use_all_cores

if TYPE_CHECKING:
    from tfcheck.compiler.tuning.metaschedule import RpcConfig

ROUNDS = 5
# Each round calls a candidate for at least this long (more calls for a fast model), so that the
# timer's resolution and one-off hiccups do not decide the race.
MIN_ROUND_MS = 200


@dataclass(frozen=True)
class Race:
    """The compiled candidates, each one's median time per call and which one was faster."""

    executables: dict[str, Any]
    median_ms: dict[str, float]

    @property
    def winner(self) -> str:
        """The faster candidate; on a tie, the first one given."""
        return min(self.median_ms, key=self.median_ms.__getitem__)

    def summary(self) -> WholeModel:
        """What the manifest records about the race of the tuned and the default model
        (docs/artifact-format.md)."""
        tuned, default = (self.median_ms.get(name) for name in ("tuned", "default"))
        return WholeModel(self.winner, round(tuned, 4) if tuned is not None else None,
                          round(default, 4) if default is not None else None)


class UntimeableModel(ValueError):
    """The model's inputs have no static shape, so there is nothing concrete to time it on."""


def race(candidates: dict[str, tvm.IRModule], target: tvm.target.Target, rpc: RpcConfig | None = None,
         *, rounds: int = ROUNDS) -> Race:
    """Compile every candidate (the same function, scheduled differently) and time each on random
    inputs, locally or on a device of `rpc`'s tracker; raise `UntimeableModel` for dynamic shapes.

    Each candidate gets arguments for its own parameters: the user's inputs are the same (one
    seed, the same shapes first), but a candidate whose constants were lifted into parameters
    (`library_weights.lift_constants`) takes its own packed weights, whose layout its schedules chose."""
    use_all_cores()  # as many threads as a loaded artifact gets (before TVM's pool starts)
    inputs = {name: random_inputs(mod["main"]) for name, mod in candidates.items()}
    executables = {name: compile_cpu(mod, target) for name, mod in candidates.items()}
    with _device(rpc) as (load, dev):
        machines = {name: relax.VirtualMachine(load(exe), dev) for name, exe in executables.items()}
        arguments = {name: [tvm.runtime.tensor(array, device=dev) for array in arrays] for name, arrays in inputs.items()}
        timers = {name: vm.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=MIN_ROUND_MS)
                  for name, vm in machines.items()}
        samples: dict[str, list[float]] = {name: [] for name in candidates}
        for _ in range(rounds):
            for name, timer in timers.items():
                samples[name].append(timer(*arguments[name]).mean * 1e3)
    return Race(executables, {name: statistics.median(times) for name, times in samples.items()})


def random_inputs(main: relax.Function, seed: int = 0) -> list[np.ndarray]:
    """Seeded random arrays for the function's tensor parameters (values in [-1, 1))."""
    rng = np.random.default_rng(seed)
    arrays = []
    for param in main.params:
        info = param.ty
        shape = getattr(info, "shape", None)
        if not isinstance(info, relax.TensorType) or shape is None or not all(
                isinstance(dim, tvm.tirx.IntImm) for dim in shape.values):
            raise UntimeableModel(f"input {param.name!r} has no static shape ({info})")
        dims = [int(dim) for dim in shape.values]
        arrays.append(_random_array(rng, dims, str(info.dtype)))
    return arrays


def _random_array(rng: np.random.Generator, shape: list[int], dtype: str) -> np.ndarray:
    """Random values of `dtype`: floats in [-1, 1), integers in [0, 8) (safe as indices), booleans."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(0, 8, size=shape).astype(dtype)
    return (rng.random(shape) * 2 - 1).astype(dtype)


@contextmanager
def _device(rpc: RpcConfig | None) -> Iterator[tuple[Any, tvm.runtime.Device]]:
    """A loader of executables and the device they run on: this machine's CPU, or a session with
    a device of the RPC tracker (executables go over as a `.tar` of objects that it links)."""
    if rpc is None:
        yield (lambda exe: exe), tvm.cpu()
        return
    from tvm import rpc as tvm_rpc

    session = tvm_rpc.connect_tracker(rpc.tracker_host, rpc.tracker_port).request(
        rpc.key, session_timeout=rpc.session_timeout_s)
    numbers = itertools.count()
    with tempfile.TemporaryDirectory(prefix="tfcheck-race-") as folder:
        def load(exe: Any) -> Any:
            path = Path(folder) / f"candidate{next(numbers)}.tar"
            exe.export_library(str(path))
            session.upload(str(path))
            return session.load_module(path.name)

        yield load, session.cpu()
