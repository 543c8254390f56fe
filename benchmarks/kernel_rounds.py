"""What the one-core kernel scripts share (`awkward_rows.py`, `winograd_layers.py`): their command
line (`--shape`, `--rounds`, `--target`) and their timing, interleaved rounds of the calling
thread's CPU time, the best round of each."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Hashable

import tvm

from tfcheck.compiler.build.targets import resolve_target


def arguments(doc: str, shape_help: str, rounds: int) -> tuple[argparse.Namespace, tvm.target.Target]:
    """The parsed command line and the target it names (`tfcheck build --target`'s forms)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", help=f"{shape_help} (repeatable)")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--target", default="cpu", help="as tfcheck build --target: cpu (this CPU) or a TVM target "
                        'JSON object, e.g. \'{"kind": "llvm", "mcpu": "znver3", "num-cores": 1}\'')
    args = parser.parse_args()
    return args, tvm.target.Target(resolve_target(args.target, None).json)


def best_thread_times(calls: dict[Hashable, Callable[[], object]], rounds: int, per_round: int) -> dict[Hashable, float]:
    """Seconds per call of each, the best of ``rounds`` rounds of ``per_round`` calls, the calls
    taking turns round by round (so a slow moment of the machine falls on all of them)."""
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(rounds):
        for key, call in calls.items():
            started = time.thread_time()
            for _ in range(per_round):
                call()
            best[key] = min(best[key], (time.thread_time() - started) / per_round)
    return best
