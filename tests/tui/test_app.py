"""Pilot drives the real app against the recorded cluster: keys, sorting, filtering, screens."""

from __future__ import annotations

import ast
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from conftest import NOW, SIZE

from loadwise import tui
from loadwise.tui.app import LoadwiseApp, make_app
from loadwise.tui.model import NodeSort
from loadwise.tui.objects import Eviction
from loadwise.tui.screens import HelpScreen, MainScreen, NodeDetailScreen
from loadwise.tui.sources import changes as ch
from loadwise.tui.sources.recorded import RecordedCluster, RecordedSource
from loadwise.tui.widgets import NodesTable, Notice, PlacementsTable, PodsTable

AppFactory = Callable[..., LoadwiseApp]


def _node_names(app: LoadwiseApp) -> list[str]:
    table = app.screen.query_one(NodesTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def test_nodes_table_starts_hottest_first(build_app: AppFactory) -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        names = _node_names(app)
        assert len(names) == 8
        hottest = max(app.model.nodes.values(), key=lambda n: n.cpu_fraction() or 0)
        assert names[0] == hottest.name


async def test_sort_keys_and_reverse(build_app: AppFactory) -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("N")
        assert isinstance(app.screen, MainScreen) and app.screen.sort is NodeSort.NAME
        names = _node_names(app)
        assert names == sorted(names)
        await pilot.press("N")
        assert _node_names(app) == sorted(names, reverse=True)
        await pilot.press("P")
        pods = [app.model.nodes[n].pods for n in _node_names(app)]
        assert pods == sorted(pods, reverse=True)


async def test_filter_narrows_and_escape_clears(build_app: AppFactory) -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", *"cordon", "enter")
        assert _node_names(app) == [
            n.name for n in app.model.nodes.values() if n.info.unschedulable
        ]
        assert "filter: cordon" in str(app.screen.query_one(NodesTable).border_title)
        await pilot.press("escape")
        assert len(_node_names(app)) == 8


async def test_enter_opens_node_detail_and_escape_returns(build_app: AppFactory) -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        first = _node_names(app)[0]
        await pilot.press("enter")
        assert isinstance(app.screen, NodeDetailScreen) and app.screen.node == first
        table = app.screen.query_one(PodsTable)
        assert table.row_count == len(app.model.pods_on(first)) > 0
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_help_opens_and_closes(build_app: AppFactory) -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        await pilot.press("q")
    assert app.return_code == 0


async def test_placements_feed_newest_first_with_scores(build_app: AppFactory) -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        table = app.screen.query_one(PlacementsTable)
        items = list(table.items.values())
        assert [i.at for i in items] == sorted((i.at for i in items), reverse=True)
        assert any(i.decision is not None and i.decision.scores for i in items)
        assert any(i.eviction is not None for i in items)
        assert not app.screen.query_one("#placements-notice", Notice).display
        # enter on a binding opens the node the pod went to
        await pilot.press("enter")
        assert isinstance(app.screen, NodeDetailScreen)
        assert app.screen.node == items[0].placement.node  # type: ignore[union-attr]


async def test_feed_limit_reaches_the_placements_table(recorded: RecordedCluster) -> None:
    app = make_app(RecordedSource(recorded, now=lambda: NOW), clock=lambda: NOW, feed_limit=5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        assert len(app.model.feed()) > 5
        assert app.screen.query_one(PlacementsTable).row_count == 5


async def test_live_eviction_appears_on_top(build_app: AppFactory) -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        source = app.source
        assert isinstance(source, RecordedSource)
        source.push(
            ch.EventsSeen(
                (
                    Eviction(
                        "live-1",
                        "shop",
                        "cart-x",
                        "worker-03",
                        "LowNodeUtilization",
                        "pod eviction from worker-03 node by sigs.k8s.io/descheduler",
                        at=NOW + timedelta(seconds=1),
                    ),
                )
            )
        )
        app.drain()
        app.revision += 1
        await pilot.pause()
        table = app.screen.query_one(PlacementsTable)
        assert next(iter(table.items)) == "evicted:live-1"
        # the cursor stays on the row the operator was reading, now one further down
        assert table.cursor_row == 1


async def test_without_metrics_server_shows_requests_and_notice(build_app: AppFactory) -> None:
    app = build_app(metrics=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        notice = app.screen.query_one("#nodes-notice", Notice)
        assert notice.display and "REQUESTS" in str(notice.render())
        assert len(_node_names(app)) == 8


async def test_without_extender_events_shows_notice(build_app: AppFactory) -> None:
    app = build_app(events=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        notice = app.screen.query_one("#placements-notice", Notice)
        assert notice.display and "LoadwiseScored" in str(notice.render())
        assert app.screen.query_one(PlacementsTable).row_count > 0


async def test_api_loss_shows_banner_and_stale_then_recovers(build_app: AppFactory) -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        source = app.source
        assert isinstance(source, RecordedSource)
        source.push(
            ch.ApiUnreachable(
                "credentials rejected (401 Unauthorized)", 4, NOW + timedelta(seconds=3)
            )
        )
        app.drain()
        app.revision += 1
        await pilot.pause()
        banner = app.screen.query_one("#banner", Notice)
        assert banner.display and "401" in str(banner.render()) and "STALE" in str(banner.render())
        assert "STALE" in str(app.screen.query_one(NodesTable).border_subtitle)
        assert len(_node_names(app)) == 8  # last known data is still shown
        source.push(ch.ApiReachable(NOW + timedelta(seconds=9)))
        app.drain()
        app.revision += 1
        await pilot.pause()
        assert not banner.display


async def test_starting_with_api_down_does_not_crash(build_app: AppFactory) -> None:
    app = build_app(reachable=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#banner", Notice).display
        assert _node_names(app) == []
        await pilot.press("2", "enter", "1", "enter", "slash", "x", "enter")
        assert isinstance(app.screen, MainScreen)


def test_screens_and_widgets_never_import_the_app() -> None:
    """They get the model, clock and settings from the app and talk back by messages."""
    root = Path(tui.__file__).parent
    offenders = []
    for path in sorted([*root.glob("screens/*.py"), *root.glob("widgets/*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (
                (node.level == 2 and node.module == "app") or node.module == "loadwise.tui.app"
            ):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
