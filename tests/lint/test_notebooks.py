"""Jupyter notebooks: cells joined into one module, IPython syntax skipped, findings at their cell in
every output format, `--fix`/`--diff` written back into the cells with every other byte kept.

The notebooks here are written by the tests (`notebook(...)` below, in the layouts Jupyter, Colab and
hand-written files use); `test_public_notebooks` runs on real notebooks from public TensorFlow
repositories when `TFCHECK_NOTEBOOK_CORPUS` names a folder of them (see docs/notebooks.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tfcheck.config import Config, ConfigError, parse_table
from tfcheck.findings import Edit, Finding, Fix, Severity
from tfcheck.notebook import Notebook, load_notebook, python_lines
from tfcheck.runner import lint_paths

SETUP = "!pip install -q tensorflow\nimport tensorflow as tf\n"
TRACED_PRINT = "@tf.function\ndef f(x):\n    print(x)\n    return x\n"


def notebook(*cells: Any, indent: int | None = 1, as_string: bool = False, language: str | None = "python",
             ensure_ascii: bool = False) -> str:
    """A notebook's JSON text: a str is a code cell, (kind, text) a markdown/raw cell, a dict a cell as is."""
    made: list[dict[str, Any]] = []
    for cell in cells:
        if isinstance(cell, dict):
            made.append(cell)
            continue
        kind, text = ("code", cell) if isinstance(cell, str) else cell
        source = text if as_string else text.splitlines(keepends=True)
        extra = {"execution_count": 3, "outputs": [{"name": "stdout", "output_type": "stream", "text": ["1\n"]}]} \
            if kind == "code" else {}
        made.append({"cell_type": kind, "metadata": {"id": f"c{len(made)}"}, "source": source, **extra})
    kernel = {"display_name": "K", "name": "k", **({"language": language} if language else {})}
    document = {"cells": made, "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5}
    separators = (",", ":") if indent is None else None
    return json.dumps(document, indent=indent, ensure_ascii=ensure_ascii, separators=separators) + "\n"


@pytest.fixture
def lint(tmp_path: Path) -> Callable[..., list[Finding]]:
    """Write files into a folder and lint it; returns the findings."""

    def run(files: dict[str, str], config: Config | None = None) -> list[Finding]:
        for name, text in files.items():
            (tmp_path / name).write_text(text, encoding="utf-8")
        result = lint_paths([tmp_path], config or Config(root=tmp_path, select=("ALL",)), jobs=1)
        assert not result.errors
        return result.findings

    return run


def _file_line(raw: str, needle: str) -> int:
    return raw[:raw.index(needle)].count("\n") + 1


def _where(findings: list[Finding]) -> list[tuple[str, int | None, int, int, str]]:
    return [(Path(f.path).name, f.cell, f.line, f.column, f.code) for f in findings]


# -- the module: cells, IPython syntax, other languages ----------------------------------------------
def test_a_print_in_a_tf_function_is_found_at_its_cell_line_and_file_line(lint) -> None:
    raw = notebook(("markdown", "# Title\n"), SETUP, TRACED_PRINT)
    [finding] = lint({"model.ipynb": raw})
    assert (finding.code, finding.cell, finding.line, finding.column, finding.end_column) == ("TFC001", 3, 3, 5, 13)
    assert finding.file_line == finding.file_end_line == _file_line(raw, '"    print(x)')


def test_names_and_graph_code_flow_across_cells(lint) -> None:
    """`g` becomes graph code by a call in a later cell; the message names that cell."""
    raw = notebook(SETUP, "def g(x):\n    print(x)\n    return x\n", "x = 1\n", "h = tf.function(g)\n")
    [finding] = lint({"nb.ipynb": raw})
    assert (finding.cell, finding.line, finding.code) == (2, 2, "TFC001")
    assert "passed to tf.function at line 1 of cell 4" in finding.message


def test_ipython_syntax_is_skipped_without_moving_lines() -> None:
    source = ("%matplotlib inline\nfiles = !ls\n%timeit f(1)\ntf.function?\n??tf\nfor i in range(2):\n"
              "    !echo {i}\nimport tensorflow as tf\n")
    python = python_lines(source)
    assert python is not None
    assert python.lines == ["pass", "pass", "pass", "pass", "pass", "for i in range(2):", "    pass",
                            "import tensorflow as tf"]
    assert python.masked == {1, 2, 3, 4, 5, 7}


def test_continued_shell_lines_and_automagics_are_skipped() -> None:
    """From tensorflow/examples notebooks: a `!cmd \\` continued on indented lines, and `ls dir` without `%`."""
    python = python_lines("!python -m gen \\\n  --data_dir=raw \\\n  --out=x\nls ./data/train/\nls = 3\npip install -q tf\n")
    assert python is not None and python.lines == ["pass", "pass", "pass", "pass", "ls = 3", "pass"]


def test_a_cell_that_parses_keeps_lines_that_only_look_like_magics() -> None:
    source = 'template = """\n%d items\n!important\n"""\n'
    assert python_lines(source).lines == source.splitlines()  # type: ignore[union-attr]


def test_cells_in_other_languages_and_other_kernels_are_not_linted(lint) -> None:
    bash = "%%bash\n@tf.function\ndef f(x):\n    print(x)\n"
    writefile = "%%writefile train.py\n" + TRACED_PRINT
    vscode_sql = {"cell_type": "code", "metadata": {"vscode": {"languageId": "sql"}}, "outputs": [],
                  "execution_count": None, "source": TRACED_PRINT}
    findings = lint({
        "a.ipynb": notebook(SETUP, bash, writefile, vscode_sql, ("raw", TRACED_PRINT), ("markdown", TRACED_PRINT)),
        "r.ipynb": notebook(SETUP, TRACED_PRINT, language="R"),
    })
    assert findings == []


def test_a_python_cell_magic_keeps_its_body_linted(lint) -> None:
    [finding] = lint({"t.ipynb": notebook(SETUP, "%%time\n" + TRACED_PRINT)})
    assert (finding.cell, finding.line, finding.code) == (2, 4, "TFC001")


# fchollet/deep-learning-with-python-notebooks, chapter10_interpreting-what-convnets-learn.ipynb, cell 4.
BACKEND_MAGIC = ("import os\nfrom IPython.core.magic import register_cell_magic\n\n@register_cell_magic\n"
                 "def backend(line, cell):\n    current, required = os.environ.get('KERAS_BACKEND', ''), "
                 "line.split()[-1]\n    if current == required:\n        get_ipython().run_cell(cell)\n"
                 "    else:\n        print(f'This cell requires the {required} backend.')\n")


def test_a_cell_magic_the_notebook_registers_to_run_python_keeps_its_tensorflow_cells_linted(lint) -> None:
    """The same notebook's cells 23, 27 and 29, cut down: `%%backend tensorflow` defines the tf.function
    that the loop over filters calls with a Python int (a retrace per filter); the `%%backend jax`
    version of the function is another framework's code, not what runs under TensorFlow."""
    tf_cell = "%%backend tensorflow\nimport tensorflow as tf\n\n@tf.function\ndef step(image, index):\n" \
              "    return image * tf.cast(index, tf.float32)\n"
    jax_cell = "%%backend jax\nimport jax\n\n@jax.jit\ndef step(image, index):\n    return image * index\n"
    loop = "def pattern(index):\n    return step(tf.ones([2]), index)\n\nfor index in range(64):\n    pattern(index)\n"
    findings = lint({"ch10.ipynb": notebook(SETUP, BACKEND_MAGIC, tf_cell, jax_cell, loop)})
    assert [(f.cell, f.line, f.code) for f in findings] == [(5, 2, "TFC012")]
    assert python_lines("%%backend tensorflow\nx = 1\n") is None  # a magic nobody registered: not Python


def test_a_cell_ipython_dedents_is_analysed_and_reported_at_its_own_columns(lint) -> None:
    """IPython removes the first line's indentation from a cell (the tensorflow/docs data guide has one)."""
    [finding] = lint({"d.ipynb": notebook(SETUP, "  @tf.function\n  def f(x):\n      print(x)\n")})
    assert (finding.cell, finding.line, finding.column, finding.fix) == (2, 3, 7, None)


def test_a_cell_that_does_not_parse_is_reported_and_the_others_still_analysed(lint) -> None:
    findings = lint({"s.ipynb": notebook(SETUP, "def broken(:\n    pass\n", TRACED_PRINT)})
    assert _where(findings) == [("s.ipynb", 2, 1, 12, "TFC000"), ("s.ipynb", 3, 3, 5, "TFC001")]


def test_suppression_comments_work_in_cells(lint) -> None:
    assert lint({"n.ipynb": notebook(SETUP, TRACED_PRINT.replace("print(x)", "print(x)  # noqa: TFC001"))}) == []


@pytest.mark.parametrize(("raw", "message", "line"), [
    ('{\n "cells": [,\n}', "not a valid notebook: invalid JSON: Expecting value", 2),
    ('[1, 2]', "not a valid notebook: the JSON document is not an object", 1),
    ('{"nbformat": 3, "worksheets": []}', "not a valid notebook: nbformat 3; tfcheck reads nbformat 4", 1),
    ('{"nbformat": 4, "cells": {}}', "not a valid notebook: `cells` is not a list", 1),
    ('{"nbformat": 4,\n "cells": [{"cell_type": "code",\n "source": 7}]}', "cell 1 has no `source`", 1),
])
def test_a_broken_notebook_is_tfc000_with_the_reason_and_the_run_goes_on(lint, raw: str, message: str,
                                                                        line: int) -> None:
    findings = lint({"bad.ipynb": raw, "good.ipynb": notebook(SETUP, TRACED_PRINT)})
    assert [(Path(f.path).name, f.code) for f in findings] == [("bad.ipynb", "TFC000"), ("good.ipynb", "TFC001")]
    assert message in findings[0].message and findings[0].line == line and findings[0].cell is None


def test_a_notebook_that_is_not_utf8_is_tfc000(tmp_path: Path) -> None:
    (tmp_path / "latin.ipynb").write_bytes(notebook("x = 'caf\u00e9'\n").encode("latin-1"))
    [finding] = lint_paths([tmp_path], Config(root=tmp_path, select=("ALL",)), jobs=1).findings
    assert finding.code == "TFC000" and "not UTF-8" in finding.message


def test_a_fix_that_touches_ipython_syntax_or_leaves_its_cell_is_dropped() -> None:
    module = load_notebook("n.ipynb", notebook(SETUP, "!echo 1\nx = 1\n").encode())
    # module lines: 1 `pass` (!pip), 2 import, 3 `pass` (!echo), 4 `x = 1`

    def moved(*edits: Edit) -> Fix | None:
        fix = Fix("f", edits)
        return module.to_cell(Finding("n.ipynb", 4, 1, 4, 2, "TFC001", "x", Severity.WARNING, "m", fix)).fix

    assert moved(Edit(4, 1, 4, 2, "y")) == Fix("f", (Edit(2, 1, 2, 2, "y"),))
    assert moved(Edit(3, 1, 4, 2, "y")) is None  # touches the `!echo` line
    assert moved(Edit(2, 1, 4, 2, "y")) is None  # starts in cell 1
    assert moved(Edit(4, 1, 5, 1, "y")) == Fix("f", (Edit(2, 1, 3, 1, "y"),))  # up to the end of the cell


# -- discovery and configuration ---------------------------------------------------------------------
def test_a_folder_includes_notebooks_unless_include_says_otherwise(lint, tmp_path: Path) -> None:
    files = {"nb.ipynb": notebook(SETUP, TRACED_PRINT), "script.pyw": "import tensorflow as tf\n" + TRACED_PRINT}
    assert [Path(f.path).name for f in lint(files)] == ["nb.ipynb"]
    only_python = parse_table({"include": ["*.py"], "extend-include": ["*.pyw"], "select": ["ALL"]},
                              tmp_path / "tfcheck.toml")
    assert [Path(f.path).name for f in lint(files, only_python)] == ["script.pyw"]


@pytest.mark.parametrize("key", ["include", "extend-include"])
def test_include_keys_are_validated(tmp_path: Path, key: str) -> None:
    with pytest.raises(ConfigError, match=f"tfcheck.toml.{key}: expected a list of strings"):
        parse_table({key: "*.ipynb"}, tmp_path / "tfcheck.toml")


def test_the_pre_commit_hook_passes_notebooks() -> None:
    hooks = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert "types_or: [python, jupyter]" in hooks


def test_findings_keep_their_cell_through_the_lint_cache(tmp_path: Path) -> None:
    (tmp_path / "nb.ipynb").write_text(notebook(SETUP, TRACED_PRINT), encoding="utf-8")
    cold = lint_paths([tmp_path], Config(root=tmp_path, select=("ALL",)), jobs=1, cache_dir=tmp_path / ".cache")
    warm = lint_paths([tmp_path], Config(root=tmp_path, select=("ALL",)), jobs=1, cache_dir=tmp_path / ".cache")
    assert warm.analyzed == 0 and warm.findings == cold.findings and warm.findings[0].cell == 2


# -- output formats ----------------------------------------------------------------------------------
@pytest.fixture
def traced_print_notebook(tmp_path: Path) -> str:
    raw = notebook(SETUP, TRACED_PRINT)
    (tmp_path / "nb.ipynb").write_text(raw, encoding="utf-8")
    return raw


def test_text_output_names_the_cell_and_shows_its_line(run_cli, tmp_path: Path, traced_print_notebook: str) -> None:
    result = run_cli(tmp_path, "check", "nb.ipynb", "--no-cache")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("nb.ipynb:cell 2:3:5: TFC001")
    assert lines[1] == "    3 |     print(x)"


def test_json_output_carries_the_cell_and_the_file_line(run_cli, tmp_path: Path, traced_print_notebook: str) -> None:
    [item] = json.loads(run_cli(tmp_path, "check", "nb.ipynb", "--no-cache", "--format", "json").stdout)
    line = _file_line(traced_print_notebook, '"    print(x)')
    assert (item["cell"], item["line"], item["column"], item["file_line"]) == (2, 3, 5, line)


def test_sarif_and_github_point_at_the_line_of_the_ipynb_file(run_cli, tmp_path: Path,
                                                              traced_print_notebook: str) -> None:
    line = _file_line(traced_print_notebook, '"    print(x)')
    sarif = json.loads(run_cli(tmp_path, "check", "nb.ipynb", "--no-cache", "--format", "sarif").stdout)
    [result] = sarif["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": line, "endLine": line}
    assert result["properties"]["notebookCell"] == 2 and result["properties"]["cellLine"] == 3
    github = run_cli(tmp_path, "check", "nb.ipynb", "--no-cache", "--format", "github").stdout
    assert github.startswith(f"::warning file=nb.ipynb,line={line},endLine={line},title=TFC001 print-in-graph "
                             "(cell 2%2C line 3)::")


def test_a_python_file_keeps_its_json_output_without_cell_keys(lint, tmp_path: Path) -> None:
    [finding] = lint({"a.py": "import tensorflow as tf\n" + TRACED_PRINT})
    assert not {"cell", "file_line", "file_end_line"} & set(finding.to_dict())
    assert finding.file_lines == (4, 4)


# -- fixes -------------------------------------------------------------------------------------------
LAYOUTS = {
    "jupyter (indent 1, lines)": {},
    "colab (indent 2)": {"indent": 2},
    "source as one string": {"as_string": True},
    "minified JSON": {"indent": None},
    "ASCII-escaped": {"ensure_ascii": True},
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_fix_changes_only_the_fixed_source_in_the_file(run_cli, tmp_path: Path, layout: str) -> None:
    cell = "@tf.function\ndef f(x):\n    y = 'd\u00e9j\u00e0 vu'\n    print(x)\n    return x"  # no final newline
    raw = notebook(("markdown", "Caf\u00e9\n"), SETUP, cell, "%time f(1)\n", **LAYOUTS[layout])
    path = tmp_path / "nb.ipynb"
    path.write_bytes(raw.encode("utf-8"))
    result = run_cli(tmp_path, "check", "--fix", "--no-cache", "nb.ipynb")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert path.read_bytes().decode("utf-8") == raw.replace("print(x)", "tf.print(x)", 1)


def test_fix_keeps_a_byte_order_mark_and_crlf_lines_of_the_file(run_cli, tmp_path: Path) -> None:
    raw = notebook(SETUP, TRACED_PRINT).replace("\n", "\r\n")
    path = tmp_path / "nb.ipynb"
    path.write_bytes(b"\xef\xbb\xbf" + raw.encode("utf-8"))
    assert run_cli(tmp_path, "check", "--fix", "--no-cache", "nb.ipynb").exit_code == 0
    assert path.read_bytes() == b"\xef\xbb\xbf" + raw.replace("print(x)", "tf.print(x)").encode("utf-8")


def test_an_unsafe_fix_across_lines_keeps_one_line_per_list_item(run_cli, tmp_path: Path) -> None:
    cell = "@tf.function\ndef f(x):\n    assert tf.reduce_all(\n        x >= 0), 'negative'\n    return x\n"
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(SETUP, cell), encoding="utf-8")
    assert run_cli(tmp_path, "check", "--fix", "--unsafe-fixes", "--no-cache", "nb.ipynb").exit_code == 0
    fixed = json.loads(path.read_text(encoding="utf-8"))["cells"][1]["source"]
    assert fixed == ["@tf.function\n", "def f(x):\n", "    tf.debugging.Assert(tf.reduce_all(\n",
                     "        x >= 0), ['negative'])\n", "    return x\n"]


@pytest.mark.parametrize("indent", [1, 2, None])
def test_new_sources_with_more_and_fewer_lines_keep_the_layout_of_the_list(indent: int | None) -> None:
    raw = notebook("a = 1\nb = 2\nc = 3", "d = 4\n", indent=indent)
    notebook_file = Notebook.parse("n.ipynb", raw)
    new = notebook_file.with_sources({1: "a = 1\nx = 0\ny = 0\nc = 3"})
    assert new == notebook("a = 1\nx = 0\ny = 0\nc = 3", "d = 4\n", indent=indent)
    assert notebook_file.with_sources({1: "c = 3"}) == notebook("c = 3", "d = 4\n", indent=indent)
    one_line = Notebook.parse("n.ipynb", notebook("c = 3", indent=indent))
    assert one_line.with_sources({1: "a = 1\nc = 3"}) == notebook("a = 1\nc = 3", indent=indent)


def test_diff_shows_each_changed_cell_and_writes_nothing(run_cli, tmp_path: Path, traced_print_notebook: str) -> None:
    result = run_cli(tmp_path, "check", "--diff", "--no-cache", "nb.ipynb")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:2] == ["--- a/nb.ipynb:cell 2", "+++ b/nb.ipynb:cell 2"]
    assert "-    print(x)\n+    tf.print(x)\n" in result.stdout
    assert (tmp_path / "nb.ipynb").read_text(encoding="utf-8") == traced_print_notebook


