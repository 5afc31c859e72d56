"""The Textual app and its factory. The CLI, the tests and the benchmark all build it here."""

from __future__ import annotations

from collections import deque
from datetime import datetime, timezone

from textual import on
from textual.app import App
from textual.binding import Binding
from textual.reactive import reactive

from .messages import ModelChanged, NodeRequested
from .model import ClusterModel
from .screens import HelpScreen, MainScreen, NodeDetailScreen
from .settings import Clock, Settings
from .sources import ClusterSource
from .sources import changes as ch

__all__ = ["LoadwiseApp", "make_app"]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class LoadwiseApp(App[None]):
    """Owns the model; drains the source's changes on a timer and bumps `revision`.

    Sources call the sink from worker threads. Appending to a deque is thread-safe, and
    draining it in batches on the UI thread means a burst of 10,000 watch events costs one
    redraw, not 10,000. Screens get the model, clock and settings when they are built and
    hear about changes through `ModelChanged`; none of them imports this module.
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
        self, source: ClusterSource, *, clock: Clock = _utcnow, settings: Settings | None = None
    ) -> None:
        super().__init__()
        self.source = source
        self.clock = clock
        self.settings = settings or Settings()
        self.model = ClusterModel()
        self._inbox: deque[ch.Change] = deque()

    def on_mount(self) -> None:
        self.source.start(self._inbox.append)
        self.drain()
        self.push_screen(
            MainScreen(
                self.model,
                clock=self.clock,
                settings=self.settings,
                description=self.source.description,
            )
        )
        self.set_interval(self.settings.tick_seconds, self._tick)

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

    def watch_revision(self, revision: int) -> None:
        # Every screen on the stack, not only the top one: the main screen under a node's
        # detail is then already current when the user goes back to it.
        for screen in self.screen_stack:
            screen.post_message(ModelChanged(revision))

    @on(NodeRequested)
    def _open_node(self, message: NodeRequested) -> None:
        self.push_screen(
            NodeDetailScreen(
                message.name,
                self.model,
                clock=self.clock,
                settings=self.settings,
                description=self.source.description,
            )
        )

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(app_bindings=self.BINDINGS))


def make_app(
    source: ClusterSource,
    *,
    clock: Clock | None = None,
    refresh_seconds: float = 15.0,
    tick_seconds: float = 1.0,
    feed_limit: int = 200,
) -> LoadwiseApp:
    """Build a configured app around any `ClusterSource` (real, recorded or synthetic)."""
    return LoadwiseApp(
        source,
        clock=clock or _utcnow,
        settings=Settings(
            refresh_seconds=refresh_seconds, tick_seconds=tick_seconds, feed_limit=feed_limit
        ),
    )
