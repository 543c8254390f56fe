"""`tfcheck server` in the linter-only install (`pip install tfcheck`: no extra), as a user gets it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import client_capabilities, make_test_lsp_client

from tests.conftest import fresh_venv

pytestmark = pytest.mark.slow

BAD = "import tensorflow as tf\n\n\n@tf.function\ndef f(x):\n    assert tf.reduce_all(x > 0)\n    return x\n"


def test_the_server_runs_in_the_linter_only_install(wheel: Path, tmp_path: Path) -> None:
    bin_dir = fresh_venv(tmp_path / "venv", str(wheel))
    project = tmp_path / "project"
    project.mkdir()
    (project / "bad.py").write_text(BAD)
    assert asyncio.run(_diagnostics(bin_dir / "tfcheck", project, project / "bad.py")) == ["TFC008"]


async def _diagnostics(tfcheck: Path, folder: Path, path: Path) -> list[str]:
    client = make_test_lsp_client()
    await client.start_io(str(tfcheck), "server", cwd=str(folder))
    try:
        await client.initialize_session(types.InitializeParams(
            capabilities=client_capabilities("neovim"), root_uri=folder.as_uri()))
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(path.as_uri(), "python", 1, path.read_text())))
        await asyncio.wait_for(client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), 60)
        return [str(diagnostic.code) for diagnostic in client.diagnostics[path.as_uri()]]
    finally:
        await client.shutdown_session()
        await client.stop()
