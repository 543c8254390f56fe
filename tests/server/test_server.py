"""`tfcheck server` end to end, through a real LSP client (pytest-lsp) talking to the server's process:
diagnostics on open, change and save, code actions applied, hover, configuration changes, notebook
cells, a half-typed file, and a file whose graph code another file decides."""

from __future__ import annotations

import asyncio
import textwrap

import pytest
from lsprotocol import types

from tests.server.conftest import Editor, codes

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

# `helpers.scale` is graph code only because `step`, a tf.function in a.py, calls it.
GRAPH_CALLER = """\
import tensorflow as tf

import helpers


@tf.function
def step(x):
    return helpers.scale(x)
"""
EAGER_CALLER = GRAPH_CALLER.replace("@tf.function\n", "")
HELPERS = """\
import tensorflow as tf


def scale(x):
    assert tf.reduce_all(x > 0)
    return x * 2
"""
# Two safe fixes (TFC008 on a reduction), one unsafe (an elementwise condition: wrapped in reduce_all).
FIXABLE = """\
import tensorflow as tf


@tf.function
def normalize(x):
    assert tf.reduce_all(x >= 0.0)
    assert tf.reduce_any(x > 0.0)
    assert tf.math.is_finite(x)
    print("loss:", x)
    return x
"""


def graph_code_project(editor: Editor) -> None:
    editor.write("a.py", GRAPH_CALLER)
    editor.write("helpers.py", HELPERS)


async def test_open_publishes_code_severity_link_and_why_the_function_is_graph_code(editor: Editor) -> None:
    graph_code_project(editor)
    uri = editor.open("helpers.py")
    [diagnostic] = await editor.diagnostics(uri, lambda found: len(found) == 1)
    assert diagnostic.code == "TFC008" and diagnostic.source == "tfcheck"
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.code_description is not None and diagnostic.code_description.href.endswith("/TFC008")
    assert diagnostic.range == types.Range(types.Position(4, 4), types.Position(4, 31))
    [related] = diagnostic.related_information or []
    assert related.message == "`scale` is graph code: called from graph code in step (a.py:8)" or \
        related.message.startswith("`scale` is graph code: called from graph code in step (")
    assert related.location.uri == editor.uri("a.py") and related.location.range.start == types.Position(7, 0)


async def test_the_server_asks_to_watch_configuration_and_python_files(editor: Editor) -> None:
    await asyncio.wait_for(_until(lambda: editor.registrations), 30)
    [registration] = editor.registrations
    assert registration.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    patterns = {watcher["globPattern"] for watcher in registration.register_options["watchers"]}
    assert {"**/pyproject.toml", "**/tfcheck.toml", "**/*.py", "**/*.ipynb"} <= patterns


async def test_a_change_is_linted_as_typed_and_the_other_file_follows(editor: Editor) -> None:
    """An unsaved change to a.py decides whether helpers.py holds graph code."""
    graph_code_project(editor)
    helpers = editor.open("helpers.py")
    caller = editor.open("a.py")
    await editor.diagnostics(helpers, lambda found: codes(found) == ["TFC008"])
    editor.change(caller, EAGER_CALLER)
    assert not await editor.diagnostics(helpers, lambda found: not found)
    editor.change(caller, GRAPH_CALLER)
    await editor.diagnostics(helpers, lambda found: codes(found) == ["TFC008"])


async def test_a_closed_file_changed_on_disk_is_read_again(editor: Editor) -> None:
    graph_code_project(editor)
    helpers = editor.open("helpers.py")
    await editor.diagnostics(helpers, lambda found: codes(found) == ["TFC008"])
    editor.write("a.py", EAGER_CALLER)
    editor.files_changed(("a.py", types.FileChangeType.Changed))
    await editor.diagnostics(helpers, lambda found: not found)
    (editor.workspace / "a.py").unlink()
    editor.write("b.py", GRAPH_CALLER)
    editor.files_changed(("a.py", types.FileChangeType.Deleted), ("b.py", types.FileChangeType.Created))
    await editor.diagnostics(helpers, lambda found: codes(found) == ["TFC008"])


async def test_a_save_reads_files_another_tool_changed(editor: Editor) -> None:
    """For editors that watch no files: a save re-reads the files whose stat changed."""
    graph_code_project(editor)
    helpers = editor.open("helpers.py")
    await editor.diagnostics(helpers, lambda found: codes(found) == ["TFC008"])
    editor.write("a.py", EAGER_CALLER)  # no event
    editor.save(helpers)
    await editor.diagnostics(helpers, lambda found: not found)