# -- real notebooks ------------------------------------------------------------------------------------
CORPUS = os.environ.get("TFCHECK_NOTEBOOK_CORPUS")
# tensorflow/docs site/en/guide/function.ipynb at commit 7c3650212740204359d4ceae481abc79345541be:
# the guide's deliberate pitfalls, (cell, line, code).
FUNCTION_GUIDE_PITFALLS = [
    (82, 5, "TFC001"), (82, 6, "TFC002"),  # external_list.append(x): "The list append only happened once!"
    (84, 10, "TFC002"),  # self.counter += 1 in a tf.function: Python state changed only while tracing
    (94, 6, "TFC009"), (96, 4, "TFC009"),  # leaking a tensor out of a tf.function into a global
    (112, 9, "TFC016"),  # model.bias read while tracing, reassigned in the next cell
    (121, 3, "TFC004"),  # tf.Variable created on every call
]


@pytest.mark.skipif(not CORPUS, reason="TFCHECK_NOTEBOOK_CORPUS names no folder of public notebooks")
def test_public_notebooks() -> None:
    """Every notebook of the corpus is linted without an internal error; the tf.function guide's
    pitfalls are found at their cells."""
    folder = Path(CORPUS or ".")
    result = lint_paths([folder], Config(root=folder, select=("ALL",)), jobs=1)
    assert not result.errors and not result.path_errors
    assert not [f for f in result.findings if f.code == "TFC000"]
    guide = {(f.cell, f.line, f.code) for f in result.findings if Path(f.path).name == "function.ipynb"}
    if guide:
        assert set(FUNCTION_GUIDE_PITFALLS) <= guide
