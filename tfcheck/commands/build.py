"""`tfcheck build` and `tfcheck inspect`: compile `@tfcheck.aot` functions with Apache TVM.

The main process never imports TensorFlow: functions are found statically, and tracing and
compiling happen in child processes (see `compiler/build/driver.py`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from tfcheck.config import Config, ConfigError, load_config
from tfcheck.output.terminal import table_console
from tfcheck.requirements import require
from tfcheck.runtime.manifest import CACHE_DIR

if TYPE_CHECKING:  # imported when a command runs: `tfcheck --help` pays for none of it
    from tfcheck.compiler.trace.discover import AnnotatedFunction
    from tfcheck.compiler.build.driver import BuildOptions, BuildRecord
    from tfcheck.compiler.build.targets import TargetChoice
    from tfcheck.compiler.cache.artifacts import ArtifactCache
    from tfcheck.compiler.process.messages import TuningOptions
    from tfcheck.runtime.manifest import TensorSpec

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


def _console(output_format: str) -> Console:
    """Progress and tables; on stderr in JSON mode. Whole rows off a terminal (CI logs, pipes)."""
    return table_console(stderr=output_format == "json")


def _load_config() -> Config:
    try:
        return load_config(Path.cwd())
    except ConfigError as error:
        _config_error(str(error))


def _config_error(message: str) -> NoReturn:
    """A configuration problem is a usage error (exit 2), reported like `tfcheck check` does."""
    click.echo(f"tfcheck: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _find_functions(arguments: tuple[str, ...], config: Config,
                    signatures: tuple[str, ...] = ()) -> tuple[list[AnnotatedFunction], list[str]]:
    """Annotated functions in the given files, folders or dotted module names (default: `.`),
    and the requested signatures (default: all) of the SavedModel folders among them."""
    from tfcheck.compiler.trace.discover import discover, resolve_module_argument
    from tfcheck.compiler.trace.saved_model import is_saved_model, saved_model_functions
    from tfcheck.files import discover as discover_files

    paths: list[Path] = []
    errors: list[str] = []
    saved: list[AnnotatedFunction] = []
    for argument in arguments or (".",):
        if is_saved_model(Path(argument)):
            functions, problems = saved_model_functions(Path(argument), signatures)
            saved += functions
            errors += problems
        elif os.path.lexists(argument):
            paths.append(Path(argument))
        elif (module_file := resolve_module_argument(argument)) is not None:
            paths.append(module_file)
        else:
            errors.append(f"{argument}: no such file, folder or module")
    if signatures and not saved and not errors:
        errors.append("--signature names signatures of a SavedModel folder, and no argument is one")
    found_files = discover_files(paths, config) if paths else None
    found = discover(found_files.files, config) if found_files else None
    return (saved + (found.functions if found else []),
            errors + (found_files.errors if found_files else []) + (found.errors if found else []))


def _choose_targets(target: str | None, arch: str | None, config: Config, cache: ArtifactCache | None) -> TargetChoice:
    """The run's targets (`choose_targets`), with a target that cannot be built reported as the
    usage error it is: the flag's, or the config file's key. The host CPU's LLVM name is kept in
    the artifact `cache`, so that an unchanged rebuild need not import TVM to learn it again."""
    from tfcheck.compiler.build.targets import TargetError, choose_targets

    try:
        return choose_targets(target, config.build.target, arch, cache)
    except TargetError as error:
        if target is None:  # the config's target: say which file and key to fix
            table = "[tool.tfcheck.build]" if config.source and config.source.name == "pyproject.toml" else "[build]"
            _config_error(f"{config.source}: {table} target = {config.build.target!r}: {error}")
        raise click.BadParameter(str(error), param_hint="--target/--arch") from None


class _RichReporter:
    """One progress line per function (lint, trace, convert, compile, verify), then its result."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._tasks: dict[str, Any] = {}
        self._lock = threading.Lock()  # parallel builds report from several threads

    def stage(self, function: AnnotatedFunction, stage: str) -> None:
        self._progress.update(self._task(function), description=f"{function.label}: {stage}")

    def done(self, function: AnnotatedFunction, records: list[BuildRecord]) -> None:
        statuses = ", ".join(sorted({r.status for r in records}))
        self._progress.update(self._task(function), description=f"{function.label}: {statuses}", total=1, completed=1)

    def _task(self, function: AnnotatedFunction) -> Any:
        """The function's own progress line (rich redraws whole lines: parallel builds never mix)."""
        with self._lock:
            if function.label not in self._tasks:
                self._tasks[function.label] = self._progress.add_task(function.label, total=None)
            return self._tasks[function.label]


