"""Fixtures for the TUI tests: a fixed clock, the recorded cluster, and an app factory."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from loadwise.tui.app import LoadwiseApp, make_app
from loadwise.tui.sources.recorded import RecordedCluster, RecordedSource

DATA = Path(__file__).parent / "data"
NOW = datetime(2026, 5, 4, 10, 30, 0, tzinfo=UTC)
SIZE = (140, 36)

UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""What no string from the cluster may hold once it is in the model, written out here apart
from `tui.untrusted`: C0 controls but tab and newline, DEL, C1 controls, the Unicode
Bidi_Control characters (PropList.txt) and lone surrogates."""

HOSTILE_TEXT = st.text(
    st.one_of(
        # Any code point, surrogates included: a JSON `\ud800` escape decodes to one.
        st.integers(min_value=0, max_value=0x10FFFF).map(chr),
        st.sampled_from(["\x1b", "\x07", "\x9b", "\x9d", "\r", "\t", "\n", "\u202e", "\ud800"]),
        st.sampled_from(["[", "]", "/", "^"]),
    ),
    min_size=1,
)
"""Text as a hostile writer builds it, with escape sequences and markup drawn often."""


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
