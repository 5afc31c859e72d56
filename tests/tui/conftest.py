"""Fixtures for the TUI tests: a fixed clock, the recorded cluster, and an app factory."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tui.app import LoadwiseApp, make_app
from tui.sources.recorded import RecordedCluster, RecordedSource

DATA = Path(__file__).parent / "data"
NOW = datetime(2026, 5, 4, 10, 30, 0, tzinfo=UTC)
SIZE = (140, 36)


@pytest.fixture
def recorded() -> RecordedCluster:
    return RecordedCluster.from_dir(DATA / "cluster")


@pytest.fixture
def build_app(recorded: RecordedCluster) -> Callable[..., LoadwiseApp]:
    """Build the app on the recorded cluster at a fixed time.

    The clock is frozen so ages ("18s") and "metrics 10:29:54" render identically on
    every run; that is what makes the snapshots stable.
    """

    def build(**source_options: Any) -> LoadwiseApp:
        source = RecordedSource(recorded, now=lambda: NOW, **source_options)
        return make_app(source, clock=lambda: NOW, refresh_seconds=15)

    return build


@pytest.fixture(autouse=True)
def _utc_local_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Times shown as local wall clock must not depend on the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    import time

    time.tzset()
