"""The nodes table at scale: after a metrics poll only the rows in view are rebuilt, yet
what is on screen is always the model's current figures in the right order."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from datetime import timedelta

from conftest import NOW, SIZE

from loadwise.tui.app import LoadwiseApp, make_app
from loadwise.tui.objects import Resources, Usage
from loadwise.tui.screens import MainScreen
from loadwise.tui.sources import changes as ch
from loadwise.tui.sources.recorded import RecordedSource
from loadwise.tui.sources.synthetic import synthetic_cluster
from loadwise.tui.widgets import NodesTable, PlacementsTable

NODES = 300


def _app() -> LoadwiseApp:
    cluster = synthetic_cluster(nodes=NODES, pods=900, now=NOW, polls=2, evictions=0)
    return make_app(RecordedSource(cluster, now=lambda: NOW), clock=lambda: NOW)


def _poll(app: LoadwiseApp, seed: int) -> None:
    """A metrics-server poll with new, unrelated figures for every node."""
    rng = random.Random(seed)
    usages = []
    for name, state in app.model.nodes.items():
        alloc = state.info.allocatable
        usages.append(
            Usage(name, usage=Resources(rng.uniform(0, alloc.cpu_m), int(alloc.memory * 0.4)))
        )
    app.model.apply(ch.MetricsPolled(NOW + timedelta(seconds=seed), tuple(usages)))
    assert isinstance(app.screen, MainScreen)
    app.screen.refresh_view()


def _on_screen(table: NodesTable) -> list[tuple[str, int]]:
    """(node, CPU %) of every row Textual renders now, read from the rendered lines."""
    rows = []
    for y in range(1, table.size.height):  # line 0 is the header
        text = table.render_line(y).text
        match = re.match(r"\s*(\S+)\s.*?(\d+)%", text)
        if match:
            rows.append((match[1], int(match[2])))
    return rows


def _check_screen(app: LoadwiseApp, table: NodesTable) -> list[str]:
    order = [n.name for n in app.model.node_list()]
    shown = _on_screen(table)
    assert len(shown) >= SIZE[1] // 2, shown
    names = [name for name, _ in shown]
    first = order.index(names[0])
    assert names == order[first : first + len(names)], "rows on screen out of order"
    for name, percent in shown:
        fraction = app.model.nodes[name].cpu_fraction()
        assert fraction is not None and percent == round(fraction * 100), name
    return names


async def test_poll_refresh_rebuilds_only_rows_in_view_and_shows_new_figures() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.screen.query_one(NodesTable)
        assert table.row_count == NODES
        for seed in (1, 2, 3):
            built = table.built
            _poll(app, seed)
            await pilot.pause()
            assert table.built - built < NODES // 4  # not every row, per poll
            _check_screen(app, table)
            assert [table.key_at(i) for i in range(NODES)] == [
                n.name for n in app.model.node_list()
            ]


async def test_rows_scrolled_into_view_show_current_figures() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.screen.query_one(NodesTable)
        _poll(app, 4)
        await pilot.pause()
        top = _check_screen(app, table)
        await pilot.press("ctrl+end")  # cursor to the last row: the view jumps there
        await pilot.pause()
        bottom = _check_screen(app, table)
        assert not set(top) & set(bottom)
        assert table.current_key == app.model.node_list()[-1].name
        await pilot.press("pageup", "pageup")
        await pilot.pause()
        _check_screen(app, table)
        cells = table.cells_at(NODES // 2)  # off-screen: built on demand
        assert str(cells[0]) == table.key_at(NODES // 2)


async def test_cursor_stays_on_its_node_across_a_poll() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.screen.query_one(NodesTable)
        await pilot.press("down", "down", "down")
        chosen = table.current_key
        assert chosen is not None
        _poll(app, 5)
        await pilot.pause()
        assert table.current_key == chosen
        assert chosen in _check_screen(app, table)


async def test_feed_rows_scrolled_into_view_are_the_right_items() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await pilot.pause()
        table = app.screen.query_one(PlacementsTable)
        # A new binding shifts every row of the feed down by one.
        pod = next(iter(app.model.pods.values()))
        app.model.apply(ch.PodUpserted(replace(pod, name="new-1", uid="u-new", scheduled_at=NOW)))
        assert isinstance(app.screen, MainScreen)
        app.screen.refresh_view()
        feed = app.model.feed(app.settings.feed_limit)
        assert feed[0].placement is not None and feed[0].placement.pod == "new-1"
        assert table.row_count == len(feed) == app.settings.feed_limit
        pods = [item.placement.pod if item.placement else "" for item in feed]
        for keys in ((), ("ctrl+end",), ("pageup", "pageup")):
            await pilot.press(*keys)
            await pilot.pause()
            lines = [table.render_line(y).text.split() for y in range(1, table.size.height)]
            shown = [words[3] for words in lines if len(words) > 3]
            assert len(shown) >= SIZE[1] // 4
            first = pods.index(shown[0])
            assert shown == pods[first : first + len(shown)]


async def test_filter_narrows_then_widens_after_a_poll() -> None:
    """Rows removed and re-added around a poll: what is shown is still the model's."""
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.screen.query_one(NodesTable)
        await pilot.press("ctrl+end", "slash", *"worker-2", "enter")
        await pilot.pause()
        assert table.row_count == len(app.model.node_list(text="worker-2")) < NODES
        _poll(app, 6)
        await pilot.press("escape")
        await pilot.pause()
        assert table.row_count == NODES
        _check_screen(app, table)
        await pilot.press("ctrl+home")
        await pilot.pause()
        _check_screen(app, table)
