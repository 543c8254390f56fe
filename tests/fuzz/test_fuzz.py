"""The fuzzer (tests/fuzz/harness.py) in CI: fixed budgets, fixed seed, no internal error allowed.

The large run (10,000+ programs) is `python -m tests.fuzz.harness --count 10000`; docs/fuzzing.md
has its figures. The last tests check the harness itself: a crash or a broken fix must be caught.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

import tfcheck.analysis
from tfcheck.engine import ParseFailure
from tfcheck.findings import Edit, Finding, Fix
from tfcheck.rule import Rule
from tfcheck.rules.tfc001_print_in_graph import PrintInGraph
from tests.fuzz.harness import SEED, Budget, check_program, mutant, run, seed_programs

PROGRAM = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    print(x)\n    return x\n"


def _assert_none(problems: list) -> None:
    assert not problems, f"{len(problems)} problems; the first ones:\n\n" + "\n\n".join(map(str, problems[:3]))


def test_fuzz_ci_budget() -> None:
    """~460 programs: 60 from_grammar and 10 from_node programs (each raw and as graph code), 320 mutants."""
    _assert_none(run(Budget(grammar=60, node=10, mutants=320)))


@pytest.mark.slow
def test_fuzz_larger_budget() -> None:
    """~4,400 programs, none of them the CI budget's mutants."""
    _assert_none(run(Budget(grammar=500, node=40, mutants=3300, first_mutant=320)))


def test_mutants_are_reproducible_from_their_number() -> None:
    seeds = seed_programs()
    assert mutant(SEED, 41, seeds) == mutant(SEED, 41, seeds)
    assert mutant(SEED, 41, seeds) != mutant(SEED, 42, seeds)


def test_the_harness_reports_a_crashing_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(self: Rule, facts: object) -> Iterator[Finding]:
        raise KeyError("boom")

    monkeypatch.setattr(PrintInGraph, "check", crash)
    problems = check_program(PROGRAM, "test")
    assert len(problems) == 1
    assert problems[0].message.startswith("internal error: fuzz.py: internal error in rule TFC001 (print-in-graph): "
                                          "KeyError: 'boom'")


def test_the_harness_reports_a_fix_that_breaks_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    real_check = PrintInGraph.check

    def broken_fix(self: PrintInGraph, facts: object) -> Iterator[Finding]:
        for finding in real_check(self, facts):
            yield replace(finding, fix=Fix("break it", (Edit(5, 5, 5, 6, "(("),)))

    monkeypatch.setattr(PrintInGraph, "check", broken_fix)
    problems = check_program(PROGRAM, "test")
    assert problems and problems[0].message.startswith("the fix of TFC001 at line 5 breaks the file")


def test_the_harness_reports_a_wrong_parse_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_program("def f(:\n", "test") == []  # TFC000, as it should be

    def refuse(path: str, text: str) -> None:
        raise ParseFailure(path, "syntax error: refused")

    monkeypatch.setattr(tfcheck.analysis, "parse_source", refuse)
    assert [p.message for p in check_program(PROGRAM, "test")] == ["Python parses it, but TFC000: syntax error: refused"]


def test_the_harness_reports_an_exception_escaping_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(text: str) -> None:
        raise IndexError("boom")

    monkeypatch.setattr(tfcheck.analysis, "suppressions", crash)
    problems = check_program(PROGRAM, "test")
    assert len(problems) == 1 and problems[0].message.startswith("exception escaped analyze:")
