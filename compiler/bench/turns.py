"""Backends timed in turns: one child process runs a slice of calls while the others wait.

`tfcheck bench` measures each backend in its own process (`compiler/bench/latency.py`). Timed one after
the other, a backend measured while the machine was busy was compared with one measured while it
was quiet: on this project's shared 2-core machine one artifact took 9 and 37 ms in two
consecutive runs, and the sweep's ratios to `tf.function` moved with the load rather than the
code. In turns, every backend sees the same machine: the parent hands a turn to one child at a
time, round after round, until every backend has its budget, so a change of load falls on all of
them alike. A child prepares (converts, loads the artifact) in its first turn, the warm-up, so
the children prepare one at a time, as they did when each ran alone: converting ConvNeXtXLarge to
TFLite peaks at 19.5 GB, which beside another child's conversion the machine did not have.

Protocol, two pipes per child, whose descriptors are in its request (`BenchRequest.turns`): the
parent writes one byte to the child's `go` pipe, `w` (warm up) or `t` (a timed turn), and the
child answers one line on its `done` pipe, `<runs> <seconds>` timed so far; the parent closing
`go` (an end of file) tells the child to stop and report. A child that crashes or times out closes its `done` pipe and
leaves the rounds; the others go on.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, BinaryIO

from tfcheck.compiler.process.messages import Budget

ROUNDS = 20  # a budget is spread over about this many turns per backend
WARM_UP, TIMED = b"w", b"t"


@dataclass(frozen=True)
class TurnSize:
    """How long one timed turn lasts: `calls` calls or `seconds`, whichever ends first (at least
    one call), so that a budget's `max_runs` and `min_seconds` each take about `ROUNDS` turns."""

    calls: int
    seconds: float

    @classmethod
    def of(cls, budget: Budget) -> TurnSize:
        return cls(calls=max(1, math.ceil(budget.max_runs / ROUNDS)), seconds=budget.min_seconds / ROUNDS)


# --- child side ----------------------------------------------------------------------------------


def timed_turns(prepare: Callable[[], Callable[[], Any]], budget: Budget, fds: Sequence[int],
                clock: Callable[[], float]) -> list[float]:
    """Child: wait for each turn on `fds[0]`, run it, report on `fds[1]`; the time of every
    timed call (by `clock`), once the parent says stop. The first turn, the warm-up, gets the
    call from `prepare`."""
    size = TurnSize.of(budget)
    times: list[float] = []
    with os.fdopen(fds[0], "rb", buffering=0) as go, os.fdopen(fds[1], "w", buffering=1) as done:
        if go.read(1) != WARM_UP:  # stopped before its first turn
            return times
        call = prepare()
        for _ in range(budget.warmup):
            call()
        done.write("0 0.0\n")
        while go.read(1) == TIMED:
            times += _turn(call, size, clock)
            done.write(f"{len(times)} {sum(times)!r}\n")
    return times


def _turn(call: Callable[[], Any], size: TurnSize, clock: Callable[[], float]) -> list[float]:
    times: list[float] = []
    while len(times) < size.calls and (not times or sum(times) < size.seconds):
        before = clock()
        call()
        times.append(clock() - before)
    return times


# --- parent side ---------------------------------------------------------------------------------


@dataclass
class _Seat:
    """The parent's ends of one child's pipes, and what it has timed so far."""

    go: int
    done: BinaryIO
    runs: int = 0
    seconds: float = 0.0
    out: bool = False  # crashed, timed out or never started: no more turns


class Turns:
    """The parent's side: pipes for `count` children, then rounds of turns until every child
    has its budget (`run`). Use as a context manager: leaving it closes every pipe, so a child
    still waiting for a turn (after an error or Ctrl-C here) reads an end of file and stops."""

    def __init__(self, count: int, budget: Budget) -> None:
        self.budget = budget
        self.seats: list[_Seat] = []
        self.child_ends: list[tuple[int, int]] = []
        for _ in range(count):
            go_read, go_write = os.pipe()
            done_read, done_write = os.pipe()
            self.seats.append(_Seat(go_write, os.fdopen(done_read, "rb")))
            self.child_ends.append((go_read, done_write))

    def __enter__(self) -> Turns:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for seat in self.seats:
            _close(seat)

    def leave(self, index: int) -> None:
        """Child `index` will never start (its request could not be made): no turns for it."""
        _close(self.seats[index])
        for fd in self.child_ends[index]:
            os.close(fd)

    def run(self, on_round: Callable[[int], None] = lambda _round: None) -> None:
        """The warm-up round, then timed rounds until every child still in is satisfied; then
        stop them all. `on_round` hears each timed round's number."""
        self._round(WARM_UP)
        rounds = 0
        while any(not seat.out and not self._satisfied(seat) for seat in self.seats):
            rounds += 1
            on_round(rounds)
            self._round(TIMED, backwards=rounds % 2 == 0)
        for seat in self.seats:
            _close(seat)

    def _satisfied(self, seat: _Seat) -> bool:
        budget = self.budget
        return self._at_most(seat) or (seat.runs >= budget.min_runs and seat.seconds >= budget.min_seconds)

    def _at_most(self, seat: _Seat) -> bool:
        return seat.runs >= self.budget.max_runs or seat.seconds >= self.budget.max_seconds

    def _round(self, command: bytes, backwards: bool = False) -> None:
        """One turn for each child in, one child at a time; a child at its maximum sits it out
        (still waiting, so it takes no CPU from the others). Every other round goes backwards, so
        that no backend always follows the same one (whose thread pool may still be spinning
        down when the next turn starts)."""
        for seat in reversed(self.seats) if backwards else self.seats:
            if not seat.out and not (command == TIMED and self._at_most(seat)):
                self._turn(seat, command)

    def _turn(self, seat: _Seat, command: bytes) -> None:
        try:
            os.write(seat.go, command)
        except BrokenPipeError:  # the child is gone
            _close(seat)
            return
        line = seat.done.readline()
        if not line:  # it crashed, failed or timed out during the turn (or while preparing)
            _close(seat)
            return
        runs, seconds = line.split()
        seat.runs, seat.seconds = int(runs), float(seconds)


def _close(seat: _Seat) -> None:
    """Stop a child's turns: closing `go` is the stop signal (an end of file)."""
    if not seat.out:
        seat.out = True
        os.close(seat.go)
        seat.done.close()
