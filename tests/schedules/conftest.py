"""Fixtures of the schedule tests."""

from __future__ import annotations

import pytest

from tfcheck.compiler.schedules.rewrites import winograd


@pytest.fixture
def direct_convolutions(monkeypatch: pytest.MonkeyPatch) -> None:
    """3x3 stride-1 convolutions left direct, for the tests of the direct convolution's tile: the one
    that strided, dilated and small ones still get, and that Winograd's form would otherwise replace."""
    monkeypatch.setattr(winograd, "choose_transform", lambda *_: None)
