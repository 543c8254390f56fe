"""The `tfcheck` command line.

Each subcommand lives in its own module under `tfcheck/commands/` and is imported only when it
runs, so `tfcheck check` in a pre-commit hook never pays for the compiler's or the runtime's imports.
"""

from __future__ import annotations

import importlib

import click

from tfcheck import __version__

# name -> "module:attribute" of a click command. Adding a command means adding a module and a line.
COMMANDS: dict[str, str] = {
    "check": "tfcheck.commands.check:check",
    "merge": "tfcheck.commands.merge:merge",
    "rules": "tfcheck.commands.rules:rules",
    "explain": "tfcheck.commands.rules:explain",
    "run": "tfcheck.commands.run:run",
    "ls": "tfcheck.commands.cache:ls",
    "clean": "tfcheck.commands.cache:clean",
    "build": "tfcheck.commands.build:build",
    "inspect": "tfcheck.commands.build:inspect",
    "bench": "tfcheck.commands.bench:bench",
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that subcommand is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tfcheck")
def main() -> None:
    """Find tf.function pitfalls, and compile tf.functions ahead of time with Apache TVM."""
