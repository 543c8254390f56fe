"""`tfcheck bench`: median latency of compiled functions against eager, tf.function, XLA and TFLite.

Given artifacts (an `--out` folder, the cache, or one artifact), it measures them; given source
files or modules, it first builds them with `tfcheck build` (default schedules, and tuned ones
with `--tune`) in a child process. Every backend is measured in its own child process
(`compiler/bench/latency.py`): this process imports neither TensorFlow nor TVM. With `--profile`
it times the artifacts' kernels instead, one artifact a child (`compiler/bench/profile.py`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

from tfcheck.output.terminal import table_console
from tfcheck.requirements import require
from tfcheck.runtime.manifest import MANIFEST

if TYPE_CHECKING:
    from tfcheck.compiler.bench.latency import FunctionBench, Measurement
    from tfcheck.compiler.bench.profile import FunctionProfile
    from tfcheck.compiler.process.messages import Budget
    from tfcheck.runtime.manifest import Manifest

BACKENDS = ("eager", "tf.function", "xla", "tflite", "tvm")


@click.command()
@click.argument("sources", nargs=-1, required=True)
@click.option("--backends", default=",".join(BACKENDS), show_default=True,
              help="Comma-separated subset to measure (tvm covers default and tuned artifacts).")
@click.option("--tune", is_flag=True, help="When building from source, also build tuned artifacts.")
@click.option("--trials", type=click.IntRange(min=1), default=64, show_default=True,
              help="Tuning trials per function with --tune.")
@click.option("--tuning-db", type=click.Path(file_okay=False, path_type=Path),
              help="Root of the tuning databases (default: ~/.cache/tfcheck/tuning).")
@click.option("--seconds", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="At most this long measuring each backend (after warm-up).")
@click.option("--min-runs", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), help="Write a bar chart (PNG) here.")
@click.option("--format", "output_format", type=click.Choice(["text", "json", "markdown"]), default="text",
              show_default=True, help="markdown: the table for docs/benchmarks.md.")
@click.option("--timeout", type=click.FloatRange(min=1), default=1800, show_default=True,
              help="Seconds allowed for one backend of one function (setup included).")
@click.option("--profile", is_flag=True,
              help="Instead of comparing backends, time each kernel of the artifacts: its share of an inference, "
                   "its schedule rule and GFLOP/s.")
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True,
              help="With --profile: the slowest kernels shown in text and markdown (json has all).")
def bench(sources: tuple[str, ...], backends: str, tune: bool, trials: int, tuning_db: Path | None,
          seconds: float, min_runs: int, plot: Path | None, output_format: str, timeout: float, profile: bool,
          top: int) -> None:
    """Compare compiled artifacts with every way TensorFlow runs the same function."""
    require("bench", "build")
    from tfcheck.compiler.bench.latency import bench_function, find_artifacts, group_by_function
    from tfcheck.compiler.process.messages import Budget

    chosen = _backends(backends)
    console = table_console(stderr=output_format != "text")
    with tempfile.TemporaryDirectory(prefix="tfcheck-bench-build-") as built:
        manifests = _collect(sources, Path(built), tune, trials, tuning_db, console, find_artifacts)
        groups = group_by_function(manifests)
        if not groups:
            raise click.ClickException(f"no CPU artifacts found or built from {' '.join(sources)}")
        budget = Budget(min_runs=min_runs, max_seconds=seconds)
        if profile:
            _profile(groups, budget, timeout, output_format, top, console)
            return
        results = []
        for group in groups:
            label = group[0].qualname
            with console.status(label) as status:
                results.append(bench_function(group, chosen, budget,
                                              lambda stage, s=status, n=label: s.update(f"{n}: {stage}"), timeout))
    if output_format == "json":
        click.echo(json.dumps([r.to_json() for r in results], indent=2))
    elif output_format == "markdown":
        click.echo(_markdown(results))
    else:
        _print_table(results, console)
    if plot is not None:
        _plot(results, plot)
        console.print(f"chart written to {plot}")


def _profile(groups: list[list[Manifest]], budget: Budget, timeout: float, output_format: str, top: int,
             console: Console) -> None:
    """`--profile`: the kernel table of every artifact, in the chosen format."""
    from tfcheck.compiler.bench.latency import timed_inputs
    from tfcheck.compiler.bench.profile import markdown, profile_artifacts

    profiles = []
    for group in groups:
        with console.status(f"{group[0].qualname}: profiling"):
            profiles += profile_artifacts(group, timed_inputs(group[0]), budget, timeout)
    if output_format == "json":
        click.echo(json.dumps([p.to_json() for p in profiles], indent=2))
    elif output_format == "markdown":
        click.echo("\n\n".join(markdown(p, top) for p in profiles))
    else:
        for found in profiles:
            _print_profile(found, top, console)


def _print_profile(profile: FunctionProfile, top: int, console: Console) -> None:
    """One artifact's kernels, slowest first, under the line that sums them up."""
    from tfcheck.compiler.bench.profile import COLUMNS, summary, table_rows

    if profile.error:
        console.print(f"[red]✗[/] {profile.function} ({profile.backend}): {profile.error}", highlight=False)
        return
    table = Table(title=summary(profile), title_justify="left")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("kernel", "rule", "buffers") else "right")
    for row in table_rows(profile, top):
        table.add_row(*row)
    console.print(table)
    if len(profile.kernels) > top:
        console.print(f"({len(profile.kernels) - top} more kernels: --top, or --format json for all)", highlight=False)


