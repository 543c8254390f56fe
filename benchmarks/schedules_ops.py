"""Per-operator view of the default schedules: each fused TIR function of a workload, timed alone.

Complements ``schedules_workloads.py`` (whole models, wall time, both cores): here every fused
function runs single-threaded and is timed in thread CPU time (``time.thread_time``), so the
figures stay comparable on a machine shared with other jobs. Run after ``schedules_models.py``:

    TVM_NUM_THREADS=1 .venv/bin/python benchmarks/schedules_ops.py mobilenet_v2 [--top 15] [--raw]

Prints, slowest first: the function, how often ``main`` calls it, the rule that scheduled it, its
minimum CPU time scheduled (weights already packed, as in a build) and (with ``--raw``) as
legalised without a schedule.
"""

from __future__ import annotations

import argparse
import collections
import re
import time
from pathlib import Path

import numpy as np
import tvm
from tvm import tirx

from tfcheck.compiler.schedules.apply import RULE_ATTR, fold_packed_weights, legalize_and_fuse, schedule_module
from tfcheck.compiler.build.targets import host_cpu_target

from schedules_workloads import load_relax  # noqa: E402  (sibling script)


def random_args(func: tirx.PrimFunc) -> list[tvm.runtime.Tensor]:
    """Random tensors for the buffer parameters of a PrimFunc (scalar parameters are not supported)."""
    return [
        tvm.runtime.tensor(np.asarray(np.random.rand(*[int(d) for d in p.shape])).astype(p.dtype)) for p in func.params
    ]


def cpu_ms(func: tirx.PrimFunc, target: tvm.target.Target, repeat: int) -> float:
    """Minimum thread CPU time of one call, in ms."""
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=target)
    entry, args = lib.mod["main"], random_args(func)
    entry(*args)
    times = []
    for _ in range(repeat):
        start = time.thread_time()
        entry(*args)
        times.append((time.thread_time() - start) * 1000.0)
    return min(times)


def main() -> None:
    """Print the per-function table for one workload."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload")
    parser.add_argument("--models", type=Path, default=Path("/tmp/tfcheck_schedules"))
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--raw", action="store_true", help="also time the unscheduled functions (slow)")
    args = parser.parse_args()
    target = tvm.target.Target(host_cpu_target())
    fused = legalize_and_fuse(load_relax(args.models / f"{args.workload}.tflite"), target)
    scheduled = fold_packed_weights(schedule_module(fused, target), target)
    calls = collections.Counter(re.findall(r"call_tir\((\w+),", scheduled["main"].script()))
    names = {gvar.name_hint for gvar in fused.get_global_vars()}
    rows = []
    for gvar, func in scheduled.functions_items():
        if isinstance(func, tirx.PrimFunc) and calls[gvar.name_hint] and all(hasattr(p, "shape") for p in func.params):
            ms = cpu_ms(func, target, args.repeat)
            unscheduled = fused[gvar.name_hint] if gvar.name_hint in names else None
            raw = f"{cpu_ms(unscheduled, target, 3):.3f} ms" if args.raw and unscheduled is not None else "-"
            rule = str(func.attrs[RULE_ATTR]) if RULE_ATTR in func.attrs else "unscheduled"
            rows.append((ms * calls[gvar.name_hint], gvar.name_hint, calls[gvar.name_hint], rule, ms, raw))
    rows.sort(reverse=True)
    print(f"sum over calls: {sum(r[0] for r in rows):.2f} ms (single thread, CPU time)")
    print("| function | calls | rule | scheduled | unscheduled |\n|---|---|---|---|---|")
    for _, name, count, rule, ms, raw in rows[: args.top]:
        print(f"| {name} | {count} | {rule} | {ms:.3f} ms | {raw} |")


if __name__ == "__main__":
    main()
