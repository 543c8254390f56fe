"""Real TensorFlow code nobody on tfcheck wrote, at pinned versions: the corpus of docs/precision.md.

    .venv/bin/python benchmarks/real_code.py fetch --dest /tmp/tfcheck-corpus
    .venv/bin/python benchmarks/real_code.py count /tmp/tfcheck-corpus      # the corpus table, markdown

`fetch` downloads the wheels of PACKAGES (`pip download --no-deps --only-binary=:all:`, so nothing is
built or run) and unpacks their Python files into DEST/<package>, and copies the Python files of the
installed TensorFlow and Keras (`tensorflow/python`, `keras/src`, found on this interpreter's path,
never imported) into DEST/tensorflow_python and DEST/keras_src. Only `.py` files are kept: the
corpus is read by the linter, never installed. tensorflow-addons' wheel is platform-specific (its
Python files are the same on every platform); the others are pure Python. Never commit the corpus.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lint_bench import SOURCES, copy_corpus, count_lines  # noqa: E402 - a sibling script, not a package

# Pinned 2026-11-23: the newest release of each on PyPI, except sionna (0.19.2, its last TensorFlow
# release; 1.x split it, 2.x is PyTorch).
PACKAGES = {
    "tf-models-official": "2.20.0",
    "tensorflow-probability": "0.25.0",
    "tf-agents": "0.19.0",
    "keras-hub": "0.32.0",
    "OpenNMT-tf": "2.32.0",
    "sionna": "0.19.2",
    "tensorflow-addons": "0.23.0",
    "tensorflow-recommenders": "0.7.7",
    "dm-sonnet": "2.0.2",
    "tensorflow-gan": "2.1.0",
    "tensorflow-similarity": "0.17.1",
    "spektral": "1.3.1",
}


def folder_name(package: str) -> str:
    """A package's folder in the corpus: its wheel's distribution name (`tf-agents` -> `tf_agents`)."""
    return package.replace("-", "_")


def fetch(destination: Path) -> None:
    """Download the pinned wheels and unpack their Python files; copy the installed TF and Keras sources."""
    destination.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tfcheck-wheels-") as folder:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                        "--dest", folder, *(f"{name}=={version}" for name, version in PACKAGES.items())],
                       check=True)
        for name in PACKAGES:
            wheel = _wheel_of(Path(folder), name)
            target = destination / folder_name(name)
            shutil.rmtree(target, ignore_errors=True)
            _unpack_python(wheel, target)
    for source in SOURCES:
        shutil.rmtree(destination / f"{source.parent.name}_{source.name}", ignore_errors=True)
    copy_corpus(SOURCES, destination)


def _wheel_of(folder: Path, package: str) -> Path:
    """The one wheel `pip download` wrote for `package` (wheel names normalise case and dashes)."""
    prefix = f"{folder_name(package).lower()}-{PACKAGES[package]}-"
    wheels = [path for path in folder.glob("*.whl") if path.name.lower().startswith(prefix)]
    if len(wheels) != 1:
        raise SystemExit(f"expected one wheel of {package}=={PACKAGES[package]} in {folder}, found {wheels}")
    return wheels[0]


def _unpack_python(wheel: Path, target: Path) -> None:
    """Extract the `.py` members of a wheel, refusing members that would land outside `target`."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if not member.endswith(".py"):
                continue
            path = (target / member).resolve()
            if not path.is_relative_to(target.resolve()):
                raise SystemExit(f"{wheel.name}: member {member!r} points outside the corpus folder")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(archive.read(member))


def parts(destination: Path) -> list[tuple[str, str, Path]]:
    """(name, version, folder) of every part of the corpus, in table order."""
    installed = [(f"`{source.parent.name}/{source.name}` (installed)", _installed_version(source.parent.name),
                  destination / f"{source.parent.name}_{source.name}") for source in SOURCES]
    return installed + [(name, version, destination / folder_name(name)) for name, version in PACKAGES.items()]


def _installed_version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    for distribution in (package, f"{package}-cpu"):
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return "?"


def count(destination: Path) -> str:
    """The corpus table: files and lines of Python per part, and the total."""
    rows = ["| part | version | files | lines of Python |", "|---|---|---:|---:|"]
    total_files = total_lines = 0
    for name, version, folder in parts(destination):
        if not folder.is_dir():
            raise SystemExit(f"{folder} is missing: run `fetch --dest {destination}` first")
        files = sorted(folder.rglob("*.py"))
        lines = count_lines(files)
        total_files, total_lines = total_files + len(files), total_lines + lines
        rows.append(f"| {name} | {version} | {len(files):,} | {lines:,} |")
    rows.append(f"| **total** | | **{total_files:,}** | **{total_lines:,}** |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="download and unpack the pinned corpus").add_argument(
        "--dest", type=Path, required=True, help="folder to unpack into (created; parts in it are replaced)")
    commands.add_parser("count", help="print the corpus table").add_argument("dest", type=Path)
    args = parser.parse_args()
    if args.command == "fetch":
        fetch(args.dest)
    print(count(args.dest))


if __name__ == "__main__":
    main()
