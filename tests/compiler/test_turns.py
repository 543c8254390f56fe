"""compiler/bench/turns.py: backends timed in turns, with real child processes (no TensorFlow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tfcheck.compiler.process.messages import Budget
from tfcheck.compiler.bench.turns import ROUNDS, Turns, TurnSize

BUDGET = Budget(warmup=1, min_runs=5, min_seconds=0.05, max_runs=40, max_seconds=1.0)

# A child like a bench child: preparing takes 20 ms, each call 1 ms, and each records when it ran;
# with `crash`, it dies in its fifth timed call (windows: preparation, warm-up, five calls), so it
# has finished fewer than BUDGET.min_runs however the calls fall into turns (dying in the sixth, a
# loaded machine's turns of one call each reported all five: the test failed once that way).
CHILD = """
import json, sys, time
from tfcheck.compiler.process.messages import Budget
from tfcheck.compiler.bench.turns import timed_turns
go, done, out, crash = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "crash"
windows = []
def sleep(seconds):
    start = time.monotonic()
    time.sleep(seconds)
    windows.append((start, time.monotonic()))
def call():
    sleep(0.001)
    if crash and len(windows) > 6:
        raise SystemExit(3)
def prepare():
    sleep(0.02)
    return call
budget = Budget(**json.loads(sys.argv[5]))
times = timed_turns(prepare, budget, [go, done], time.perf_counter)
json.dump({"windows": windows, "timed": len(times)}, open(out, "w"))
"""


def _run(tmp_path: Path, modes: list[str]) -> tuple[list[dict], Turns]:
    """Children in `modes` ("ok", "crash", "absent": never started), timed in turns."""
    budget = json.dumps(BUDGET.__dict__)
    with Turns(len(modes), BUDGET) as turns:
        children = []
        for index, mode in enumerate(modes):
            if mode == "absent":
                turns.leave(index)
                continue
            go, done = turns.child_ends[index]
            children.append(subprocess.Popen(
                [sys.executable, "-c", CHILD, str(go), str(done), str(tmp_path / f"{index}.json"), mode, budget],
                pass_fds=(go, done)))
            os.close(go)
            os.close(done)
        turns.run()
    for child in children:
        child.wait(timeout=60)
    reports = [json.loads((tmp_path / f"{i}.json").read_text()) if (tmp_path / f"{i}.json").exists() else None
               for i in range(len(modes))]
    return reports, turns


def test_only_one_child_runs_at_a_time_and_all_take_turns(tmp_path: Path) -> None:
    reports, turns = _run(tmp_path, ["ok", "ok", "ok"])
    calls = sorted((start, end, child) for child, report in enumerate(reports) for start, end in report["windows"])
    for (_, end, _), (start, _, _) in zip(calls, calls[1:]):
        assert end <= start  # no two calls (or preparations) overlap, whichever children made them
    changes = sum(a[2] != b[2] for a, b in zip(calls, calls[1:]))
    assert changes >= 3 * 5  # interleaved round after round, not one child after another
    for report, seat in zip(reports, turns.seats):
        assert report["timed"] == seat.runs >= BUDGET.min_runs
        assert seat.seconds >= BUDGET.min_seconds or seat.runs >= BUDGET.max_runs


def test_a_child_that_dies_leaves_the_rounds_and_the_others_finish(tmp_path: Path) -> None:
    reports, turns = _run(tmp_path, ["ok", "crash", "absent", "ok"])
    assert reports[1] is None and reports[2] is None
    assert [seat.out for seat in turns.seats] == [True] * 4
    assert turns.seats[1].runs < BUDGET.min_runs
    for index in (0, 3):
        assert reports[index]["timed"] == turns.seats[index].runs >= BUDGET.min_runs


def test_a_turn_spreads_the_budget_over_the_rounds() -> None:
    assert TurnSize.of(Budget(max_runs=500, min_seconds=1.0)) == TurnSize(calls=25, seconds=1.0 / ROUNDS)
    assert TurnSize.of(Budget(max_runs=3, min_seconds=0.0)).calls == 1
