"""Shared test helpers: write a small project to a temp folder and run the real CLI on it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner, Result

from tfcheck.cli import main

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path: Path) -> Callable[..., Path]:
    """`project({"pkg/a.py": "code"}, config="...")` writes files (dedented) and returns the folder."""

    def write(files: dict[str, str], config: str | None = None) -> Path:
        for name, text in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        if config is not None:
            (tmp_path / "pyproject.toml").write_text(textwrap.dedent(config), encoding="utf-8")
        return tmp_path

    return write


def _runner() -> CliRunner:
    """A runner that keeps stderr apart from stdout (click < 8.2 needs mix_stderr=False for that)."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """Run `tfcheck ARGS` in a folder, in-process, capturing output."""

    def run(folder: Path, *args: str) -> Result:
        monkeypatch.chdir(folder)
        return _runner().invoke(main, list(args), catch_exceptions=False)

    return run


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built once per session as `pip wheel` builds it for users."""
    folder = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder), str(REPO)], check=True)
    [built] = folder.glob("tfcheck-*.whl")
    return built


def fresh_venv(folder: Path, requirement: str) -> Path:
    """A new virtual environment holding only `requirement` and what it depends on, resolved by pip
    from the package index as a user's `pip install` would; returns its bin/ folder.

    Made without pip of its own (`--without-pip`, ~0.1 s instead of ~3 s): this interpreter's pip
    installs into it with `--python`.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(folder / "bin" / "python"), "install", "-q",
                    requirement], check=True, env=clean_env())
    return folder / "bin"


def clean_env() -> dict[str, str]:
    """This environment without what would let another environment see this one's packages."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def load_benchmark(name: str) -> ModuleType:
    """Import `benchmarks/<name>.py` (not a package) for the tests that share its generated code."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def hiding_modules(names: Iterable[str]) -> str:
    """Python code that makes the top-level packages `names` (and their submodules) absent from the
    process that runs it, as in an install without them: `import` raises ModuleNotFoundError and
    `importlib.util.find_spec` answers None. Run it first, in a fresh interpreter."""
    return textwrap.dedent(f"""
        import importlib.machinery, sys
        _HIDDEN = {sorted(names)!r}
        assert not [name for name in sys.modules if name.partition('.')[0] in _HIDDEN]
        class _Hide(importlib.machinery.PathFinder):
            @classmethod
            def find_spec(cls, name, path=None, target=None):
                if name.partition('.')[0] in _HIDDEN:
                    return None
                return super().find_spec(name, path, target)
        sys.meta_path[:] = [_Hide if finder is importlib.machinery.PathFinder else finder for finder in sys.meta_path]
    """)
