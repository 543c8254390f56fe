"""Every `tfcheck` command line the docs show names a command and options that exist (issue 40,
item 7): the lines starting with `$ ` in ```console blocks, every line of ```sh blocks, and code
spans in the text that start with `tfcheck `, of README.md and docs/*.md, read with click's command
objects (nothing is run)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from tests.conftest import REPO
from tfcheck.cli import COMMANDS, main

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
CODE_SPAN = re.compile(r"`(tfcheck [^`]+)`")
SEPARATORS = {"|", "||", "&&", ";", "&"}  # between the commands of one shell line
# Lines known to be wrong, left to the developer who fixes the docs (issue 40, item 7): `tfcheck
# cache` is not a command (`tfcheck clean` is).


@dataclass(frozen=True)
class DocCommand:
    """One `tfcheck ...` invocation shown in a doc: where, and its words after `tfcheck`."""

    doc: str
    line: int
    words: tuple[str, ...]

    def __str__(self) -> str:
        return " ".join(("tfcheck", *self.words))


def shell_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, command) of each `$ ` line of a console block, each line of a sh block
    (continuation lines joined) and each `tfcheck ...` code span outside code blocks."""
    found: list[tuple[int, str]] = []
    language, pending, start = None, "", 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line.strip())
        if fence:
            language = None if language is not None else fence[1]
            continue
        if language is None:
            found += [(number, span) for span in CODE_SPAN.findall(line)]
            continue
        text = line.strip()
        if language == "console" and text.startswith("$ "):
            text = text[2:]
        elif language not in ("sh", "bash", "shell") and not pending:
            continue
        pending, start = pending + text.removesuffix("\\"), start or number
        if not text.endswith("\\"):
            found.append((start, pending))
            pending, start = "", 0
    return found


def tfcheck_invocations(doc: str, number: int, line: str) -> list[DocCommand]:
    """The `tfcheck ...` commands of one shell line (`tfcheck ls / tfcheck clean` holds two)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
    lexer.whitespace_split, lexer.commenters = True, "#"
    words = list(lexer)
    starts = [i for i, word in enumerate(words) if word == "tfcheck" or word.endswith("/tfcheck")]
    commands = []
    for start, end in zip(starts, [*starts[1:], len(words)]):
        rest = words[start + 1:end]
        stop = next((i for i, word in enumerate(rest) if word in SEPARATORS), len(rest))
        commands.append(DocCommand(doc, number, tuple(rest[:stop])))
    return commands


def doc_commands() -> list[DocCommand]:
    return [command for path in DOCS for number, line in shell_lines(path)
            for command in tfcheck_invocations(str(path.relative_to(REPO)), number, line)]


def problems(command: DocCommand) -> list[str]:
    """What in `command` does not exist: the subcommand, or an option of it (or of `tfcheck`)."""
    context = click.Context(main)
    group_options = _option_names(main, context)
    words = list(command.words)
    while words and words[0].startswith("-"):
        option = words.pop(0).split("=")[0]
        if option not in group_options:
            return [f"no option {option} of tfcheck"]
    if not words:
        return []
    name = words.pop(0)
    if name not in COMMANDS:
        return [f"no command {name!r}"]
    subcommand = main.get_command(context, name)
    assert subcommand is not None
    known = _option_names(subcommand, click.Context(subcommand, parent=context))
    return [f"no option {word.split('=')[0]} of tfcheck {name}" for word in words
            if word.startswith("-") and word != "-" and word.split("=")[0] not in known
            and not _short_with_value(word, known)]


def _option_names(command: click.Command, context: click.Context) -> set[str]:
    return {name for param in command.get_params(context) if isinstance(param, click.Option)
            for name in (*param.opts, *param.secondary_opts)}


def _short_with_value(word: str, known: set[str]) -> bool:
    """`-j4`, `-ofile`: a short option with its value attached."""
    return len(word) > 2 and not word.startswith("--") and word[:2] in known


ALL = doc_commands()


def test_the_docs_show_commands() -> None:
    assert len(ALL) > 30 and {"check", "build", "run", "clean"} <= {c.words[0] for c in ALL if c.words}


@pytest.mark.parametrize("command", [pytest.param(c, id=f"{c.doc}:{c.line}") for c in ALL])
def test_a_documented_command_exists_with_its_options(command: DocCommand) -> None:
    assert problems(command) == [], f"{command.doc}:{command.line}: {command}"
