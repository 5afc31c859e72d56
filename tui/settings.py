"""What the screens are configured with: the app builds these once and hands them down."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Clock", "Settings"]

Clock = Callable[[], datetime]
"""Returns "now" as an aware datetime; tests pass a frozen one so ages render the same."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The dashboard's knobs, fixed for the life of the app."""

    refresh_seconds: float = 15.0
    """metrics.k8s.io poll interval; usage older than max(3 × this, 45 s) is shown STALE."""
    tick_seconds: float = 1.0
    """How often queued changes are applied and ages ("18s") re-rendered."""
    feed_limit: int = 200
    """Rows in the placements feed (newest first)."""
