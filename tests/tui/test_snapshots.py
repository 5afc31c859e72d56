"""Pinned screens. Update deliberately with `pytest tests/tui --snapshot-update`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from conftest import NOW, SIZE
from textual.pilot import Pilot

from loadwise.tui.app import LoadwiseApp
from loadwise.tui.sources import changes as ch
from loadwise.tui.sources.recorded import RecordedSource
from loadwise.tui.widgets import FilterBar

AppFactory = Callable[..., LoadwiseApp]


async def _steady(pilot: Pilot[None]) -> None:
    """No blinking cursor in the filter line: a blink caught mid-phase fails a snapshot."""
    for bar in pilot.app.screen.query(FilterBar):
        bar.cursor_blink = False
    await pilot.pause()


class TestNodes:
    def test_nodes(self, snap_compare, build_app: AppFactory) -> None:
        assert snap_compare(build_app(), terminal_size=SIZE, run_before=_steady)

    def test_nodes_filtered(self, snap_compare, build_app: AppFactory) -> None:
        async def run_before(pilot: Pilot[None]) -> None:
            await _steady(pilot)
            await pilot.press("slash", *"worker-0", "enter", "N")
            await _steady(pilot)

        assert snap_compare(build_app(), terminal_size=SIZE, run_before=run_before)

    def test_nodes_without_metrics(self, snap_compare, build_app: AppFactory) -> None:
        assert snap_compare(build_app(metrics=False), terminal_size=SIZE, run_before=_steady)

    def test_api_unreachable(self, snap_compare, build_app: AppFactory) -> None:
        async def run_before(pilot: Pilot[None]) -> None:
            app = pilot.app
            assert isinstance(app, LoadwiseApp)
            assert isinstance(app.source, RecordedSource)
            app.source.push(ch.ApiUnreachable("connection refused", 8, NOW + timedelta(seconds=2)))
            app.drain()
            app.revision += 1
            await _steady(pilot)

        assert snap_compare(build_app(), terminal_size=SIZE, run_before=run_before)


class TestPlacements:
    def test_placements(self, snap_compare, build_app: AppFactory) -> None:
        async def run_before(pilot: Pilot[None]) -> None:
            await pilot.press("2", "down")
            await _steady(pilot)

        assert snap_compare(build_app(), terminal_size=SIZE, run_before=run_before)

    def test_placements_without_extender(self, snap_compare, build_app: AppFactory) -> None:
        async def run_before(pilot: Pilot[None]) -> None:
            await pilot.press("2")
            await _steady(pilot)

        assert snap_compare(build_app(events=False), terminal_size=SIZE, run_before=run_before)


class TestScreens:
    def test_node_detail(self, snap_compare, build_app: AppFactory) -> None:
        async def run_before(pilot: Pilot[None]) -> None:
            await pilot.press("enter")
            await _steady(pilot)

        assert snap_compare(build_app(), terminal_size=SIZE, run_before=run_before)

    def test_help(self, snap_compare, build_app: AppFactory) -> None:
        assert snap_compare(build_app(), terminal_size=SIZE, press=["question_mark"])
