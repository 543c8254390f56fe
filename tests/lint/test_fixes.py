"""`tfcheck check --fix / --unsafe-fixes / --diff` on real files, and the fix machinery under them."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import libcst
import pytest

from tfcheck.engine import analyze_source
from tfcheck.findings import Edit, Finding, Fix, Severity
from tfcheck.edits import MAX_PARSE_CHARS, call_code, expression_code, parses, replace_statement
from tfcheck.fixes import apply_fixes, fix_files, fix_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lint"


@pytest.fixture
def fixture_copy(tmp_path: Path) -> Callable[[str], Path]:
    """Copy a fixture file into a fresh folder (fixtures/ itself is excluded from linting)."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copy(FIXTURES / name, target)
        return target

    return copy


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _changed_lines(before: list[str], after: list[str]) -> list[int]:
    assert len(before) == len(after), "these fixes replace single lines; the line count must not change"
    return [number for number, (old, new) in enumerate(zip(before, after), start=1) if old != new]


def _codes(cli_output: str) -> list[str]:
    return [part for part in cli_output.split() if part.startswith("TFC") and part[3:].isdigit()]


# -- the command line on real files -----------------------------------------------------------------
def test_diff_shows_safe_fixes_and_writes_nothing(fixture_copy, run_cli) -> None:
    path = fixture_copy("state_fixable.py")
    before = path.read_bytes()
    result = run_cli(path.parent, "check", "--diff", path.name)
    assert result.exit_code == 1, result.output
    assert path.read_bytes() == before
    assert "--- a/state_fixable.py" in result.stdout and "+++ b/state_fixable.py" in result.stdout
    assert '+    tf.print( "train_step got" , x )   # TFC001: safe fix -> tf.print' in result.stdout
    assert "+    tf.debugging.assert_greater(tf.reduce_sum(x), 0" in result.stdout
    assert "reduce_all(tf.math.is_finite" not in result.stdout  # unsafe: not without --unsafe-fixes
    assert "1 more fixable with --unsafe-fixes" in result.stderr


def test_diff_with_fix_still_writes_nothing_and_errors_are_reported(fixture_copy, run_cli) -> None:
    path = fixture_copy("state_fixable.py")
    before = path.read_bytes()
    result = run_cli(path.parent, "check", "--fix", "--diff", "missing.py", path.name)
    assert path.read_bytes() == before
    assert "+    tf.print(" in result.stdout
    assert "missing.py" in result.stderr and result.exit_code == 2


def test_diff_exits_zero_when_nothing_is_fixable(fixture_copy, run_cli) -> None:
    path = fixture_copy("state_bad.py")  # findings, but none has a fix
    result = run_cli(path.parent, "check", "--diff", path.name)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""


def test_fix_applies_safe_fixes_keeps_formatting_and_reports_the_rest(fixture_copy, run_cli) -> None:
    path = fixture_copy("state_fixable.py")
    before = _lines(path)
    result = run_cli(path.parent, "check", "--fix", "--no-show-source", path.name)
    after = _lines(path)
    libcst.parse_module(path.read_text(encoding="utf-8"))  # still parses
    assert _changed_lines(before, after) == [9, 10, 11]
    assert after[8] == '    tf.print( "train_step got" , x )   # TFC001: safe fix -> tf.print'
    assert after[9].startswith("    tf.debugging.assert_greater(tf.reduce_sum(x), 0, message=\"empty batch\")  #")
    # What is left: the unsafe TFC008 and the TFC002 without a fix; exit 1 because findings remain.
    assert result.exit_code == 1
    assert sorted(_codes(result.stdout)) == ["TFC002", "TFC008"]
    assert "fixed 3 findings in 1 file" in result.stderr


