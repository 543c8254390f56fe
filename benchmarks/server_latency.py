"""From a change to its diagnostics in `tfcheck server`, warm, for a 2,000-line file (issue 41: within 200 ms).

    .venv/bin/python benchmarks/server_latency.py                       # 2,000 lines, 30 changes per case
    .venv/bin/python benchmarks/server_latency.py --lines 5000 --changes 50

A pygls client starts `python -m tfcheck server` (its CPU affinity set to two cores), opens the file and
waits for the first diagnostics: the warm-up (the server's imports, the rules, the workspace's first
pass). Then it changes one line at a time, as a person types, and waits for the diagnostics of each
version before the next change: the time from sending `textDocument/didChange` to receiving
`textDocument/publishDiagnostics` for that version, the server's default debounce (50 ms) included.

The file is generated code from `benchmarks/lint_scale.py` (every rule's machinery, findings of most
rules), cut at whole blocks and padded with comments to the number of lines; the default rules. Cases:
- `alone`: the file is the workspace's only Python file;
- `graph code from another file`: a second file's tf.function calls functions of it, so the project
  pass gives it roots: each change analyses it twice (the pass's first round without those roots, then
  with them), as `tfcheck check` would.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lint_scale import BLOCKS, PROLOGUE  # noqa: E402 - a sibling script, not a package

CORES = 2
CALLER = """\
import tensorflow as tf

import generated


@tf.function
def drive(x):
    generated.accumulate_0(x)
    return generated.numpy_side_0(x) + generated.predict_0(None, x)
"""


def generated_file(lines: int) -> str:
    """lint_scale's blocks, whole ones, up to `lines` lines, padded with comments to exactly that many."""
    text = PROLOGUE
    for cycle in range(lines):
        for template, _ in BLOCKS:
            block = template(cycle)
            if text.count("\n") + block.count("\n") > lines:
                return text + "# padding\n" * (lines - text.count("\n"))
            text += block
    return text


class Timer:
    """The client side: sends changes and times the diagnostics that answer each version."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.waiting: dict[int, asyncio.Future[float]] = {}
        client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(lambda params: self._published(params))
        client.feature(types.CLIENT_REGISTER_CAPABILITY)(lambda params: None)
        client.feature(types.WINDOW_SHOW_MESSAGE)(lambda params: print(f"server: {params.message}", file=sys.stderr))

    def _published(self, params: types.PublishDiagnosticsParams) -> None:
        future = self.waiting.get(params.version) if params.version is not None else None
        if future is not None and not future.done():
            future.set_result(time.perf_counter())

    async def open(self, uri: str, text: str) -> float:
        done = self._expect(1)
        started = time.perf_counter()
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text)))
        return await asyncio.wait_for(done, 120) - started

    async def change(self, uri: str, version: int, text: str) -> float:
        done = self._expect(version)
        started = time.perf_counter()
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [types.TextDocumentContentChangeWholeDocument(text)]))
        return await asyncio.wait_for(done, 120) - started

    def _expect(self, version: int) -> asyncio.Future[float]:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[version] = future
        return future


async def measure(folder: Path, text: str, changes: int) -> tuple[float, list[float]]:
    """The warm-up's seconds and each change's, for `generated.py` in `folder`."""
    client = LanguageClient("server-latency", "1")
    timer = Timer(client)
    cores = sorted(os.sched_getaffinity(0))[:CORES]
    await client.start_io(sys.executable, "-m", "tfcheck", "server", preexec_fn=lambda: os.sched_setaffinity(0, cores))
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=folder.as_uri(),
        workspace_folders=[types.WorkspaceFolder(folder.as_uri(), folder.name)]))
    client.initialized(types.InitializedParams())
    uri = (folder / "generated.py").as_uri()
    warm_up = await timer.open(uri, text)
    lines = text.splitlines(keepends=True)
    target = next(i for i in range(len(lines) // 2, len(lines)) if "scaled = " in lines[i])
    seconds = []
    for version in range(2, changes + 2):
        lines[target] = lines[target].replace(" * ", f" * {version} * ", 1) if version % 2 else \
            lines[target].replace(f" * {version - 1} * ", " * ", 1)
        seconds.append(await timer.change(uri, version, "".join(lines)))
        await asyncio.sleep(0.2)  # a pause between keystrokes: each change is linted on its own
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return warm_up, seconds


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return (f"{model}, server pinned to {CORES} of {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"load average {os.getloadavg()[0]:.1f} at the start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--changes", type=int, default=30)
    args = parser.parse_args()
    text = generated_file(args.lines)
    print(f"{machine()}\n")
    print("| case | lines | warm-up s | changes | median ms | p90 ms | max ms |\n|---|--:|--:|--:|--:|--:|--:|")
    for case, extra in (("alone", {}), ("graph code from another file", {"caller.py": CALLER})):
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            (folder / "pyproject.toml").write_text("[tool.tfcheck]\n")
            (folder / "generated.py").write_text(text)
            for name, source in extra.items():
                (folder / name).write_text(source)
            warm_up, seconds = asyncio.run(measure(folder, text, args.changes))
        ms = sorted(1000 * s for s in seconds)
        print(f"| {case} | {text.count(chr(10)):,} | {warm_up:.2f} | {len(ms)} | {statistics.median(ms):.0f} | "
              f"{ms[int(0.9 * (len(ms) - 1))]:.0f} | {ms[-1]:.0f} |", flush=True)


if __name__ == "__main__":
    main()
