"""The reference texts' examples for TFC006, TFC008, TFC010, TFC011, TFC013, TFC014, TFC015.

Each case is code from `shared/reference/*.txt` (the tf.function guide, its older edition, and the
eager-vs-graph article) with the exact set of codes that ALL rules together report on it: bad examples
must be flagged by their rule, and the fixes the texts recommend must produce no finding from any rule.
Where the article describes code in words only, the case transcribes that description (marked so).
Then the fixtures `fixtures/lint/misc_bad.py` / `misc_good.py`, and TFC008's fixes applied to a file.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from tfcheck.config import Config
from tfcheck.engine import analyze_source
from tfcheck.edits import parses
from tfcheck.fixes import apply_fixes
from tfcheck.rules.tfc008_python_assert import PythonAssert
from tfcheck.runner import lint_paths

from tests.lint.helpers import FIXTURES, codes_of_all_rules, expected_findings, fixture_findings

CASES: dict[str, tuple[str, set[str]]] = {
    # tf_function_guide.txt, "Recursive tf.functions are not supported".
    "guide-recursive-fn": ("""
import tensorflow as tf

@tf.function
def recursive_fn(n):
  if n > 0:
    return recursive_fn(n - 1)
  else:
    return 1

recursive_fn(tf.constant(5))  # Bad - maximum recursion error.
""", {"TFC006"}),
    # (tf_function_guide_older.txt's tf.py_function "exit hatch", reported as TFC015 only, is a case of
    # tests/lint/test_reference_a.py: "side-effect-in-py-function".)
    # tf_function_guide.txt, "Controlling retracing": a new Function forces retracing, on purpose, at
    # module level (not a loop). The prints are there to show tracing, which they say: no finding.
    "guide-new-function-forces-retrace": ("""
import tensorflow as tf

def f():
  print('Tracing!')
  tf.print('Executing')

tf.function(f)()
tf.function(f)()
""", set()),
    # tf_function_guide.txt, "Obtaining concrete functions": asserts outside graph code are fine.
    "guide-concrete-function-assert": ("""
import tensorflow as tf

@tf.function
def pow(a, b):
  return a ** b

square = pow.get_concrete_function(a=tf.TensorSpec(None, tf.float32), b=2)
print(square)
assert square(tf.constant(10.0)) == 100
""", set()),
    # eager_vs_graph_article.txt, "Not to use Assert" (described in words; transcribed): a Python
    # assert inside a tf.function throws ...
    "article-assert-bad": ("""
import tensorflow as tf

@tf.function
def f(x):
  assert tf.reduce_all(x > 0)
  return x
""", {"TFC008"}),
    # ... use tf.debugging.assert_{condition} instead, for both modes.
    "article-assert-fix": ("""
import tensorflow as tf

@tf.function
def f(x):
  tf.debugging.assert_greater(x, 0.0)
  return x
""", set()),
    # eager_vs_graph_article.txt (described in words; transcribed): run_functions_eagerly(True) before
    # the square function and False later, to break inside it in a debugger.
    "article-run-functions-eagerly-on-then-off": ("""
import tensorflow as tf

tf.config.run_functions_eagerly(True)

@tf.function
def square(x):
  return x * x

square(tf.constant(2.0))
tf.config.run_functions_eagerly(False)
""", set()),
    # The same, with the switch left on: every tf.function in the process then runs eagerly.
    "article-run-functions-eagerly-left-on": ("""
import tensorflow as tf

tf.config.run_functions_eagerly(True)

@tf.function
def square(x):
  return x * x

square(tf.constant(2.0))
""", {"TFC014"}),
    # tf_function_guide.txt, "Executing Python side effects": tf.print, not print, runs on every call;
    # the guide's takeaway "NumPy and Python calls are converted to constants" is about Python values.
    "guide-takeaway-numpy-constants": ("""
import numpy as np
import tensorflow as tf

@tf.function
def f(x):
  tf.print("Executed with", x)
  return x * np.pi
""", set()),
}


codes = codes_of_all_rules


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_case(name: str) -> None:
    snippet, expected = CASES[name]
    assert codes(snippet) == expected






def test_misc_bad_fixture_reports_exactly_its_expectations() -> None:
    path = FIXTURES / "misc_bad.py"
    assert fixture_findings(path) == expected_findings(path)


def test_misc_good_fixture_reports_nothing() -> None:
    assert fixture_findings(FIXTURES / "misc_good.py") == []


def test_fix_and_diff_rewrite_the_tfc008_asserts_of_a_real_file(tmp_path: Path, run_cli) -> None:
    target = tmp_path / "misc_bad.py"
    shutil.copy(FIXTURES / "misc_bad.py", target)
    diff = run_cli(tmp_path, "check", "--diff", "--no-cache", "misc_bad.py")
    assert diff.exit_code == 1
    assert '+    tf.debugging.Assert(tf.reduce_all(x >= 0.0), ["x must be non-negative"])' in diff.stdout
    assert "+    tf.debugging.assert_greater(total, 0.0)" in diff.stdout
    assert target.read_text() == (FIXTURES / "misc_bad.py").read_text()  # --diff writes nothing
    run_cli(tmp_path, "check", "--fix", "--no-cache", "misc_bad.py")
    fixed = target.read_text()
    ast.parse(fixed)
    assert "assert tf.reduce_all" not in fixed and "assert total" not in fixed
    remaining = lint_paths([target], Config(root=tmp_path, select=("ALL",)), jobs=1).findings
    assert "TFC008" not in {f.code for f in remaining}
    assert len(remaining) == len(expected_findings(FIXTURES / "misc_bad.py")) - 2


@pytest.mark.parametrize(("snippet", "replacement", "safe"), [
    ("assert x != y, f'{x}'", "tf.debugging.assert_none_equal(x, y, message=f'{x}')", True),
    ("assert tf.reduce_any(x > 0)", "tf.debugging.Assert(tf.reduce_any(x > 0), ['assert tf.reduce_any(x > 0) failed'])",
     True),
    ("assert x * 2", "tf.debugging.Assert(tf.reduce_all(x * 2), ['assert x * 2 failed'])", False),
    ("assert x > 0 and y > 0", None, None),
])
def test_tfc008_fix_choices(snippet: str, replacement: str | None, safe: bool | None) -> None:
    code = ("import tensorflow as tf\n@tf.function(input_signature=[tf.TensorSpec([], tf.float32)] * 2)\n"
            f"def f(x, y):\n    {snippet}\n    return x\n")
    [finding] = [f for f in PythonAssert().check(analyze_source("e.py", code, "e"))]
    if replacement is None:
        assert finding.fix is None
    else:
        assert finding.fix is not None and finding.fix.safe is safe
        assert [e.replacement for e in finding.fix.edits] == [replacement]
        fixed, applied = apply_fixes(code, [finding.fix])
        assert applied == [finding.fix] and parses(fixed)
