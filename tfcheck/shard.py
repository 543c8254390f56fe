"""`--shard I/N`: split a run's files across CI jobs, deterministically.

A file's shard depends only on its path relative to the config root (a hash of it), never on which
other files exist, so adding a file moves no other file, and each CI job of a matrix computes the same
split. Every shard still discovers and summarises all files for the project pass (tfcheck/project.py),
so a finding that depends on a call in another shard's file is still reported, by the callee's shard.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import click

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, spec: str) -> Shard:
        """Parse `I/N` with 1 <= I <= N; raises ValueError with a message for users."""
        match = _SPEC.match(spec)
        if match is None:
            raise ValueError(f"{spec!r} is not of the form I/N, such as 1/4")
        index, count = int(match[1]), int(match[2])
        if not 1 <= index <= count:
            raise ValueError(f"{spec!r}: I must be between 1 and N")
        return cls(index, count)

    def contains(self, relative_path: str) -> bool:
        return shard_of(relative_path, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_of(relative_path: str, count: int) -> int:
    """The 1-based shard of a path among `count`: a stable hash, the same on every machine and Python."""
    digest = hashlib.sha256(relative_path.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def shard_option(ctx: click.Context, param: click.Parameter, value: str | None) -> Shard | None:
    """Click callback of `--shard`: a bad spec is a usage error (exit 2) naming the option."""
    if value is None:
        return None
    try:
        return Shard.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
