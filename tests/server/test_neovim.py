"""A real editor: headless Neovim, with its built-in LSP client, opens a fixture and receives the same
findings `tfcheck check` reports for it (CI installs Neovim in .ci/run; skipped where there is none)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("nvim") is None,
                                                   reason="no `nvim` on PATH (apt-get install neovim)")]

FIXTURE = REPO / "fixtures" / "lint" / "misc_bad.py"
# Starts the server as docs/editors.md says (`vim.lsp.start`, Neovim 0.8+; `start_client` on older ones),
# waits for diagnostics, writes them as JSON and quits.
SCRIPT = r"""
local file, out, root = os.getenv("TFCHECK_FILE"), os.getenv("TFCHECK_OUT"), os.getenv("TFCHECK_ROOT")
vim.cmd("edit " .. vim.fn.fnameescape(file))
local buffer = vim.api.nvim_get_current_buf()
local config = { name = "tfcheck", cmd = { os.getenv("TFCHECK_PYTHON"), "-m", "tfcheck", "server" }, root_dir = root }
if vim.lsp.start then
  vim.lsp.start(config)
else
  vim.lsp.buf_attach_client(buffer, vim.lsp.start_client(config))
end
vim.wait(60000, function() return #vim.diagnostic.get(buffer) > 0 end, 50)
vim.wait(500)  -- every publication of the first pass has arrived
local found = {}
for _, d in ipairs(vim.diagnostic.get(buffer)) do
  table.insert(found, { line = d.lnum, column = d.col, code = d.code, severity = d.severity, source = d.source })
end
vim.fn.writefile({ vim.fn.json_encode(found) }, out)
vim.cmd("qa!")
"""


def test_neovim_receives_the_findings_check_reports(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.tfcheck]\n")
    shutil.copy(FIXTURE, project / FIXTURE.name)
    script = tmp_path / "tfcheck.lua"
    script.write_text(SCRIPT)
    out = tmp_path / "diagnostics.json"
    environment = {**os.environ, "TFCHECK_FILE": str(project / FIXTURE.name), "TFCHECK_OUT": str(out),
                   "TFCHECK_ROOT": str(project), "TFCHECK_PYTHON": sys.executable}
    subprocess.run(["nvim", "--headless", "--clean", "-c", f"luafile {script}"], cwd=project, env=environment,
                   check=True, timeout=120, capture_output=True, stdin=subprocess.DEVNULL)
    received = json.loads(out.read_text())
    check = subprocess.run([sys.executable, "-m", "tfcheck", "check", "--no-cache", "--format", "json", FIXTURE.name],
                           cwd=project, capture_output=True, text=True)
    expected = json.loads(check.stdout)
    assert len(expected) >= 5
    assert sorted((d["line"], d["column"], d["code"]) for d in received) == \
        sorted((f["line"] - 1, f["column"] - 1, f["code"]) for f in expected)
    assert {d["source"] for d in received} == {"tfcheck"}
    severities = {"error": 1, "warning": 2, "info": 3}  # vim.diagnostic.severity
    assert sorted((d["line"], d["severity"]) for d in received) == \
        sorted((f["line"] - 1, severities[f["severity"]]) for f in expected)