def _backends(text: str) -> tuple[str, ...]:
    chosen = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in chosen if name not in BACKENDS]
    if unknown or not chosen:
        raise click.BadParameter(f"unknown {', '.join(unknown) or 'empty list'}; choose from {', '.join(BACKENDS)}",
                                 param_hint="--backends")
    return chosen


def _collect(sources: tuple[str, ...], built: Path, tune: bool, trials: int, tuning_db: Path | None,
             console: Console, find_artifacts: Callable[[Path], list[Manifest]]) -> list[Manifest]:
    """Artifacts named on the command line, plus those built from the source arguments."""
    manifests: list[Manifest] = []
    to_build = []
    for source in sources:
        path = Path(source)
        if path.is_dir() and (any(path.glob(f"*/{MANIFEST}")) or (path / MANIFEST).is_file()):
            manifests += find_artifacts(path)
        else:
            to_build.append(source)
    if to_build:
        variants = [("default", [])] + ([("tuned", _tune_args(trials, tuning_db))] if tune else [])
        for name, extra in variants:
            _build(to_build, built / name, extra, console)
            if (built / name).is_dir():  # nothing built (every source failed): no folder to read
                manifests += find_artifacts(built / name)
    return manifests


def _tune_args(trials: int, tuning_db: Path | None) -> list[str]:
    return ["--tune", "--trials", str(trials)] + (["--tuning-db", str(tuning_db)] if tuning_db else [])


def _build(sources: list[str], out: Path, extra: list[str], console: Console) -> None:
    """`tfcheck build SOURCES --out OUT` in a child; failed functions are reported, not fatal."""
    command = [sys.executable, "-m", "tfcheck", "build", *sources, "--out", str(out), "--format", "json", *extra]
    console.print(f"[dim]$ tfcheck build {' '.join(sources)} --out {out} {' '.join(extra)}[/]", highlight=False)
    completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    try:
        records = json.loads(completed.stdout)
    except json.JSONDecodeError:
        raise click.ClickException(f"tfcheck build failed:\n{completed.stderr[-3000:]}") from None
    for error in records["errors"]:
        console.print(f"[red]✗[/] build: {error}", highlight=False)
    for record in records["functions"]:
        if record["status"] == "failed":
            console.print(f"[red]✗[/] build: {record['message']}", highlight=False)


def _markdown(results: list[FunctionBench]) -> str:
    """The same table as text, as Markdown (median ms, and the ratio to tf.function)."""
    names = list(dict.fromkeys(m.backend for r in results for m in r.measurements))
    lines = ["| function | inputs | " + " | ".join(names) + " |", "|---|---|" + "---:|" * len(names)]
    for result in results:
        by_name = {m.backend: m for m in result.measurements}
        shapes = _shapes(result)
        cells = [_plain_cell(by_name[n]) if n in by_name else "-" for n in names]
        lines.append(f"| {result.function} | {shapes} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _shapes(result: FunctionBench) -> str:
    """`float32[1, 224, 224, 3]`, for each input the backends were timed on."""
    return ", ".join(f"{spec.dtype}{list(spec.shape)}" for spec in result.inputs)


def _plain_cell(measurement: Measurement) -> str:
    if measurement.error:
        return "failed"
    ratio = f" ({measurement.ratio:.2f}x)" if measurement.ratio is not None else ""
    return f"{measurement.median_ms:.3g} ms{ratio}"


def _print_table(results: list[FunctionBench], console: Console) -> None:
    """Rows are functions, columns backends: median latency and ratio to tf.function."""
    names = list(dict.fromkeys(m.backend for r in results for m in r.measurements))
    table = Table(title="tfcheck bench: median latency (ratio to tf.function; < 1 is faster)")
    table.add_column("function")
    table.add_column("inputs")
    for name in names:
        table.add_column(name, justify="right")
    for result in results:
        by_name = {m.backend: m for m in result.measurements}
        shapes = _shapes(result)
        table.add_row(result.function, shapes, *(_plain_cell(by_name[n]) if n in by_name else "-" for n in names))
    console.print(table)
    for result in results:
        for m in result.measurements:
            if m.error:
                console.print(f"[red]✗[/] {result.function} {m.backend}: {m.error}", highlight=False)
            elif m.max_rel_diff is not None and m.max_rel_diff > 1e-2:
                console.print(f"[yellow]![/] {result.function} {m.backend}: outputs differ from tf.function "
                              f"by up to {m.max_abs_diff:.2g}, {m.max_rel_diff:.2g} of their scale", highlight=False)


def _plot(results: list[FunctionBench], path: Path) -> None:
    """Grouped bars: one group per function, one bar per backend, latency on a log scale."""
    try:
        import matplotlib
    except ImportError:
        raise click.ClickException("--plot needs matplotlib: pip install 'tfcheck[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(m.backend for r in results for m in r.measurements))
    width = 0.8 / max(len(names), 1)
    figure, axes = plt.subplots(figsize=(max(6.0, 1.6 * len(results) + 2), 4.5))
    for offset, name in enumerate(names):
        heights = [next((m.median_ms or 0 for m in r.measurements if m.backend == name), 0) for r in results]
        positions = [i + (offset - (len(names) - 1) / 2) * width for i in range(len(results))]
        axes.bar(positions, heights, width, label=name)
    axes.set_xticks(range(len(results)), [r.function.rsplit(".", 1)[-1] for r in results])
    axes.set_yscale("log")
    axes.set_ylabel("median latency (ms, log scale)")
    axes.legend(fontsize="small", ncols=min(len(names), 3))
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
