"""Lint work grows linearly with the number of functions in a file (issue 18): counted, not timed.

A rule or engine step that walks the module, or scans every call of the file, once per function does
about four times the work on a file with twice the functions. The Python lines executed (counted with
`sys.settrace`) measure that work exactly, whatever the machine's load. The file is the scaling
benchmark's generated code (benchmarks/lint_scale.py), which exercises every rule.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest

from tests.conftest import load_benchmark
from tfcheck.engine.facts import FileFacts
from tfcheck.engine.source import parse_source
from tfcheck.rule import all_rules

FUNCTIONS = 300
# Linear work doubles (2.0); a quadratic step on top of it shows as 2.5 or more at this size.
MAX_RATIO = 2.3


def _generator() -> ModuleType:
    return load_benchmark("lint_scale")


def _executed_lines(work: Callable[[], Any]) -> int:
    """How many Python lines (and calls) `work` executes, the iterator it returns consumed."""
    count = 0

    def trace(frame: FrameType, event: str, arg: object) -> Callable[..., object]:
        nonlocal count
        count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        result = work()
        if result is not None:
            list(result)
    finally:
        sys.settrace(previous)
    return count


def _work_by_step(text: str) -> dict[str, int]:
    """Lines executed building the file's facts ("engine") and by each rule's check."""
    source = parse_source("generated.py", text)
    built: list[FileFacts] = []
    work = {"engine": _executed_lines(lambda: built.append(FileFacts(source, "generated")))}
    for rule in all_rules():
        if not rule.reported_by_engine:
            work[rule.code] = _executed_lines(lambda: rule().check(built[0]))
    return work


def _superlinear_steps(generate: Callable[[int], str], size: int) -> dict[str, float]:
    """The steps whose work grows more than linearly from `size` to `2 * size`, with their ratios."""
    _work_by_step(generate(20))  # first use fills caches that are not the file's (canonical names)
    small, large = _work_by_step(generate(size)), _work_by_step(generate(2 * size))
    ratios = {step: large[step] / small[step] for step in small if small[step]}
    return {step: round(ratio, 2) for step, ratio in ratios.items() if ratio > MAX_RATIO}


@pytest.mark.slow
def test_no_engine_step_or_rule_does_superlinear_work_in_the_number_of_functions() -> None:
    superlinear = _superlinear_steps(_generator().generate, FUNCTIONS)
    assert not superlinear, f"work for {2 * FUNCTIONS} vs {FUNCTIONS} functions (linear: 2.0): {superlinear}"


# Patterns that the benchmark's file has too rarely to show at the size above, repeated alone.
PATTERNS = {
    # TFC012: tf.functions called with new plain objects; "called with one before?" must not rescan all calls.
    "new objects": ("import tensorflow as tf\nclass Options:\n    pass\n",
                    "@tf.function\ndef f_{i}(x, o):\n    return x\nf_{i}(1, Options())\nf_{i}(2, Options())\n"),
    # TFC016: classes sharing method and attribute names; "is `_reset` only called from set-up code?"
    # must be answered once per name, not by rescanning every class's `self._reset()` calls per read.
    "shared method names": ("import tensorflow as tf\n",
                            "class Counter{i}(tf.Module):\n    def __init__(self):\n        self.offset = 0.0\n"
                            "        self._reset()\n    def _reset(self):\n        self.offset = 0.0\n"
                            "@tf.function\ndef evaluate_{i}(counter, x):\n    return x + counter.offset\n"
                            "counter_{i} = Counter{i}()\ncounter_{i}.offset += 1.0\n"),
    # TFC003: a closure whose captured local is rebound after a call; its callers must not be rescanned.
    "rebound closure": ("import tensorflow as tf\n",
                        "def outer_{i}():\n    scale = 1\n    @tf.function\n    def inner(x):\n"
                        "        return x * scale\n    inner(1)\n    scale = 2\n    inner(2)\n"),
}


@pytest.mark.slow
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_repeated_patterns_take_linear_work(pattern: str) -> None:
    prologue, block = PATTERNS[pattern]
    superlinear = _superlinear_steps(lambda n: prologue + "".join(block.format(i=i) for i in range(n)), 200)
    assert not superlinear, f"work for 400 vs 200 repetitions of {pattern!r} (linear: 2.0): {superlinear}"
