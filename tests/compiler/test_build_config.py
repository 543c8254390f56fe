"""`[tool.tfcheck.build]`: the documented examples parse, and bad values stop the run naming the
file, the key and the function before anything is traced (no TensorFlow here: these are quick)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tfcheck.compiler.build import driver
from tfcheck.config import ConfigError, parse_table

ROOT = Path(__file__).resolve().parents[2]


def toml_examples(document: str) -> list[str]:
    """The ```toml blocks of a Markdown file that configure tfcheck."""
    text = (ROOT / document).read_text(encoding="utf-8")
    return [block for block in re.findall(r"```toml\n(.*?)```", text, re.DOTALL) if "[tool.tfcheck" in block]


@pytest.mark.parametrize("document", ["README.md", "docs/build.md"])
def test_the_documented_build_config_parses(document: str) -> None:
    examples = [tomllib.loads(block)["tool"]["tfcheck"] for block in toml_examples(document)]
    builds = [parse_table(table, Path("pyproject.toml")).build for table in examples if "build" in table]
    shapes = {name: entries for build in builds for name, entries in build.shapes.items()}
    assert shapes, f"{document} shows no [tool.tfcheck.build] shapes"
    for entries in shapes.values():  # the form the tracing child reads: entries of shapes of ints
        assert all(isinstance(dim, int) for entry in entries for shape in entry for dim in shape)


@pytest.mark.parametrize(("shapes", "message"), [
    ('{ "m.f" = [[1, 8], [4, 8]] }',
     "[tool.tfcheck].build.shapes.m.f: entry [1, 8] is a bare shape; each entry lists one shape per "
     "input, so write [[1, 8]] for a function with one input"),
    ('{ "m.f" = [[[1, -8]]] }', "[tool.tfcheck].build.shapes.m.f: entry [[1, -8]] is not a list of shapes"),
    ('{ "m.f" = [[]] }', "[tool.tfcheck].build.shapes.m.f: entry [] is not a list of shapes"),
    ('{ "m.f" = [] }', "[tool.tfcheck].build.shapes.m.f: expected a non-empty list of shape entries"),
    ('{ "../m.f" = [[[1]]] }', "'../m.f' is not a dotted function name"),
    ('[[1, 8]]', "[tool.tfcheck].build.shapes: expected a table of \"module.function\" = [shape entries]"),
])
def test_bad_shapes_name_the_file_key_and_function(shapes: str, message: str) -> None:
    table = tomllib.loads(f"[tool.tfcheck.build]\nshapes = {shapes}\n")["tool"]["tfcheck"]
    with pytest.raises(ConfigError) as raised:
        parse_table(table, Path("/project/pyproject.toml"))
    assert str(raised.value).startswith("/project/pyproject.toml: ") and message in str(raised.value)


def test_nested_entries_for_one_and_two_inputs_are_kept() -> None:
    table = tomllib.loads('[tool.tfcheck.build]\nshapes = { "m.f" = [[[1, 8]], [[4, 8]]], '
                          '"m.g" = [[[1, 2], [1, 3]]] }\n')["tool"]["tfcheck"]
    shapes = parse_table(table, Path("pyproject.toml")).build.shapes
    assert shapes == {"m.f": [[[1, 8]], [[4, 8]]], "m.g": [[[1, 2], [1, 3]]]}


@pytest.mark.parametrize(("config", "message"), [
    ('[tool.tfcheck.build]\ntarget = "gpu"\n',
     "pyproject.toml: [tool.tfcheck.build] target = 'gpu': unknown target 'gpu'"),
    ('[tool.tfcheck.build]\nshapes = { "m.f" = [[1, 8]] }\n',
     "pyproject.toml: [tool.tfcheck].build.shapes.m.f: entry [1, 8] is a bare shape"),
    ('[tool.tfcheck.build]\njobs = 0\n',
     "pyproject.toml: [tool.tfcheck].build.jobs: expected a whole number of at least 1, got 0"),
])
def test_build_reports_a_bad_config_as_a_usage_error(project: Callable[..., Path],
                                                     run_cli: Callable[..., Result], config: str,
                                                     message: str) -> None:
    folder = project({}, config=config)
    result = run_cli(folder, "build", "--dry-run")
    assert result.exit_code == 2
    assert message in result.stderr and "--target/--arch" not in result.stderr


@pytest.mark.parametrize("value", ["0", "-2", "1.5", '"4"', "true"])
def test_jobs_must_be_a_whole_number_of_at_least_one(value: str) -> None:
    table = tomllib.loads(f"[tool.tfcheck.build]\njobs = {value}\n")["tool"]["tfcheck"]
    with pytest.raises(ConfigError, match=r"^pyproject.toml: \[tool.tfcheck\].build.jobs: expected a whole number"):
        parse_table(table, Path("pyproject.toml"))


@pytest.mark.parametrize(("config", "arguments", "requested"), [
    ("", (), None),  # the cores
    ("[tool.tfcheck.build]\njobs = 3\n", (), 3),
    ("[tool.tfcheck.build]\njobs = 3\n", ("--jobs", "5"), 5),  # the command line wins
])
def test_jobs_come_from_the_config_unless_given_on_the_command_line(
        project: Callable[..., Path], run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
        config: str, arguments: tuple[str, ...], requested: int | None) -> None:
    asked: list[int | None] = []

    def jobs_for(requested_jobs: int | None) -> tuple[int, None]:
        asked.append(requested_jobs)
        return 1, None

    monkeypatch.setattr(driver, "jobs_for", jobs_for)
    result = run_cli(project({}, config=config), "build", "--dry-run", *arguments)
    assert result.exit_code == 0 and asked == [requested]
