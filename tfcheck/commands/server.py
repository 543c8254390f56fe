"""`tfcheck server`: the linter as a language server for editors (docs/editors.md)."""

from __future__ import annotations

import logging
import sys

import click


@click.command()
@click.option("--stdio", is_flag=True, help="Talk over standard input and output (the default and only "
                                            "transport; accepted because some editors pass it).")
@click.option("--debounce-ms", type=click.IntRange(min=0), default=50, show_default=True,
              help="After a change, wait this long for the next one before linting.")
@click.option("--unsafe-fixes", is_flag=True,
              help="Also offer fixes that may change behaviour, and apply them in fix all (as `check --fix --unsafe-fixes`).")
def server(stdio: bool, debounce_ms: int, unsafe_fixes: bool) -> None:
    """Serve diagnostics, fixes and rule explanations to an editor over the Language Server Protocol.

    The workspace's pyproject.toml or tfcheck.toml configures it, as it does `tfcheck check`.
    """
    from tfcheck.server.server import TfcheckServer

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="tfcheck server: %(levelname)s: %(message)s")
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the protocol's stream
    TfcheckServer(debounce_ms / 1000, unsafe_fixes).start_io(sys.stdin.buffer, protocol_out)
