"""The Textual app and its factory. The CLI, the tests and the benchmark all build it here."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime

from textual.app import App
from textual.binding import Binding
from textual.reactive import reactive

from .model import ClusterModel
from .screens import HelpScreen, MainScreen
from .source import Change, ClusterSource

__all__ = ["LoadwiseApp", "make_app"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class LoadwiseApp(App[None]):
    """Owns the model; drains the source's changes on a timer and bumps `revision`.

    Sources call the sink from worker threads. Appending to a deque is thread-safe, and
    draining it in batches on the UI thread means a burst of 10,000 watch events costs one
    redraw, not 10,000.
    """

    CSS_PATH = "app.tcss"
    TITLE = "loadwise"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
    ]

    revision: reactive[int] = reactive(0, init=False)
    """Bumped after each drain that changed the model, and once per tick for ages."""

    def __init__(
        self,
        source: ClusterSource,
        *,
        clock: Callable[[], datetime] = _utcnow,
        refresh_seconds: float = 15.0,
        tick_seconds: float = 1.0,
        feed_limit: int = 200,
    ) -> None:
        super().__init__()
        self.source = source
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self.tick_seconds = tick_seconds
        self.feed_limit = feed_limit
        self.model = ClusterModel()
        self._inbox: deque[Change] = deque()

    def on_mount(self) -> None:
        self.source.start(self._inbox.append)
        self.drain()
        self.push_screen(MainScreen())
        self.set_interval(self.tick_seconds, self._tick)

    def on_unmount(self) -> None:
        self.source.stop()

    def drain(self) -> int:
        """Apply every queued change to the model; returns how many were applied."""
        applied = 0
        inbox = self._inbox
        while inbox:
            self.model.apply(inbox.popleft())
            applied += 1
        return applied

    def _tick(self) -> None:
        self.drain()
        self.revision += 1

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())


def make_app(
    source: ClusterSource,
    *,
    clock: Callable[[], datetime] | None = None,
    refresh_seconds: float = 15.0,
    tick_seconds: float = 1.0,
) -> LoadwiseApp:
    """Build a configured app around any `ClusterSource` (real, recorded or synthetic)."""
    return LoadwiseApp(
        source,
        clock=clock or _utcnow,
        refresh_seconds=refresh_seconds,
        tick_seconds=tick_seconds,
    )