class _SilentReporter:
    def stage(self, function: AnnotatedFunction, stage: str) -> None:
        """No progress output (JSON mode keeps stdout machine-readable)."""

    def done(self, function: AnnotatedFunction, records: list[BuildRecord]) -> None:
        """Nothing to show before the JSON document."""


def _run(functions: list[AnnotatedFunction], options: BuildOptions, output_format: str, console: Console) -> list[BuildRecord]:
    from tfcheck.compiler.build.driver import build_all

    if not functions:  # no progress display: its empty render is a blank line
        return []
    if output_format == "json":
        return build_all(functions, options, _SilentReporter())
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        return build_all(functions, options, _RichReporter(progress))


def _size(size: int | None) -> str:
    if size is None:
        return "-"
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"


def _error_text(record: BuildRecord) -> str:
    if record.max_abs_error is None:
        return "not run" if record.status in ("built", "cached") else "-"
    return f"{record.max_abs_error:.1e} / {record.max_rel_error:.1e}"


def _print_table(records: list[BuildRecord], console: Console) -> None:
    if not records:
        return
    table = Table(title="tfcheck build")
    for column in ("function", "target", "status", "ops", "build time", "max error abs / rel", "size"):
        table.add_column(column, justify="right" if column in ("ops", "build time", "size") else "left")
    for record in records:
        style = {"failed": "red", "cached": "cyan", "built": "green"}.get(record.status, "")
        several = sum(other.function == record.function for other in records) > 1
        name = f"{record.function} {_shapes(record.inputs)}" if several else record.function
        table.add_row(name, record.target, f"[{style}]{record.status}[/]" if style else record.status,
                      "-" if record.ops is None else str(record.ops), f"{record.seconds:.1f} s",
                      _error_text(record), _size(record.size))
    console.print(table)
    for record in records:
        if record.tuning:
            console.print(f"• {escape(record.function)}: {_tuning_text(record.tuning)}", highlight=False)
        for fallback in record.budget_fallbacks:
            console.print(f"• {escape(record.function)}: {escape(_fallback_text(fallback))}", highlight=False)
    for record in records:
        if record.message:
            mark = "[red]✗[/]" if record.status == "failed" else "•"
            console.print(f"{mark} {escape(record.message)}", highlight=False)
    for line in summary_lines(records):
        console.print(escape(line), highlight=False)


_STATUS_ORDER = ("built", "cached", "checked", "failed")


def summary_lines(records: list[BuildRecord]) -> list[str]:
    """`3 built, 2 cached, 1 failed`, the cache the artifacts are in, and what --out exported where."""
    from tfcheck.compiler.build.driver import display_path

    counts = {status: sum(r.status == status for r in records) for status in _STATUS_ORDER}
    lines = [", ".join(f"{count} {status}" for status, count in counts.items() if count)]
    caches = sorted({display_path(Path(r.artifact).parent) for r in records if r.artifact})
    if caches:
        lines.append(f"artifacts in the cache {', '.join(caches)}")
    exported = [Path(r.exported) for r in records if r.exported]
    for folder in sorted({path.parent for path in exported}):
        names = ", ".join(path.name for path in exported if path.parent == folder)
        lines.append(f"exported to {display_path(folder)}{os.sep}: {names}")
    return lines


def _fallback_text(fallback: dict[str, Any]) -> str:
    """One line on a kernel whose schedule was over the code-size budget (the manifest's `budget_fallbacks`)."""
    refused = ", ".join(f"{entry['rule']} ({entry['code_size']:,})" for entry in fallback["refused"])
    return (f"kernel {fallback['kernel']} built with {fallback['schedule']}: the schedule of {refused} was over "
            f"the code-size budget of {fallback['budget']:,} TIR nodes after unrolling")


def _tuning_text(tuning: dict[str, Any]) -> str:
    """One line on what tuning did for an artifact (the manifest's `tuning`)."""
    done = f"{tuning['tasks_tuned']} tuned now ({tuning['trials']} trials)" if tuning["tasks_tuned"] else "none tuned now"
    return (f"{tuning['tasks']} operators, {tuning['tasks_reused']} from the tuning database, {done}, "
            f"{tuning['tasks_kept_default']} kept the default schedule (measured faster)"
            f"{_unknown_size_text(tuning.get('tasks_of_unknown_size', 0))}; "
            f"tuning took {tuning['seconds']:.1f} s{_whole_model_text(tuning.get('whole_model'))}")


