"""The cost of 'is this a tensor?' (tfcheck.engine.tensors) on a value that names itself many times.

tests/fuzz's larger budget found it (mutant 1847 of TFC037's examples): `c = (c and c and ... c)` with
4,000 operands in a tf.function made `surely_tensor` follow every operand's binding back to the same
value, 4,000 ** 3 times, and CI ran out of time. The answer for one value at one depth is now computed
once, so the work grows with the operands, not with a power of them. Counted, not timed.
"""

from __future__ import annotations

import textwrap

import pytest

from tfcheck.engine import analyze_source, tensors

OPERANDS = 60


def _program(operator: str, operand: str = "c") -> str:
    chain = f" {operator} ".join([operand] * OPERANDS)
    return textwrap.dedent(f"""\
        import tensorflow as tf

        @tf.function
        def g(x):
            {operand} = tf.constant(1) > x
            c = ({chain})
            if c:
                x = x + 1
            return x
        """)


@pytest.mark.parametrize("operator", ["and", "<", "+"])
def test_a_value_naming_itself_is_judged_once_per_depth(operator: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = tensors.surely_tensor

    def counted(*args: object, **kwargs: object) -> bool:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(tensors, "surely_tensor", counted)
    facts = analyze_source("m.py", _program(operator), "m")
    for node in facts.source.tree.body[-1].body:
        tensors.surely_tensor(facts, getattr(node, "test", None))
    # 7 depths x (60 operands + the two bindings' values): the old walk made 60 ** 3 calls
    assert calls < 10 * OPERANDS, calls


def test_the_answer_is_the_same() -> None:
    """The memo changes the cost, not the answer: a chain of one tensor is a tensor; a chain of itself
    is not surely one (the cycle ends at the depth limit, as before)."""
    facts = analyze_source("m.py", _program("and", operand="d"), "m")
    assert tensors.surely_tensor(facts, facts.source.tree.body[-1].body[2].test)
    facts = analyze_source("m.py", _program("and"), "m")
    assert not tensors.surely_tensor(facts, facts.source.tree.body[-1].body[2].test)
