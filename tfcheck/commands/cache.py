"""`tfcheck ls` and `tfcheck clean`: look at and empty the artifact cache."""

from __future__ import annotations

import contextlib
import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tfcheck.runtime.bundled import RUNTIME_DIR, RUNTIME_TAG
from tfcheck.gitignore import remove_marker
from tfcheck.runtime.manifest import CACHE_DIR, MANIFEST
from tfcheck.runtime.paths import remove_tree

if TYPE_CHECKING:
    from tfcheck.compiler.cache.artifacts import ArtifactCache

cache_dir_option = click.option(
    "--cache-dir", type=click.Path(file_okay=False, path_type=Path),
    help=f"The artifact cache (or a `tfcheck build --out` folder) [default: "
         f"[tool.tfcheck.build] cache-dir, else {CACHE_DIR}].")


def _config() -> Any:
    """The project's configuration, for the same cache locations as `tfcheck build` and `check`."""
    from tfcheck.config import ConfigError, load_config

    try:
        return load_config(Path.cwd())
    except ConfigError as error:
        raise click.ClickException(str(error)) from None


@click.command(name="ls")
@cache_dir_option
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def ls(cache_dir: Path | None, output_format: str) -> None:
    """List the compiled artifacts: function, target, input shapes, size and age."""
    from tfcheck.compiler.cache.artifacts import artifact_cache

    cache = artifact_cache(cache_dir, _config())
    rows = sorted((_describe(folder) for folder in cache.artifact_folders()),
                  key=lambda row: (row["function"], row["age_seconds"]))
    if output_format == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no artifacts in {cache.root}")
        return
    header = ("FUNCTION", "TARGET", "SHAPES", "SIZE", "AGE", "KEY")
    table = [header] + [(r["function"], r["target"], r["shapes"], _human_size(r["size_bytes"]),
                         _human_age(r["age_seconds"]), r["folder"]) for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        click.echo("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())


@click.command()
@cache_dir_option
@click.option("--lint-cache/--no-lint-cache", default=False, show_default=True,
              help="Also delete the linter's cache ([tool.tfcheck] cache-dir, default .tfcheck_cache/).")
def clean(cache_dir: Path | None, lint_cache: bool) -> None:
    """Delete every artifact in the artifact cache (and its index.json and .fastkeys/), and in a
    `tfcheck build --out` folder the TVM runtime bundled for them (tvm-runtime/) once no artifact
    is left. The linter's cache (.tfcheck_cache/) is kept unless --lint-cache is given. Only folders
    holding a manifest.json, and runtime folders named as the build names them, are deleted, so a
    mistyped --cache-dir cannot remove unrelated files; an entry that is a symbolic link loses the
    link, never what it points to."""
    from tfcheck.compiler.cache.artifacts import artifact_cache

    config = _config()
    cache = artifact_cache(cache_dir, config)
    removed = cache.clear()
    runtimes = _remove_bundled_runtime(cache)
    click.echo(f"removed {removed} artifact(s) from {cache.root}"
               + (f" and the TVM runtime bundled for them ({RUNTIME_DIR}{os.sep})" if runtimes else ""))
    lint_dir = Path(config.cache_dir)
    if lint_cache and lint_dir.is_dir():
        _remove_lint_cache(lint_dir)
        click.echo(f"removed {lint_dir}/")


def _remove_lint_cache(lint_dir: Path) -> None:
    """Delete what the linter's cache writes (`lint/` and its own `.gitignore`), then the folder
    if that emptied it: `cache-dir` comes from the configuration, and `cache-dir = "."` must not
    delete the project (or its `.gitignore`)."""
    from tfcheck.cache import SUBFOLDER, WHAT

    remove_tree(lint_dir / SUBFOLDER)
    remove_marker(lint_dir, WHAT)
    with contextlib.suppress(OSError):
        lint_dir.rmdir()


def _remove_bundled_runtime(cache: ArtifactCache) -> bool:
    """Delete `<folder>/tvm-runtime/<tag>/`, the runtime libraries `build --out` copied for the
    artifacts of the folder, when no artifact is left to load them; whether anything was deleted.

    Only folders named as runtime tags are deleted, then `tvm-runtime/` if that emptied it; a
    `tvm-runtime` that is a symbolic link loses the link, and is never walked into (what it points
    to lies outside the folder)."""
    runtime_dir = cache.root / RUNTIME_DIR
    if cache.artifact_folders() or not os.path.lexists(runtime_dir):
        return False
    if runtime_dir.is_symlink():
        runtime_dir.unlink()
        return True
    if not runtime_dir.is_dir():
        return False
    tags = [child for child in runtime_dir.iterdir() if RUNTIME_TAG.fullmatch(child.name)]
    for tag in tags:
        remove_tree(tag)
    with contextlib.suppress(OSError):
        runtime_dir.rmdir()
    return bool(tags)


def _describe(folder: Path) -> dict[str, Any]:
    """One row of `ls`; an unreadable manifest still gets a row, so it can be seen and cleaned."""
    size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
    try:
        raw = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raw = {"function": f"(unreadable manifest: {error})"}
    return {
        "folder": folder.name,
        "function": raw.get("qualname") or raw.get("function", "?"),
        "target": _target(raw),
        "shapes": ", ".join(str(tuple(spec.get("shape", []))) for spec in raw.get("inputs", [])),
        "size_bytes": size,
        "age_seconds": _age(raw.get("created"), folder),
        "tuned": raw.get("tuned"),
    }


def _target(raw: dict[str, Any]) -> str:
    target = raw.get("target") or {}
    if target.get("kind") == "cuda":
        return f"cuda:{target.get('arch', '?')}"
    return f"{target.get('kind', '?')}:{target.get('mcpu', 'generic')}"


def _age(created: Any, folder: Path) -> float:
    """Seconds since `created` (ISO 8601), or since the folder changed when that is missing."""
    try:
        stamp = datetime.fromisoformat(str(created).replace("Z", "+00:00")).timestamp()
    except ValueError:
        stamp = folder.stat().st_mtime
    return max(0.0, time.time() - stamp)


def _human_size(size: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _human_age(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f}{unit}"
    return f"{seconds:.0f}s"