async def test_a_half_typed_file_is_one_parse_error_and_the_others_keep_its_last_facts(editor: Editor) -> None:
    graph_code_project(editor)
    helpers = editor.open("helpers.py")
    caller = editor.open("a.py")
    await editor.diagnostics(helpers, lambda found: codes(found) == ["TFC008"])
    editor.change(caller, GRAPH_CALLER.replace("def step(x):", "def step(x:"))
    [error] = await editor.diagnostics(caller, lambda found: codes(found) == ["TFC000"])
    assert error.severity == types.DiagnosticSeverity.Error and error.range.start.line == 6
    editor.change(helpers, HELPERS + "\n")  # a pass with a.py still broken: helpers keeps its finding
    await editor.diagnostics(helpers, lambda found: codes(found) == ["TFC008"])
    editor.change(caller, EAGER_CALLER)
    await editor.diagnostics(caller, lambda found: not found)
    await editor.diagnostics(helpers, lambda found: not found)


async def test_a_quick_fix_applied_removes_its_finding(editor: Editor) -> None:
    uri = editor.open("fixable.py", FIXABLE)
    found = await editor.diagnostics(uri, lambda found: len(found) == 3)
    first = min(found, key=lambda d: d.range.start.line)
    actions = await editor.code_actions(uri, first)
    [fix] = [action for action in actions if action.title.startswith("TFC008:")]
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred and fix.edit is not None
    editor.apply(fix.edit)
    assert "tf.debugging.Assert(tf.reduce_all(x >= 0.0)" in editor.texts[uri]
    assert len(await editor.diagnostics(uri, lambda found: len(found) == 2)) == 2


async def test_an_unsafe_fix_is_offered_only_with_unsafe_fixes(editor: Editor, unsafe_editor: Editor) -> None:
    for client, offered in ((editor, False), (unsafe_editor, True)):
        uri = client.open("fixable.py", FIXABLE)
        found = await client.diagnostics(uri, lambda found: len(found) == 3)
        elementwise = max(found, key=lambda d: d.range.start.line)
        titles = [action.title for action in await client.code_actions(uri, elementwise)]
        assert any("unsafe" in title for title in titles) is offered, titles


async def test_noqa_applied_suppresses_the_finding(editor: Editor) -> None:
    uri = editor.open("fixable.py", FIXABLE)
    found = await editor.diagnostics(uri, lambda found: len(found) == 3)
    last = max(found, key=lambda d: d.range.start.line)
    [noqa] = [action for action in await editor.code_actions(uri, last) if "noqa" in action.title]
    editor.apply(noqa.edit)
    assert "assert tf.math.is_finite(x)  # noqa: TFC008\n" in editor.texts[uri]
    await editor.diagnostics(uri, lambda found: len(found) == 2)


async def test_fix_all_applies_every_safe_fix_as_check_fix_does(editor: Editor) -> None:
    uri = editor.open("fixable.py", FIXABLE)
    found = await editor.diagnostics(uri, lambda found: len(found) == 3)
    actions = await editor.code_actions(uri, found[0], only=[types.CodeActionKind.SourceFixAll])
    [fix_all] = actions
    assert fix_all.kind == "source.fixAll.tfcheck" and fix_all.edit is None  # VS Code resolves it
    resolved = await editor.client.code_action_resolve_async(fix_all)
    editor.apply(resolved.edit)
    [left] = await editor.diagnostics(uri, lambda found: len(found) == 1)
    assert left.range.start.line == 7  # the unsafe one
    assert editor.texts[uri].count("tf.debugging.Assert(") == 2 and "print(\"loss:\", x)" in editor.texts[uri]


async def test_hover_on_a_finding_shows_the_rule_explanation(editor: Editor) -> None:
    uri = editor.open("fixable.py", FIXABLE)
    found = await editor.diagnostics(uri, lambda found: len(found) == 3)
    shown = await editor.client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), found[0].range.start))
    assert shown is not None and shown.contents.kind == types.MarkupKind.Markdown
    assert shown.contents.value.startswith("# TFC008 python-assert (error, default)")
    assert "tf.debugging" in shown.contents.value
    elsewhere = await editor.client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), types.Position(0, 0)))
    assert elsewhere is None