def _unknown_size_text(count: int) -> str:
    """The operators tuning left to their default schedules because their sizes are known only at
    run time (artifacts built before that count have none)."""
    if not count:
        return ""
    return f", {count} operator{'s' if count > 1 else ''} over sizes known only at run time kept it (not tunable)"


def _whole_model_text(race: dict[str, Any] | None) -> str:
    """How the tuned model fared against the default one as a whole, and which one was kept
    (artifacts built before the race existed have no record of it)."""
    if race is None:
        return ""
    if "tuned_ms" in race:
        return (f"; whole model {race['tuned_ms']:.3g} ms tuned, {race['default_ms']:.3g} ms default: "
                f"kept the {race['kept']} build")
    if "why" in race:
        return f"; kept the tuned build without timing the whole model ({race['why']})"
    return "; no tuned schedule measured faster: kept the default build"


def _shapes(inputs: list[TensorSpec]) -> str:
    """`float32[1, 8], int32[1]`: each input's dtype and shape."""
    return ", ".join(f"{spec.dtype}{list(spec.shape)}" for spec in inputs)


def _exit_code(records: list[BuildRecord], errors: list[str]) -> int:
    if errors:
        return EXIT_ERROR
    return EXIT_FAILED if any(record.status == "failed" for record in records) else EXIT_OK


def _tuning(tune: bool, trials: int, tuning_db: Path | None, rpc_tracker: str | None, rpc_key: str | None,
            config: Config) -> TuningOptions | None:
    if not tune:
        if rpc_tracker or rpc_key or tuning_db:
            raise click.BadParameter("needs --tune", param_hint="--tuning-db/--rpc-tracker/--rpc-key")
        return None
    if bool(rpc_tracker) != bool(rpc_key):
        raise click.BadParameter("give both or neither", param_hint="--rpc-tracker/--rpc-key")
    from tfcheck.compiler.process.messages import TuningOptions
    from tfcheck.compiler.tuning.metaschedule import default_database_root

    database = tuning_db or (Path(config.build.tuning_db) if config.build.tuning_db else default_database_root())
    return TuningOptions(trials, str(database.resolve()), rpc_tracker, rpc_key)


# A SavedModel folder's signatures to compile (repeatable), for `build` and `inspect`.
_SIGNATURE = click.option("--signature", "signatures", multiple=True, metavar="NAME",
                          help="For SavedModel folders in PATHS: compile this signature (repeatable) [default: all].")


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--target", help="cpu, cuda (with --arch) or a TVM target JSON object, for every function "
              "[default: each function's targets=, else this machine's CPU].")
@click.option("--arch", help="GPU architecture for cuda targets, e.g. sm_90.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
              help=f"Artifact cache [default: {CACHE_DIR}, or [tool.tfcheck.build] cache-dir].")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also copy the artifacts here, one folder per function (and shape), for deployment.")
@click.option("--no-lint", is_flag=True, help="Do not stop a function's build on error-level lint findings.")
@click.option("--dry-run", is_flag=True, help="Trace and report operators (and what TVM cannot import); compile nothing.")
@click.option("--tune", is_flag=True, help="Tune with MetaSchedule instead of the default schedules (CPU).")
@click.option("--trials", type=click.IntRange(min=1), default=64, show_default=True, help="Tuning trials in total.")
@click.option("--tuning-db", type=click.Path(file_okay=False, path_type=Path),
              help="Tuning database root (default: [tool.tfcheck.build] tuning-db or ~/.cache/tfcheck/tuning).")
@click.option("--rpc-tracker", metavar="HOST:PORT", help="Measure tuning candidates on devices of this RPC tracker.")
@click.option("--rpc-key", help="The device key registered with --rpc-tracker.")
@click.option("--timeout", type=click.FloatRange(min=1), default=1800, show_default=True,
              help="Seconds each tracing or compiling process may take.")
@click.option("-j", "--jobs", type=click.IntRange(min=1),
              help="Functions built at once [default: [tool.tfcheck.build] jobs, else the cores; capped by the "
              "memory available; 1 with --tune].")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_SIGNATURE