def test_unsafe_fixes_apply_the_rest(fixture_copy, run_cli) -> None:
    path = fixture_copy("state_fixable.py")
    before = _lines(path)
    result = run_cli(path.parent, "check", "--fix", "--unsafe-fixes", "--no-show-source", path.name)
    after = _lines(path)
    assert _changed_lines(before, after) == [9, 10, 11, 12]
    assert after[11].startswith("    tf.debugging.Assert(tf.reduce_all(tf.math.is_finite(x)), ['x must be finite'])")
    assert after[13] == '    print("suppressed", y)  # tfcheck: ignore[TFC001]'  # suppressed: left alone
    assert after[-1] == '    print("eager code keeps print", x)'  # not graph code
    assert _codes(result.stdout) == ["TFC002"]
    rerun = run_cli(path.parent, "check", "--select", "TFC001,TFC008", path.name)
    assert rerun.exit_code == 0, rerun.output


def test_fix_keeps_crlf_newlines_and_a_byte_order_mark(fixture_copy, run_cli) -> None:
    path = fixture_copy("state_fixable.py")
    original = path.read_text(encoding="utf-8")
    path.write_bytes(b"\xef\xbb\xbf" + original.replace("\n", "\r\n").encode("utf-8"))
    result = run_cli(path.parent, "check", "--fix", path.name)
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf"), result.output
    assert data.count(b"\r\n") == original.count("\n") and b"\n" not in data.replace(b"\r\n", b"")
    assert b"    tf.print( \"train_step got\" , x )" in data


def test_fix_on_a_folder_fixes_every_file(fixture_copy, run_cli) -> None:
    first = fixture_copy("state_fixable.py")
    second = fixture_copy("print_in_graph.py")
    result = run_cli(first.parent, "check", "--fix", "--select", "TFC001", ".")
    assert result.exit_code == 0, result.output
    assert "tf.print(" in first.read_text() and "tf.print(" in second.read_text()
    assert "fixed 2 findings in 2 files" in result.stderr


def test_a_file_that_vanished_before_fixing_is_reported_not_fatal(tmp_path: Path) -> None:
    finding = Finding("gone.py", 1, 1, 1, 2, "TFC001", "print-in-graph", Severity.WARNING, "m",
                      _fix((1, 1, 1, 2, "y")))
    run = fix_files([finding], {"gone.py": tmp_path / "gone.py"}, lambda path: lambda text: [], unsafe=False)
    assert run.files == [] and run.errors and run.errors[0].startswith("gone.py: not fixed")


# -- the machinery --------------------------------------------------------------------------------
def _fix(*edits: tuple[int, int, int, int, str], safe: bool = True) -> Fix:
    return Fix("test", tuple(Edit(*edit) for edit in edits), safe)


def test_overlapping_fixes_wait_for_the_next_round() -> None:
    text = "a = 1\nb = 2\n"
    first = _fix((1, 5, 1, 6, "10"))
    overlapping = _fix((1, 1, 1, 6, "a = 3"))
    separate = _fix((2, 5, 2, 6, "20"))
    fixed, applied = apply_fixes(text, [first, overlapping, separate])
    assert fixed == "a = 10\nb = 20\n"
    assert applied == [first, separate]


def test_two_insertions_at_one_point_clash() -> None:
    fixed, applied = apply_fixes("x\n", [_fix((1, 1, 1, 1, "a")), _fix((1, 1, 1, 1, "b"))])
    assert fixed == "ax\n" and len(applied) == 1


def test_a_fix_that_breaks_the_file_is_not_applied() -> None:
    text = "def f(x):\n    return x\n"
    broken = _fix((2, 12, 2, 13, "x +"))
    good = _fix((1, 7, 1, 8, "y"), (2, 12, 2, 13, "y"))
    fixed, applied = apply_fixes(text, [broken])
    assert fixed == text and applied == []
    fixed, applied = apply_fixes(text, [good, _fix((1, 1, 1, 4, "return"))])
    assert fixed == "def f(y):\n    return y\n" and applied == [good]


