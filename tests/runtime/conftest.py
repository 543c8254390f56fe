"""Fixtures for the runtime tests: artifacts compiled once per session (see runtime_artifacts)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from runtime_artifacts import build_artifact


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, tuple[int, ...]], Path]:
    """`compiled(kind, shape)`: a pristine artifact folder, compiled once per test session."""
    cache: dict[tuple[str, tuple[int, ...]], Path] = {}
    root = tmp_path_factory.mktemp("compiled")

    def build(kind: str, shape: tuple[int, ...]) -> Path:
        if (kind, shape) not in cache:
            name = f"{kind}__{'x'.join(map(str, shape))}"
            cache[(kind, shape)] = build_artifact(root / name, kind, shape)
        return cache[(kind, shape)]

    return build


@pytest.fixture
def artifacts(tmp_path: Path, compiled: Callable[[str, tuple[int, ...]], Path]
              ) -> Callable[..., Path]:
    """`artifacts(("scale", (1, 4)), ...)`: a fresh `--out`-style folder holding copies of those
    artifacts, which a test may modify."""

    def make(*wanted: tuple[str, tuple[int, ...]]) -> Path:
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        for kind, shape in wanted:
            source = compiled(kind, shape)
            shutil.copytree(source, out / source.name)
        return out

    return make