def build(paths: tuple[str, ...], target: str | None, arch: str | None, cache_dir: Path | None,
          out_dir: Path | None, no_lint: bool, dry_run: bool, tune: bool, trials: int, tuning_db: Path | None,
          rpc_tracker: str | None, rpc_key: str | None, timeout: float, jobs: int | None,
          output_format: str,
          signatures: tuple[str, ...]) -> None:
    """Compile the @tfcheck.aot functions in PATHS (files, folders or module names; default: .),
    and the signatures of SavedModel folders among PATHS (one artifact per signature).

    Each function is linted, traced and frozen, converted to TFLite, imported into TVM Relax,
    compiled, verified against TensorFlow and cached. Exit status: 0 all built, 1 a function
    failed, 2 bad arguments or unreadable files.
    """
    require("build", "build")
    from tfcheck.compiler.build.driver import BuildOptions, jobs_for
    from tfcheck.compiler.cache.artifacts import artifact_cache

    config = _load_config()
    console = _console(output_format)
    functions, errors = _find_functions(paths, config, signatures)
    cache = artifact_cache(cache_dir, config)
    targets = _choose_targets(target, arch, config, None if dry_run else cache)
    # Tuning measures candidates on this machine: builds running beside it would skew the timings.
    job_count, note = (1, None) if tune else jobs_for(jobs or config.build.jobs)
    if note and functions:
        click.echo(f"tfcheck: {note}", err=True)
    options = BuildOptions(
        targets=targets,
        cache=cache,
        out_dir=out_dir, lint=not no_lint, dry_run=dry_run, shapes=dict(config.build.shapes),
        dims={name: dict(bounds) for name, bounds in config.build.dims.items()},
        tuning=_tuning(tune, trials, tuning_db, rpc_tracker, rpc_key, config), config=config, timeout=timeout,
        jobs=min(job_count, len(functions) or 1),
    )
    _build_and_report(functions, errors, options, output_format, console)


def _build_and_report(functions: list[AnnotatedFunction], errors: list[str], options: BuildOptions, output_format: str,
                      console: Console) -> None:
    """Run the builds, print the table (or operator report, or JSON) and exit with the status."""
    for error in errors:
        click.echo(f"tfcheck: error: {error}", err=True)
    if not functions and not errors and output_format == "text":  # after an error, the error says why
        console.print("no @tfcheck.aot functions found")
    records = _run(functions, options, output_format, console)
    if output_format == "json":
        click.echo(json.dumps({"functions": [asdict(r) for r in records], "errors": errors}, indent=2))
    elif options.dry_run:
        _print_operator_report(records, console)
    else:
        _print_table(records, console)
    sys.exit(_exit_code(records, errors))


def _print_operator_report(records: list[BuildRecord], console: Console) -> None:
    """Per function: each TFLite operator, how often, whether TVM imports it, an example TF node."""
    for record in records:
        console.print(f"[bold]{record.function}[/] {_shapes(record.inputs)}", highlight=False)
        if not record.operators:
            console.print(f"  [red]✗[/] {escape(record.message or '')}", highlight=False)
            continue
        unsupported = {op.op for op in record.unsupported}
        table = Table(show_header=True, box=None, padding=(0, 2))
        for column in ("TFLite op", "count", "TVM import", "example TensorFlow node"):
            table.add_column(column)
        for op in record.operators:
            status = "[red]unsupported[/]" if op.op in unsupported else "[green]ok[/]"
            table.add_row(op.op, str(op.count), status, op.example)
        console.print(table)
    if records:
        console.print(summary_lines(records)[0], highlight=False)


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True,
              help="Seconds each tracing process may take.")
@_SIGNATURE
def inspect(paths: tuple[str, ...], output_format: str, timeout: float, signatures: tuple[str, ...]) -> None:
    """Trace the @tfcheck.aot functions (and SavedModel signatures) in PATHS and report their
    operators, marking those that TVM's TFLite importer cannot import (the same as
    `tfcheck build --dry-run --no-lint`)."""
    require("inspect", "build")
    from tfcheck.compiler.build.driver import BuildOptions
    from tfcheck.compiler.build.targets import TargetChoice
    from tfcheck.compiler.cache.artifacts import artifact_cache
    from tfcheck.compiler.process.target import BuildTarget

    config = _load_config()
    console = _console(output_format)
    functions, errors = _find_functions(paths, config, signatures)
    # A dry run traces once and compiles nothing: the target names only the table's column.
    options = BuildOptions(targets=TargetChoice(BuildTarget.of({"kind": "llvm"}), named=True),
                           cache=artifact_cache(None, config), lint=False, dry_run=True,
                           shapes=dict(config.build.shapes), config=config, timeout=timeout)
    _build_and_report(functions, errors, options, output_format, console)
