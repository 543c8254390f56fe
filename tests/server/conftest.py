"""`tfcheck server` driven by a real LSP client (pytest-lsp) in a separate process, as an editor drives it.

`editor` is the client after `initialize`, with VS Code's capabilities, a workspace folder of its own
(`workspace`, holding a `pyproject.toml` with an empty `[tool.tfcheck]`: the default rules), and
`Editor`'s helpers to open, change, save and close documents, wait for diagnostics and apply edits.
"""

from __future__ import annotations

import asyncio
import re
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types
from pygls.uris import to_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

SERVER = [sys.executable, "-m", "tfcheck", "server", "--debounce-ms", "10"]
TIMEOUT = 60.0  # seconds to wait for a notification: a loaded CI machine, not the server's speed
_LINE = re.compile(r".*?(?:\r\n|\r|\n)|.+\Z", re.DOTALL)

Diagnostics = Sequence[types.Diagnostic]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "pyproject.toml").write_text("[tool.tfcheck]\n")
    return folder


class Editor:
    """What an editor does with a language server, on a pytest-lsp client."""

    def __init__(self, client: LanguageClient, workspace: Path) -> None:
        self.client = client
        self.workspace = workspace
        self.texts: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.registrations: list[types.Registration] = []
        self.messages = client.messages

    def write(self, name: str, text: str) -> Path:
        path = self.workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def uri(self, name: str) -> str:
        return (self.workspace / name).as_uri()

    def open(self, name: str, text: str | None = None) -> str:
        """Open a file of the workspace (its text on disk unless `text` is given)."""
        uri = self.uri(name)
        self.texts[uri] = textwrap.dedent(text) if text is not None else (self.workspace / name).read_text()
        self.versions[uri] = 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri, "python", 1, self.texts[uri])))
        return uri

    def change(self, uri: str, text: str) -> None:
        self.texts[uri] = textwrap.dedent(text)
        self.versions[uri] += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            [types.TextDocumentContentChangeWholeDocument(self.texts[uri])]))

    def save(self, uri: str) -> None:
        Path(to_fs_path(uri)).write_text(self.texts[uri])
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))

    def files_changed(self, *changes: tuple[str, types.FileChangeType]) -> None:
        """Tell the server what changed on disk, as an editor watching the files it registered does."""
        self.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
            [types.FileEvent(self.uri(name), kind) for name, kind in changes]))

    async def diagnostics(self, uri: str, until: Callable[[Diagnostics], bool] = lambda found: True) -> Diagnostics:
        """The diagnostics of `uri` once `until` holds for them (the latest published, at each publication)."""
        async def wait() -> Diagnostics:
            while uri not in self.client.diagnostics or not until(self.client.diagnostics[uri]):
                await self.client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            return self.client.diagnostics[uri]
        return await asyncio.wait_for(wait(), TIMEOUT)

    async def code_actions(self, uri: str, diagnostic: types.Diagnostic,
                           only: list[str] | None = None) -> list[types.CodeAction]:
        found = await self.client.text_document_code_action_async(types.CodeActionParams(
            types.TextDocumentIdentifier(uri), diagnostic.range, types.CodeActionContext([diagnostic], only=only)))
        return list(found or [])

    def apply(self, edit: types.WorkspaceEdit) -> None:
        """Apply a workspace edit to the open documents (checking each edit's version), then send the change."""
        for change in edit.document_changes or []:
            assert isinstance(change, types.TextDocumentEdit)
            uri = change.text_document.uri
            assert change.text_document.version == self.versions[uri], "an edit for another version"
            self.change(uri, apply_text_edits(self.texts[uri], change.edits))


def apply_text_edits(text: str, edits: Sequence[types.TextEdit]) -> str:
    """Text edits applied as a client applies them (positions of the original text; ASCII tests, so
    UTF-16 units are characters)."""
    lines = _LINE.findall(text)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:
        return min(starts[min(position.line, len(lines))] + position.character, len(text))

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


def codes(diagnostics: Diagnostics) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


async def start(client: LanguageClient, workspace: Path) -> Editor:
    """Initialize a session as VS Code does, accepting the server's registrations (file watching)."""
    editor = Editor(client, workspace)
    client.feature(types.CLIENT_REGISTER_CAPABILITY)(
        lambda params: editor.registrations.extend(params.registrations))
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(workspace.as_uri(), workspace.name)]))
    return editor


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[*SERVER, "--unsafe-fixes"]))
async def unsafe_client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    yield
    await lsp_client.shutdown_session()


@pytest_asyncio.fixture
async def editor(client: LanguageClient, workspace: Path) -> Editor:
    return await start(client, workspace)


@pytest_asyncio.fixture
async def unsafe_editor(unsafe_client: LanguageClient, workspace: Path) -> Editor:
    return await start(unsafe_client, workspace)
