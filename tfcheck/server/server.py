"""The language server: what the editor says (documents, notebooks, watched files, requests) and when to lint.

One thread lints; the event loop only talks. Every pass, and every change to the projects' state
(configuration reloaded, files changed on disk, workspace folders), runs on that one thread in the
order it was asked for, so the state needs no lock and a pass never sees half a change. A pass lints
a snapshot of the open documents taken on the loop.

When: a document opened or saved is linted at once; a change waits `debounce` seconds for the next
one, and changes made while a pass runs are linted together by the pass after it. Code actions and
hover lint first (a pass over unchanged text costs only the memo's look-ups), so their positions and
edits are those of the text the client has now; edits carry the version they were computed for.

What is published: each open document's diagnostics (a notebook's, per cell) whenever its version
or its diagnostics change, so a change in one file that alters another file's findings (graph code
reached across files) updates that file too. Closed documents are cleared.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path, uri_scheme

from tfcheck import __version__
from tfcheck.config import CONFIG_FILES
from tfcheck.server.actions import FIX_ALL, Request, code_actions, hover, resolve_fix_all
from tfcheck.server.diagnostics import diagnostic
from tfcheck.server.documents import Cell, OpenDocument, notebook_path
from tfcheck.server.state import Linted, Projects

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEBOUNCE_SECONDS = 0.05
PYTHON_SUFFIXES = (".py", ".pyw", ".pyi")
# Files whose change on disk the server must see: configuration, what decides which files are linted,
# and the files themselves (a closed file's change alters the graph code of open ones).
WATCHED = ("**/pyproject.toml", "**/tfcheck.toml", "**/.gitignore", "**/*.py", "**/*.ipynb")
# Every cell of Jupyter notebooks (markdown too: messages count cells as the editor does).
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithNotebook(notebook="jupyter-notebook")], save=True)
Published = dict[str, tuple[int | None, list[types.Diagnostic]]]


class TfcheckServer(LanguageServer):
    """`tfcheck server`: diagnostics, code actions and hover for tfcheck's findings.

    The protocol's text sync is Full: the client sends the whole text, never edits to apply, since pygls
    applies edits by `str.splitlines` lines, which break where the protocol's lines do not (a form feed).
    """

    def __init__(self, debounce: float = DEBOUNCE_SECONDS, unsafe_fixes: bool = False) -> None:
        super().__init__("tfcheck", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full,
                         notebook_document_sync=NOTEBOOK_SYNC)
        self.debounce = debounce
        self.unsafe_fixes = unsafe_fixes
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="tfcheck-lint")
        self._projects = Projects([])  # replaced at `initialize`, on the lint thread only after that
        self._linted: dict[str, Linted] = {}  # text document uri (a file, or a notebook's cell) -> its outcome
        self._published: Published = {}
        self._reported: set[str] = set()  # configuration and internal errors already shown
        self._timer: asyncio.TimerHandle | None = None
        self._running: asyncio.Task[None] | None = None
        self._again = False
        self._register()

    def _register(self) -> None:
        features: dict[str, tuple[Callable[..., Any], Any]] = {
            types.INITIALIZE: (self._initialize, None),
            types.INITIALIZED: (self._initialized, None),
            types.TEXT_DOCUMENT_DID_OPEN: (lambda params: self._changed(0), None),
            types.TEXT_DOCUMENT_DID_CHANGE: (lambda params: self._changed(self.debounce), None),
            types.TEXT_DOCUMENT_DID_SAVE: (self._saved, None),
            types.TEXT_DOCUMENT_DID_CLOSE: (lambda params: self._closed([params.text_document.uri]), None),
            types.NOTEBOOK_DOCUMENT_DID_OPEN: (lambda params: self._changed(0), None),
            types.NOTEBOOK_DOCUMENT_DID_CHANGE: (lambda params: self._changed(self.debounce), None),
            types.NOTEBOOK_DOCUMENT_DID_SAVE: (self._saved, None),
            types.NOTEBOOK_DOCUMENT_DID_CLOSE: (
                lambda params: self._closed(cell.uri for cell in params.cell_text_documents), None),
            types.WORKSPACE_DID_CHANGE_WATCHED_FILES: (self._files_changed, None),
            types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS: (lambda params: self._folders_changed(), None),
            types.TEXT_DOCUMENT_CODE_ACTION: (self._code_action, types.CodeActionOptions(
                code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=True)),
            types.CODE_ACTION_RESOLVE: (self._resolve, None),
            types.TEXT_DOCUMENT_HOVER: (self._hover, None),
            types.SHUTDOWN: (lambda params: self._stop_timer(), None),
        }
        for method, (handler, options) in features.items():
            self.feature(method, options)(_plain(handler))

    # -- session ------------------------------------------------------------------------------------
    def _initialize(self, params: types.InitializeParams) -> None:
        self._projects = Projects(self._folders())

    async def _initialized(self, params: types.InitializedParams) -> None:
        """Ask the client to watch the files that decide findings, when it lets servers ask."""
        if not _capability(self.client_capabilities, "workspace.did_change_watched_files.dynamic_registration"):
            return
        watchers = [types.FileSystemWatcher(glob_pattern=pattern) for pattern in WATCHED]
        try:
            await self.client_register_capability_async(types.RegistrationParams([types.Registration(
                "tfcheck-watched-files", types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                types.DidChangeWatchedFilesRegistrationOptions(watchers))]))
        except Exception as error:  # noqa: BLE001 - saves still catch files changed on disk
            logger.warning("the client did not take the file watchers: %s", error)

    def _folders(self) -> list[Path]:
        """The workspace folders (or the root, for a client that names no folder) on this machine."""
        uris = [folder.uri for folder in self.workspace.folders.values()] or \
               ([self.workspace.root_uri] if self.workspace.root_uri else [])
        return [Path(path) for uri in uris if uri_scheme(uri) == "file" and (path := to_fs_path(uri))]

    def _folders_changed(self) -> None:
        folders = self._folders()
        self._submit(lambda: setattr(self, "_projects", Projects(folders)))
        self._changed(0)

    # -- when to lint ---------------------------------------------------------------------------------
    def _changed(self, delay: float) -> None:
        """Lint after `delay` seconds, unless another change comes first (then after its delay)."""
        self._stop_timer()
        self._timer = asyncio.get_running_loop().call_later(delay, self._start)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _start(self) -> None:
        self._timer = None
        if self._running is not None:
            self._again = True  # the pass after the running one lints this change too
            return
        self._running = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        try:
            await self._lint()
        except Exception:  # noqa: BLE001 - a server must outlive a bug in one pass; the log says where
            logger.exception("tfcheck: a lint pass failed")
        finally:
            self._running = None
            if self._again:
                self._again = False
                self._start()

    def _saved(self, params: object) -> None:
        """A save: files whose stat changed since they were read are read again (for editors that watch no
        files: another tool may have written them), then the documents are linted at once."""
        self._submit(lambda: self._projects.refresh_disk())
        self._changed(0)

    def _files_changed(self, params: types.DidChangeWatchedFilesParams) -> None:
        paths = [Path(path) for change in params.changes if (path := to_fs_path(change.uri))]
        config = any(path.name in CONFIG_FILES for path in paths)
        structure = any(change.type != types.FileChangeType.Changed for change in params.changes) or \
            any(path.name == ".gitignore" for path in paths)

        def apply() -> None:
            if config:
                self._projects.reload_configs()
            self._projects.files_changed(paths, created_or_deleted=structure or config)
        self._submit(apply)
        self._changed(0)

    def _closed(self, uris: Iterable[str]) -> None:
        for uri in uris:
            self._linted.pop(uri, None)
            if self._published.pop(uri, None) is not None:
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, []))
        self._changed(0)

    # -- a pass ---------------------------------------------------------------------------------------
    async def _lint(self) -> dict[str, Linted]:
        """Lint the open documents as they are now; publish what changed; the outcome of each text document."""
        documents = self._snapshot()
        codec = self.workspace.position_codec
        linted, published, errors = await self._on_thread(lambda: self._pass(documents, codec))
        self._linted = {uri: outcome for outcome in linted for uri in _uris(outcome.document)}
        for uri, (version, diagnostics) in published.items():
            if self._is_open(uri) and self._published.get(uri) != (version, diagnostics):
                self._published[uri] = (version, diagnostics)
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, diagnostics, version))
        self._report(errors)
        return self._linted

    def _is_open(self, uri: str) -> bool:
        """Whether a text document (a file or a cell) is still open: it may close while a pass runs."""
        return unquote(uri) in self.workspace.text_documents

    def _pass(self, documents: list[OpenDocument], codec: Any) -> tuple[list[Linted], Published, list[str]]:
        """On the lint thread: the outcomes, their diagnostics, and the errors to show."""
        linted = self._projects.lint(documents)
        published: Published = {}
        for outcome in linted:
            document = outcome.document
            for uri in _uris(document):
                published[uri] = (document.where(_cell_number(document, uri))[2], [])
            for finding in outcome.findings:
                published[document.where(finding.cell)[0]][1].append(diagnostic(finding, document, codec))
        errors = list(self._projects.errors.values()) + [str(error) for outcome in linted for error in outcome.errors]
        return linted, published, errors

    def _report(self, errors: list[str]) -> None:
        """Show each configuration error or internal error once while it lasts (again if it comes back):
        the findings go on with the last configuration that loaded."""
        for message in errors:
            if message not in self._reported:
                self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"tfcheck: {message}"))
        self._reported = set(errors)

    def _submit(self, work: Callable[[], None]) -> None:
        """Change the projects' state on the lint thread, before the next pass; a failure is logged."""
        def logged() -> None:
            try:
                work()
            except Exception:  # noqa: BLE001 - the next pass goes on with the state as it is
                logger.exception("tfcheck: updating the projects failed")
        self._thread.submit(logged)

    async def _on_thread(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, work)

    def _snapshot(self) -> list[OpenDocument]:
        """The open Python files and notebooks, as the editor has them now."""
        workspace = self.workspace
        documents = []
        cells: set[str] = set()
        for notebook in workspace.notebook_documents.values():
            texts = [workspace.get_text_document(cell.document) for cell in notebook.cells]
            documents.append(OpenDocument(notebook.uri, notebook_path(_path(notebook.uri)), notebook.version,
                                          cells=tuple(Cell(cell.document, text.source, text.version,
                                                           cell.kind == types.NotebookCellKind.Code,
                                                           text.language_id or "python")
                                                      for cell, text in zip(notebook.cells, texts)),
                                          notebook=True))
            cells.update(cell.document for cell in notebook.cells)
        for document in workspace.text_documents.values():
            if document.uri not in cells and _is_python(document.uri, document.language_id):
                documents.append(OpenDocument(document.uri, _path(document.uri), document.version, document.source))
        return documents

    # -- requests -------------------------------------------------------------------------------------
    def _request(self) -> Request:
        return Request(self.workspace.position_codec, self.unsafe_fixes,
                       bool(_capability(self.client_capabilities, "workspace.workspace_edit.document_changes")))

    async def _code_action(self, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        uri = params.text_document.uri
        linted = (await self._lint()).get(uri)
        if linted is None:
            return None
        properties = _capability(self.client_capabilities, "text_document.code_action.resolve_support.properties")
        resolvable = "edit" in (properties or ())
        request = self._request()
        return await self._on_thread(lambda: code_actions(linted, uri, params.range, params.context.only,
                                                          request, resolvable))

    async def _resolve(self, action: types.CodeAction) -> types.CodeAction:
        uri = action.data.get("uri") if isinstance(action.data, dict) else None
        linted = (await self._lint()).get(uri) if uri else None
        if linted is None or action.kind != FIX_ALL:
            return action
        request = self._request()
        return await self._on_thread(lambda: resolve_fix_all(action, linted, request))

    async def _hover(self, params: types.HoverParams) -> types.Hover | None:
        linted = (await self._lint()).get(params.text_document.uri)
        if linted is None:
            return None
        return hover(linted, params.text_document.uri, params.position, self.workspace.position_codec)


def _plain(handler: Callable[..., Any]) -> Callable[..., Any]:
    """A handler as the plain function pygls registers (it marks handlers with attributes, which bound
    methods cannot carry), async where the handler is."""
    if asyncio.iscoroutinefunction(handler):
        async def handle_async(params: Any) -> Any:
            return await handler(params)
        return handle_async

    def handle(params: Any) -> Any:
        return handler(params)
    return handle


def _uris(document: OpenDocument) -> list[str]:
    """The text documents that show a document's diagnostics: the file, or each cell of a notebook."""
    return [cell.uri for cell in document.cells] if document.notebook else [document.uri]


def _cell_number(document: OpenDocument, uri: str) -> int | None:
    return next((number for number, cell in enumerate(document.cells, start=1) if cell.uri == uri), None)


def _is_python(uri: str, language_id: str | None) -> bool:
    return language_id == "python" or _path(uri).suffix in PYTHON_SUFFIXES


def _path(uri: str) -> Path:
    """A document's path on this machine; an unsaved document (`untitled:`) is taken to be in the
    server's folder, so that the configuration found there applies to it."""
    path = to_fs_path(uri) if uri_scheme(uri) == "file" else None
    return Path(path) if path else Path(os.getcwd(), Path(urlparse(uri).path).name or "untitled.py")


def _capability(capabilities: Any, dotted: str) -> Any:
    """A client capability by its dotted path, None where any part of it is missing."""
    value = capabilities
    for name in dotted.split("."):
        value = getattr(value, name, None)
        if value is None:
            return None
    return value
