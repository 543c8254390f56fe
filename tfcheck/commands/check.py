"""`tfcheck check`: lint files and folders for tf.function pitfalls."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

import click

from tfcheck.cache import default_cache_dir
from tfcheck.config import Config, ConfigError, check_codes, load_config
from tfcheck.findings import RunResult, Severity, at_least
from tfcheck.output import FORMATS, OutputOptions, renderer
from tfcheck.runner import lint_paths
from tfcheck.shard import Shard, shard_option

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def codes_option(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...] | None:
    """--select/--ignore: codes or prefixes separated by commas or spaces, validated as the config's
    `select`/`ignore` are, so `--select BOGUS` is a usage error rather than a run that checks nothing."""
    if value is None:
        return None
    codes = tuple(code for code in re.split(r"[,\s]+", value) if code)
    if not codes:
        raise click.BadParameter("no rule codes given", ctx, param)
    try:
        return check_codes(codes, f"--{param.name}")
    except ConfigError as error:
        raise click.BadParameter(str(error).removeprefix(f"--{param.name}: "), ctx, param) from None


def load_run_config(config_file: Path | None, paths: tuple[Path, ...], select: tuple[str, ...] | None,
                    ignore: tuple[str, ...] | None, extend_select: tuple[str, ...] | None = None) -> Config:
    """The config for a run, with command-line overrides. Exits with code 2 on a config error."""
    try:
        config = load_config(paths[0] if paths else Path.cwd(), config_file)
    except ConfigError as exc:
        click.echo(f"tfcheck: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    return config.with_overrides(select=select, ignore=(config.ignore + ignore) if ignore else None,
                                 extend_select=(config.extend_select + extend_select) if extend_select else None)


def write_report(result: RunResult, output_format: str, options: OutputOptions, output_file: Path | None) -> None:
    """Render a result to `output_file`, or to stdout (also used by `tfcheck merge`).

    Missing parent folders of `output_file` are created, as ruff does; a file that still cannot be
    written is an error (exit 2), never a traceback.
    """
    render = renderer(output_format)
    if output_file is None:
        render(result, options, sys.stdout)
        return
    blocker = _file_in_the_way(output_file)
    if blocker is not None:  # mkdir would say "File exists" or "Not a directory", which names neither
        _cannot_write(output_file, f"{blocker} is a file, not a folder")
    try:
        output_file.parent.mkdir(parents=True, exist_ok=True)
        with output_file.open("w", encoding="utf-8") as stream:
            render(result, options, stream)
    except OSError as error:
        _cannot_write(output_file, str(error.strerror or error))


def _file_in_the_way(path: Path) -> Path | None:
    """The first parent of `path`, from the top, that exists and is not a folder (a file), if any."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return None


def _cannot_write(output_file: Path, why: str) -> NoReturn:
    click.echo(f"tfcheck: error: cannot write {output_file}: {why}", err=True)
    sys.exit(EXIT_ERROR)


def _warn_if_nothing_checked(result: RunResult, paths: tuple[Path, ...], shard: Shard | None) -> None:
    """Say so when no file was checked and nothing went wrong (an empty folder, every file
    excluded), as ruff's "No Python files found" does: the report alone would be silent."""
    if result.files or result.has_errors:
        return
    where = ", ".join(str(path) for path in paths) or "."
    scope = f"shard {shard} of " if shard is not None else ""
    click.echo(f"tfcheck: warning: no files to check in {scope}{where} (a folder gives its files matching "
               "`include`, *.py and *.ipynb by default, less `exclude` and .gitignore)", err=True)


def exit_code(result: RunResult, exit_zero: bool) -> int:
    if result.has_errors:
        return EXIT_ERROR
    if result.findings and not exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--select", metavar="CODES", callback=codes_option,
              help="Only these rules: codes or prefixes separated by commas or spaces (TFC001,TFC01).")
@click.option("--extend-select", metavar="CODES", callback=codes_option,
              help="These rules on top of the selected ones: how an opt-in rule is turned on (TFC015).")
