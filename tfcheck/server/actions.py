"""Code actions and hover on findings: the rule's fix, `# noqa: TFCnnn`, fix all, the rule's explanation.

Nothing here fixes code its own way. A finding's fix is its `Fix`'s edits, as `--fix` applies them;
fix all is `tfcheck/fixes.py`'s `fix_text` (rounds, overlaps, every round checked to parse, the text
linted again between rounds, with the cross-file roots the document has now), for a notebook through
`notebook_round` on the JSON its cells make. Unsafe fixes are offered, and applied by fix all, only
when the server runs with `--unsafe-fixes`, as `tfcheck check --fix` applies them only with it. The
`# noqa` edit is checked with tfcheck/suppress.py's own reading of comments before it is offered.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import attrs

from lsprotocol import types
from pygls.workspace import PositionCodec

from tfcheck.findings import Edit, Finding
from tfcheck.fixes import fix_text, is_applicable, notebook_round
from tfcheck.notebook import as_python, notebook_sources
from tfcheck.rule import explanation, rule_by_code
from tfcheck.server.diagnostics import Place, diagnostic
from tfcheck.server.documents import LINE_BREAK
from tfcheck.server.state import Linted
from tfcheck.suppress import is_suppressed, suppressions

FIX_ALL = "source.fixAll.tfcheck"
# A trailing `# noqa: TFC002, TFC003` that another code can join.
_NOQA_CODES = re.compile(r"#\s*noqa\s*:\s*[A-Za-z0-9]+(?:\s*,\s*[A-Za-z0-9]+)*\s*$", re.IGNORECASE)
# A text's lines with their breaks, for line diffs (the protocol's breaks, as everywhere here).
_LINE_WITH_BREAK = re.compile(r".*?(?:\r\n|\r|\n)|.+\Z", re.DOTALL)


@dataclass(frozen=True)
class Request:
    """What an action needs besides the document: the client's position units and edit format, and
    whether unsafe fixes are on (`tfcheck server --unsafe-fixes`)."""

    codec: PositionCodec
    unsafe: bool
    versioned_edits: bool  # the client takes `documentChanges` (edits checked against a document version)


def findings_at(linted: Linted, uri: str, codec: PositionCodec, start: types.Position,
                end: types.Position) -> list[tuple[Finding, Place]]:
    """The findings of text document `uri` (a file, or a notebook's cell) that touch [start, end]."""
    found = []
    for finding in linted.findings:
        place = Place.of(linted.document, finding.cell, codec)
        if place.uri != uri:
            continue
        span = place.positions.finding_range(finding)
        if _key(span.start) <= _key(end) and _key(start) <= _key(span.end):
            found.append((finding, place))
    return found


def _key(position: types.Position) -> tuple[int, int]:
    return position.line, position.character


def code_actions(linted: Linted, uri: str, span: types.Range, only: Sequence[str] | None, request: Request,
                 resolvable: bool) -> list[types.CodeAction]:
    """The actions for a range: each finding's fix and `# noqa`, and fix all for the whole document
    (its edit left to codeAction/resolve when the client resolves, since it lints the file again)."""
    actions: list[types.CodeAction] = []
    if _wanted(types.CodeActionKind.QuickFix, only):
        for finding, place in findings_at(linted, uri, request.codec, span.start, span.end):
            actions += [action for action in (quick_fix(finding, place, linted, request),
                                              noqa(finding, place, linted, request)) if action is not None]
    if _wanted(FIX_ALL, only) and any(is_applicable(f, request.unsafe) for f in linted.findings):
        action = types.CodeAction(f"Fix all tfcheck findings{' (unsafe fixes included)' * request.unsafe}",
                                  kind=FIX_ALL, data={"uri": uri})
        actions.append(action if resolvable else resolve_fix_all(action, linted, request))
    return actions


def _wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether the client asked for actions of `kind` (a requested kind covers its sub-kinds)."""
    return only is None or any(kind == wanted or kind.startswith(wanted + ".") for wanted in only)


def quick_fix(finding: Finding, place: Place, linted: Linted, request: Request) -> types.CodeAction | None:
    """The rule's own fix of one finding, when `--fix` (with `--unsafe-fixes` as the server runs) would apply it."""
    if finding.fix is None or not is_applicable(finding, request.unsafe):
        return None
    unsafe = "" if finding.fix.safe else " (unsafe: may change behaviour)"
    edits = [place.positions.text_edit(edit) for edit in finding.fix.edits]
    return types.CodeAction(f"{finding.code}: {finding.fix.message}{unsafe}", kind=types.CodeActionKind.QuickFix,
                            diagnostics=[diagnostic(finding, linted.document, request.codec)],
                            is_preferred=finding.fix.safe, edit=_workspace_edit([(place, edits)], request))


def noqa(finding: Finding, place: Place, linted: Linted, request: Request) -> types.CodeAction | None:
    """`# noqa: TFCnnn` at the end of the finding's first line (or its last, when the first ends inside a
    string), or the code added to the line's trailing `# noqa: ...`; None if neither would suppress it."""
    for line in dict.fromkeys((finding.line, finding.end_line)):
        edit = _noqa_edit(place.text, line, finding.code)
        if edit is not None and _suppresses(place.text, edit, finding, linted.document.notebook):
            return types.CodeAction(f"Ignore {finding.code} on this line (# noqa: {finding.code})",
                                    kind=types.CodeActionKind.QuickFix,
                                    diagnostics=[diagnostic(finding, linted.document, request.codec)],
                                    edit=_workspace_edit([(place, [place.positions.text_edit(edit)])], request))
    return None


def _noqa_edit(text: str, line: int, code: str) -> Edit | None:
    lines = LINE_BREAK.split(text)
    if not 1 <= line <= len(lines):
        return None
    content = lines[line - 1].rstrip()
    end = len(content) + 1
    addition = f", {code}" if _NOQA_CODES.search(content) else f"  # noqa: {code}"
    return Edit(line, end, line, end, addition)


def _suppresses(text: str, edit: Edit, finding: Finding, notebook: bool) -> bool:
    """Whether the edited text suppresses the finding, read as `tfcheck check` reads comments (a cell as
    the Python it runs)."""
    lines = LINE_BREAK.split(text)
    row = lines[edit.line - 1]
    lines[edit.line - 1] = row[:edit.column - 1] + edit.replacement + row[edit.column - 1:]
    edited = "\n".join(lines)
    return is_suppressed(finding, suppressions(as_python(edited) if notebook else edited))


def resolve_fix_all(action: types.CodeAction, linted: Linted, request: Request) -> types.CodeAction:
    """Fix all's edit: the document fixed as `--fix` fixes a file, as line edits (the cursor and the
    unchanged lines stay put)."""
    document = linted.document
    if linted.project is None:
        return action
    relint = linted.project.relint(document)
    if not document.notebook:
        fixed, _ = fix_text(document.text, linted.findings, relint, request.unsafe)
        place = Place.of(document, None, request.codec)
        return attrs.evolve(action, edit=_workspace_edit([(place, line_edits(place, fixed))], request))
    raw = document.data().decode("utf-8")
    fixed, _ = fix_text(raw, linted.findings, relint, request.unsafe, notebook_round(str(document.path)))
    sources = notebook_sources(str(document.path), fixed)
    changes = []
    for number, cell in enumerate(document.cells, start=1):
        if number in sources and sources[number] != cell.text:
            place = Place.of(document, number, request.codec)
            changes.append((place, line_edits(place, sources[number])))
    return attrs.evolve(action, edit=_workspace_edit(changes, request))


def line_edits(place: Place, new: str) -> list[types.TextEdit]:
    """The edits that turn the place's text into `new`, one per changed block of lines."""
    old_lines = _LINE_WITH_BREAK.findall(place.text)
    new_lines = _LINE_WITH_BREAK.findall(new)
    positions = place.positions
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
        if tag != "equal":
            end = positions.position(i2 + 1, 1) if i2 < len(old_lines) else positions.end()
            edits.append(types.TextEdit(types.Range(positions.position(i1 + 1, 1), end), "".join(new_lines[j1:j2])))
    return edits


def _workspace_edit(changes: list[tuple[Place, list[types.TextEdit]]], request: Request) -> types.WorkspaceEdit:
    """Edits of text documents, each checked against the version it was computed for where the client can."""
    if request.versioned_edits:
        return types.WorkspaceEdit(document_changes=[
            types.TextDocumentEdit(types.OptionalVersionedTextDocumentIdentifier(place.uri, place.version), edits)
            for place, edits in changes])
    return types.WorkspaceEdit(changes={place.uri: edits for place, edits in changes})


def hover(linted: Linted, uri: str, position: types.Position, codec: PositionCodec) -> types.Hover | None:
    """The explanation (`tfcheck explain`) of each rule with a finding under the cursor."""
    found = findings_at(linted, uri, codec, position, position)
    rules = [rule for code in dict.fromkeys(f.code for f, _ in found) if (rule := rule_by_code(code)) is not None]
    if not rules:
        return None
    finding, place = found[0]
    return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, "\n\n---\n\n".join(map(explanation, rules))),
                       range=place.positions.finding_range(finding))