def test_fix_text_relints_between_rounds() -> None:
    """Round one applies the first of two overlapping fixes; the re-lint offers the second again."""
    text = "value = old\n"

    def finding(fix: Fix) -> Finding:
        return Finding("f.py", 1, 1, 1, 1, "TFC999", "test", Severity.WARNING, "m", fix)

    def relint(new_text: str) -> list[Finding]:
        if "old" not in new_text:
            return []
        column = new_text.index("old") + 1
        return [finding(_fix((1, column, 1, column + 3, "new")))]

    first = finding(_fix((1, 1, 1, 6, "result")))
    second = finding(_fix((1, 1, 1, 12, "value = new")))
    fixed, applied = fix_text(text, [first, second], relint, unsafe=False)
    assert fixed == "result = new\n" and applied == 2


def test_unsafe_fixes_need_the_flag() -> None:
    unsafe = Finding("f.py", 1, 1, 1, 1, "TFC999", "t", Severity.WARNING, "m", _fix((1, 1, 1, 2, "y"), safe=False))
    assert fix_text("x\n", [unsafe], lambda _: [], unsafe=False) == ("x\n", 0)
    assert fix_text("x\n", [unsafe], lambda _: [], unsafe=True) == ("y\n", 1)


def test_code_building_helpers_make_valid_python() -> None:
    source = "import tensorflow as tf\ndef f(a, b):\n    assert (a >\n            b), 'msg'\n"
    facts = analyze_source("f.py", source)
    stmt = facts.source.tree.body[1].body[0]
    assert isinstance(stmt, ast.Assert)
    condition = expression_code(facts, stmt.test)
    assert condition == "(a >\n            b)"  # a bare `a >\n b` would not parse on its own
    call = call_code("tf.debugging.Assert", condition, "[" + expression_code(facts, stmt.msg) + "]")
    edit = replace_statement(facts, stmt, call)
    fixed, applied = apply_fixes(source, [Fix("assert", (edit,))])
    assert applied and parses(fixed)
    assert "    tf.debugging.Assert((a >\n            b), ['msg'])\n" in fixed
    assert call_code("f", "x", axis="1") == "f(x, axis=1)"
    two = replace_statement(facts, stmt, "x = 1\n    y = 2")  # lines after the first carry their indentation
    assert parses(apply_fixes(source, [Fix("two", (two,))])[0])
    with pytest.raises(ValueError):
        call_code("f", "x +")
    with pytest.raises(ValueError):
        replace_statement(facts, stmt, "def (")


@pytest.mark.slow
def test_code_too_deep_for_libcst_on_the_main_thread_gets_no_fix_and_no_crash(tmp_path: Path) -> None:
    """A 12,000-operand `and` overflowed libcst's native parser on the 8 MiB main-thread stack: a segfault
    that ended `tfcheck check` (building the TFC008 fix) and `--diff` (checking the TFC001 fix). Found by
    tests/fuzz. Run in a child process, so that a regression fails this test instead of killing pytest."""
    chain = " and ".join(["x"] * 12_000)
    path = tmp_path / "deep.py"
    path.write_text("import tensorflow as tf\n\n@tf.function\ndef f(x):\n    print(x)\n"
                    f"    assert tf.reduce_all(x), ({chain})\n    return x\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "tfcheck", "check", "--diff", "--unsafe-fixes", str(path)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1, run.stderr[-2000:]
    assert "+    tf.print(x)\n" in run.stdout and "tf.debugging" not in run.stdout  # the assert has no fix
    assert "would fix 1 finding in 1 file" in run.stderr and "internal error" not in run.stderr


def test_libcst_is_never_given_more_than_max_parse_chars() -> None:
    """Beyond the 512 MiB stack's reach, the fix is refused rather than risking the process."""
    text = "x = 1\n" + "#" * MAX_PARSE_CHARS + "\n"
    assert ast.parse(text) and not parses(text)
    with pytest.raises(ValueError):
        call_code("f", "x" * (MAX_PARSE_CHARS + 1))


def test_fixes_still_parse_where_no_thread_with_a_large_stack_can_start(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    assert parses("x = 1\n") and not parses("x = (\n")
