"""What a command needs beyond the linter's install, checked when it runs, never for `--help`.

`build`, `inspect` and `bench` need the build extra, `run` the runtime extra; their modules import
no extra at module level, so a linter-only install (`pip install tfcheck`) can read every
command's options before installing anything (docs/cli.md).

The build extra does not install TensorFlow, as TensorFlow Probability does not: a training
environment already has its flavour (`tensorflow`, `tensorflow-cpu`, ...) and version, and a second
flavour installed beside it overwrites its files. So the build checks, from the installed
distributions' metadata (TensorFlow is never imported here), that one TensorFlow within
TENSORFLOW_RANGE is installed, and says what to install when it is not.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Mapping

import click

EXIT_ERROR = 2

# The import names each extra of pyproject.toml provides, checked (not imported). Import names,
# not distributions.
EXTRAS: dict[str, tuple[str, ...]] = {
    "runtime": ("numpy",),
    "build": ("numpy", "tvm_ffi", "tvm", "tflite"),
}

# 2.16 is the first TensorFlow whose `keras` is Keras 3, which the build seeds and whose models the
# docs describe; 2.21 is the newest the build is tested with (the Makefile and CI install it).
OLDEST_TENSORFLOW = (2, 16)
NEWEST_TENSORFLOW = (2, 21)
TENSORFLOW_RANGE = (f">={OLDEST_TENSORFLOW[0]}.{OLDEST_TENSORFLOW[1]},"
                    f"<{NEWEST_TENSORFLOW[0]}.{NEWEST_TENSORFLOW[1] + 1}")
# The distributions that provide the `tensorflow` module; a platform's `tensorflow` may pull in one
# of the others at the same version (tensorflow-intel on Windows).
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
                            "tensorflow-macos", "tensorflow-aarch64", "tf-nightly", "tf-nightly-cpu")
INSTALL_TENSORFLOW = f"pip install 'tensorflow{TENSORFLOW_RANGE}' (or tensorflow-cpu)"


def require(command: str, extra: str) -> None:
    """Exit 2 with what to install when `command` cannot run here for want of `extra` (or, for the
    build extra, of a TensorFlow in range)."""
    problem = requirement_problem(extra)
    if problem is not None:
        click.echo(f"tfcheck: error: tfcheck {command} {problem}", err=True)
        sys.exit(EXIT_ERROR)


def requirement_problem(extra: str) -> str | None:
    """What `extra` lacks here, as the end of a sentence starting `tfcheck build`, or None."""
    missing = missing_extra(extra)
    if missing:
        return f"needs the {extra} extra: pip install 'tfcheck[{extra}]' (missing: {', '.join(missing)})"
    if extra == "build":
        return tensorflow_problem(installed_tensorflow(), importlib.util.find_spec("tensorflow") is not None)
    return None


def missing_extra(extra: str) -> list[str]:
    """The modules of `extra` that cannot be imported here; found without importing them."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def installed_tensorflow() -> dict[str, str]:
    """The TensorFlow distributions installed here and their versions, from their metadata."""
    import importlib.metadata  # 15-60 ms: only when a build command runs

    found = {}
    for name in TENSORFLOW_DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def tensorflow_problem(installed: Mapping[str, str], importable: bool) -> str | None:
    """Why the installed TensorFlow cannot serve the build, with what to install, or None.

    A `tensorflow` module that no known distribution provides (built from source, conda) cannot be
    checked without importing it, and is taken as it is."""
    if not installed:
        if importable:
            return None
        return f"needs TensorFlow, which the build extra leaves to your environment: {INSTALL_TENSORFLOW}"
    described = ", ".join(f"{name} {version}" for name, version in installed.items())
    if len(set(installed.values())) > 1:
        return (f"needs one TensorFlow, and {described} are installed side by side, overwriting each "
                f"other's files: uninstall them all, then {INSTALL_TENSORFLOW}")
    name, version = next(iter(installed.items()))
    release = _release(version)
    if release is None or not OLDEST_TENSORFLOW <= release <= NEWEST_TENSORFLOW:
        wanted = "tensorflow" if name.startswith("tf-nightly") else name
        return (f"needs TensorFlow {TENSORFLOW_RANGE}, and this environment has {described}: "
                f"pip install '{wanted}{TENSORFLOW_RANGE}'")
    return None


def _release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version string such as 2.21.0 or 2.22.0.dev20260101."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else None