@click.option("--ignore", metavar="CODES", callback=codes_option,
              help="Skip these rules: codes or prefixes separated by commas or spaces.")
@click.option("--format", "output_format", type=click.Choice(sorted(FORMATS)), default="text", show_default=True)
@click.option("--output-file", "-o", type=click.Path(path_type=Path, dir_okay=False), help="Write the report here.")
@click.option("--statistics", is_flag=True, help="Print only how many findings each rule produced (a table), not the findings (text format).")
@click.option("--show-source/--no-show-source", default=True, show_default=True,
              help="Show the offending source line under each finding (text format).")
@click.option("--show-suppressed", is_flag=True, help="Also report findings silenced by ignore/noqa comments.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (2 still means an error).")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Use this pyproject.toml or tfcheck.toml instead of the nearest one.")
@click.option("--force-exclude", is_flag=True, help="Apply `exclude` to paths given explicitly (pre-commit).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: one per core).")
@click.option("--color/--no-color", default=None, help="Force colour on or off (default: only on a terminal).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the lint cache.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
              help="The lint cache folder (default: `cache-dir` of the config, .tfcheck_cache).")
@click.option("--shard", metavar="I/N", callback=shard_option,
              help="Report only shard I of N (1-based) of the files; merge the outputs with `tfcheck merge`.")
@click.option("--min-severity", type=click.Choice([s.value for s in Severity]),
              help="Report only findings of this severity or more (default: `min-severity` of the config, warning).")
@click.option("--fix", is_flag=True, help="Apply safe fixes to the files, then report what is left.")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff, also apply fixes that may change behaviour.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff instead of writing them (exit 1 if any).")
def check(paths: tuple[Path, ...], select: tuple[str, ...] | None, extend_select: tuple[str, ...] | None,
          ignore: tuple[str, ...] | None, output_format: str,
          output_file: Path | None, statistics: bool, show_source: bool, show_suppressed: bool, exit_zero: bool,
          config_file: Path | None, force_exclude: bool, jobs: int | None, color: bool | None,
          fix: bool = False, unsafe_fixes: bool = False, diff: bool = False, no_cache: bool = False,
          cache_dir: Path | None = None, shard: Shard | None = None, min_severity: str | None = None) -> None:
    """Find tf.function pitfalls in PATHS (files or folders; default: the current folder).

    Never imports or runs the code it checks. Exit status: 0 no findings, 1 findings, 2 error.
    """
    config = load_run_config(config_file, paths, select, ignore, extend_select)
    cache = None if no_cache else cache_dir or default_cache_dir(config)
    result = lint_paths(list(paths) or [Path(".")], config, jobs=jobs, force_exclude=force_exclude,
                        cache_dir=cache, shard=shard)
    if fix and not diff:
        from tfcheck.fixes import fix_in_place

        result = fix_in_place(result, config, unsafe_fixes,
                              lambda: lint_paths(list(paths) or [Path(".")], config, jobs=jobs, force_exclude=force_exclude,
                                                 cache_dir=cache, shard=shard))
    minimum = Severity(min_severity) if min_severity else config.min_severity
    result = replace(result, findings=at_least(result.findings, minimum), suppressed=at_least(result.suppressed, minimum))
    for message in result.path_errors:
        click.echo(f"tfcheck: error: {message}", err=True)
    for error in result.errors:
        click.echo(f"tfcheck: error: {error}", err=True)
    _warn_if_nothing_checked(result, paths, shard)
    if diff:
        from tfcheck.fixes import print_diff

        changes = print_diff(result, config, unsafe_fixes)
        sys.exit(EXIT_ERROR if result.has_errors else changes)
    options = OutputOptions(show_source=show_source, statistics=statistics, show_suppressed=show_suppressed,
                            color=False if output_file else color)
    write_report(result, output_format, options, output_file)
    sys.exit(exit_code(result, exit_zero))
