"""The dashboard against the lab's real API server: Pilot sees the nodes, the hot
node, and where pods went with the extender's reasons."""

from __future__ import annotations

import asyncio

import pytest

from lab import delete, deploy, placements
from loadwise.tui.app import make_app
from loadwise.tui.screens import MainScreen
from loadwise.tui.sources.kubernetes import KubernetesSource, load_api_client
from loadwise.tui.widgets import NodesTable
from tests.lab.e2e import HOT, restart_scheduler, scheduler_config

pytestmark = pytest.mark.lab


async def wait_for(predicate, what: str, app, timeout: float = 90.0) -> None:
    for _ in range(int(timeout / 0.5)):
        app.drain()
        if predicate():
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"dashboard never showed {what}")


async def test_dashboard_shows_hot_node_and_reasons(lab, extender, workdir):
    restart_scheduler(lab, scheduler_config(workdir, with_extender=True))
    deploy(lab, "dash", 6)
    try:
        where = placements(lab, "dash", 6)
        api_client, _ = load_api_client(lab.kubeconfig, None)
        source = KubernetesSource(api_client, description="lab", refresh=2.0)
        app = make_app(source, refresh_seconds=2.0, tick_seconds=0.5)
        async with app.run_test(size=(140, 36)) as pilot:
            model = app.model
            await wait_for(
                lambda: {"lab-small", "lab-medium", "lab-large", HOT} <= set(model.nodes),
                "the lab's nodes",
                app,
            )
            await wait_for(
                lambda: all(n.usage is not None for n in model.nodes.values()),
                "metrics-server usage",
                app,
            )
            hottest = max(model.nodes.values(), key=lambda n: n.memory_fraction() or 0)
            assert hottest.name == HOT

            def dash_decisions():
                items = [
                    i
                    for i in model.feed(limit=500)
                    if i.placement and i.placement.pod.startswith("dash-")
                ]
                return [(i.placement, model.decision_for(i.placement)) for i in items]

            await wait_for(
                lambda: (
                    len(dash_decisions()) == 6 and all(d is not None for _, d in dash_decisions())
                ),
                "placements joined with LoadwiseScored decisions",
                app,
            )
            for placement, decision in dash_decisions():
                assert placement.node in where
                assert decision.scores and decision.best != HOT and decision.why
            # the rendered nodes table lists the hog, and a key press reaches the app
            await pilot.press("M")
            await pilot.pause()
            assert isinstance(app.screen, MainScreen)
            table = app.screen.query_one(NodesTable)
            names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
            assert names[0] == HOT  # sorted by memory, hottest first
    finally:
        delete(lab, "dash")