async def test_the_configuration_is_reloaded_when_it_changes(editor: Editor) -> None:
    uri = editor.open("fixable.py", FIXABLE)
    await editor.diagnostics(uri, lambda found: codes(found) == ["TFC008"] * 3)

    async def configure(table: str, expected: list[str]) -> None:
        editor.write("pyproject.toml", "[tool.tfcheck]\n" + textwrap.dedent(table))
        editor.files_changed(("pyproject.toml", types.FileChangeType.Changed))
        await editor.diagnostics(uri, lambda found: codes(found) == expected)

    await configure('extend-select = ["TFC001"]\n', ["TFC001", "TFC008", "TFC008", "TFC008"])
    await configure('extend-select = ["TFC001"]\nignore = ["TFC008"]\n', ["TFC001"])
    await configure('select = ["ALL"]\nper-file-ignores = { "fixable.py" = ["TFC008"] }\n', ["TFC001"])
    await configure('exclude = ["fixable.py"]\n', [])
    await configure("", ["TFC008"] * 3)
    editor.write("pyproject.toml", '[tool.tfcheck]\nselect = ["BOGUS"]\n')
    editor.files_changed(("pyproject.toml", types.FileChangeType.Changed))
    await asyncio.wait_for(_until(lambda: editor.messages), 30)
    assert "select" in editor.messages[-1].message and editor.messages[-1].type == types.MessageType.Error
    assert codes(editor.client.diagnostics[uri]) == ["TFC008"] * 3  # the last good configuration stays


async def test_min_severity_from_the_configuration(editor: Editor) -> None:
    pipeline = """\
    import tensorflow as tf


    def load(path):
        return tf.py_function(open, [path], tf.string)


    dataset = tf.data.Dataset.from_tensor_slices(["a"]).map(load)
    """
    editor.write("pyproject.toml", '[tool.tfcheck]\nextend-select = ["TFC015"]\nmin-severity = "info"\n')
    uri = editor.open("pipeline.py", pipeline)
    [info] = await editor.diagnostics(uri, lambda found: len(found) == 1)
    assert info.code == "TFC015" and info.severity == types.DiagnosticSeverity.Information


async def test_notebook_cells_are_one_module_with_positions_per_cell(editor: Editor) -> None:
    notebook = editor.uri("train.ipynb")
    cells = [(types.NotebookCellKind.Markup, "markdown", "# Training"),
             (types.NotebookCellKind.Code, "python", "import tensorflow as tf\n%matplotlib inline\n"),
             (types.NotebookCellKind.Code, "python", "@tf.function\ndef f(x):\n    return check(x)\n"),
             (types.NotebookCellKind.Code, "python", "def check(x):\n    assert tf.reduce_all(x > 0)\n    return x\n")]
    uris = [f"vscode-notebook-cell:{notebook.removeprefix('file://')}#cell{i}" for i in range(len(cells))]
    editor.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        types.NotebookDocument(notebook, "jupyter-notebook", 1,
                               [types.NotebookCell(kind, uri) for (kind, _, _), uri in zip(cells, uris)]),
        [types.TextDocumentItem(uri, language, 1, text) for (_, language, text), uri in zip(cells, uris)]))
    [found] = await editor.diagnostics(uris[3], lambda found: len(found) == 1)
    assert found.code == "TFC008" and found.range.start == types.Position(1, 4)
    [related] = found.related_information or []
    assert related.message == "`check` is graph code: called from f (line 3 of cell 3), which is graph code"
    assert related.location.uri == uris[2] and related.location.range.start.line == 2
    assert not editor.client.diagnostics[uris[1]] and not editor.client.diagnostics[uris[2]]

    editor.versions[uris[3]] = 1
    editor.texts[uris[3]] = cells[3][2]
    [fix] = [a for a in await editor.code_actions(uris[3], found) if a.title.startswith("TFC008:")]
    [change] = fix.edit.document_changes
    assert change.text_document.uri == uris[3] and change.edits[0].range.start == types.Position(1, 4)

    editor.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        types.VersionedNotebookDocumentIdentifier(uri=notebook, version=2),
        types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[
            types.NotebookDocumentCellContentChanges(types.VersionedTextDocumentIdentifier(uri=uris[2], version=2), [
                types.TextDocumentContentChangeWholeDocument("def f(x):\n    return check(x)\n")])]))))
    await editor.diagnostics(uris[3], lambda found: not found)


async def _until(condition: object) -> None:
    while not condition():  # type: ignore[operator]
        await asyncio.sleep(0.05)
