"""Rich consoles whose tables stay whole where the output is not a terminal.

On a terminal rich fits tables to the window, cutting cells with `…`. Written to a pipe or a file
(`tfcheck rules > rules.txt`, a CI log), rich would assume 80 columns and cut the same way, and
what is cut there cannot be read anywhere: so off a terminal the width is one no table reaches.
"""

from __future__ import annotations

import sys

from rich.console import Console

PIPE_WIDTH = 10_000  # columns off a terminal: wider than any row, so no cell is cut or wrapped


def table_console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr): the terminal's width on a terminal, PIPE_WIDTH elsewhere."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else PIPE_WIDTH)
