"""The `tfcheck` command line.

Each subcommand lives in its own module under `tfcheck/commands/` and is imported only when it
runs, so `tfcheck check` in a pre-commit hook never pays for the compiler's or the runtime's imports,
and `tfcheck --help` imports none of them: a linter-only install (`pip install tfcheck`) has no
NumPy, TensorFlow or TVM, and must still list every command. A command module imports no extra at
module level, so `tfcheck build --help` works there too; running the command checks its extra first
(`tfcheck/requirements.py`).

Exit status, for every command (docs/cli.md): 0 ok, 1 findings or failed builds, 2 usage, config or
internal error. Commands say 1 only with `sys.exit(1)`; every exception that reaches this module
means 2.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass

import click

from tfcheck import __version__

EXIT_ERROR = 2
# Set to 1 to see the traceback of an internal error instead of the short message.
TRACEBACK_VARIABLE = "TFCHECK_TRACEBACK"


@dataclass(frozen=True)
class CommandEntry:
    """Where a command lives, its one-line help (shown without importing it), the extra it needs
    to run (its help needs none: the command checks the extra when it runs, `tfcheck/requirements.py`)."""

    target: str  # "module:attribute" of a click command
    help: str
    extra: str | None = None


# Adding a command means adding a module and a line.
COMMANDS: dict[str, CommandEntry] = {
    "check": CommandEntry("tfcheck.commands.check:check", "Find tf.function pitfalls in files and folders."),
    "merge": CommandEntry("tfcheck.commands.merge:merge", "Merge the reports of `check --shard I/N` jobs."),
    "rules": CommandEntry("tfcheck.commands.rules:rules", "List every rule."),
    "explain": CommandEntry("tfcheck.commands.rules:explain", "Print the documentation of a rule."),
    "server": CommandEntry("tfcheck.commands.server:server", "Serve findings to editors (Language Server Protocol)."),
    "run": CommandEntry("tfcheck.commands.run:run", "Run a compiled artifact on .npy inputs.", "runtime"),
    "ls": CommandEntry("tfcheck.commands.cache:ls", "List the compiled artifacts in the cache."),
    "clean": CommandEntry("tfcheck.commands.cache:clean", "Delete the compiled artifacts in the cache."),
    "build": CommandEntry("tfcheck.commands.build:build", "Compile @tfcheck.aot functions with TVM.", "build"),
    "inspect": CommandEntry("tfcheck.commands.build:inspect", "Report the operators of @tfcheck.aot functions.", "build"),
    "bench": CommandEntry("tfcheck.commands.bench:bench", "Time compiled functions against TensorFlow.", "build"),
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that subcommand is used, and turns
    whatever escapes a command into exit status 2."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, attr = entry.target.split(":")
        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The COMMANDS table's help, so `tfcheck --help` imports no command module."""
        rows = [(name, entry.help + (f" [{entry.extra} extra]" if entry.extra else ""))
                for name, entry in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.UsageError as error:  # click prints the usage line with it
            error.exit_code = EXIT_ERROR  # click's default is 1, which tfcheck keeps for findings
            raise
        except click.ClickException as error:  # worded like every other command's errors
            click.echo(f"tfcheck: error: {error.format_message()}", err=True)
            sys.exit(EXIT_ERROR)
        except (click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("tfcheck: interrupted", err=True)
            sys.exit(130)
        except Exception as error:  # noqa: BLE001 - a bug in tfcheck: a short message, not a traceback
            if os.environ.get(TRACEBACK_VARIABLE) == "1":
                raise
            _report_internal_error(error)
            sys.exit(EXIT_ERROR)


def _report_internal_error(error: Exception) -> None:
    from tfcheck.findings import describe_exception

    click.echo(f"tfcheck: internal error: {describe_exception(error)}\n"
               f"This is a bug in tfcheck: please report it with the command you ran. "
               f"{TRACEBACK_VARIABLE}=1 shows the traceback.", err=True)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tfcheck")
def main() -> None:
    """Find tf.function pitfalls, and compile tf.functions ahead of time with Apache TVM.

    Exit status: 0 ok, 1 findings or failed builds, 2 usage, config or internal error.
    """
