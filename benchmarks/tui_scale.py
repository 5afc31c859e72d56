"""How the TUI copes with 500 nodes and 10,000 pods: model, table refresh, single events.

    .venv/bin/python benchmarks/tui_scale.py [--nodes 500] [--pods 10000]

Prints wall-clock figures for: parsing the raw JSON lists, applying the full snapshot to
the model, one pod watch event, one metrics poll, and (headless Textual) the first render
of the nodes table plus the refresh after a metrics poll, side by side for the old path
(every row rebuilt) and the current one (only the rows in view are built).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from textual.pilot import Pilot

from loadwise.tui.app import LoadwiseApp, make_app
from loadwise.tui.model import ClusterModel
from loadwise.tui.objects import Resources, Usage
from loadwise.tui.screens import MainScreen
from loadwise.tui.sources import changes as ch
from loadwise.tui.sources.recorded import RecordedSource
from loadwise.tui.sources.synthetic import synthetic_cluster
from loadwise.tui.widgets import NodesTable

NOW = datetime(2026, 5, 4, 10, 30, tzinfo=UTC)


def timed(label: str, fn: Callable[[], object], repeat: int = 1) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    value = statistics.median(samples)
    unit = f"{value * 1000:9.2f} ms" if value >= 0.001 else f"{value * 1e6:9.1f} µs"
    print(f"{label:<58}{unit}" + (f"  (median of {repeat})" if repeat > 1 else ""))
    return value


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:9.2f} ms"


async def poll_refresh(app: LoadwiseApp, screen: MainScreen, pilot: Pilot[None], how: str) -> None:
    """Refresh of the CPU-sorted nodes table after each of 10 metrics polls.

    Every poll gives every node new figures, so the order changes and the cursor's node
    (the hottest at start) moves: the worst case for the table. Two figures: the view's
    own work (`refresh_view`: sort, build rows, write changed cells; wall clock), and the
    process CPU time until Textual has painted the screen (process time, so waiting for
    idle and other processes on the machine do not count).
    """
    refresh, refresh_cpu, painted = [], [], []
    for i in range(10):
        app.model.apply(
            ch.MetricsPolled(
                NOW + timedelta(seconds=i),
                tuple(
                    Usage(n, usage=Resources(100 * ((i * 7 + k) % 30), 2**30))
                    for k, n in enumerate(app.model.nodes)
                ),
            )
        )
        cpu, wall = time.process_time(), time.perf_counter()
        screen.refresh_view()
        refresh.append(time.perf_counter() - wall)
        refresh_cpu.append(time.process_time() - cpu)
        await pilot.pause()
        painted.append(time.process_time() - cpu)
    table = screen.query_one(NodesTable)
    in_view = [table.key_at(i) for i in range(table.row_count)]
    assert in_view == [n.name for n in app.model.node_list()], "table order is wrong"
    print(
        f"{'refresh after a metrics poll, ' + how:<58}{_ms(statistics.median(refresh))}"
        f"  (CPU {statistics.median(refresh_cpu) * 1000:.1f} ms; median of 10; goal < 50 ms)"
    )
    print(
        f"{'  ... CPU until painted, ' + how:<58}{_ms(statistics.median(painted))}  (median of 10)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=10_000)
    args = parser.parse_args()
    print(f"cluster: {args.nodes} nodes, {args.pods} pods; python {sys.version.split()[0]}")
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.1f}, CPUs: {os.cpu_count()}")
    cluster = synthetic_cluster(nodes=args.nodes, pods=args.pods, now=NOW, polls=12)
    changes: list[ch.Change] = []
    timed(
        "parse raw JSON lists into typed records", lambda: changes.extend(cluster.changes(now=NOW))
    )
    model = ClusterModel()
    timed("apply full snapshot to a fresh model", lambda: model.apply_all(changes))
    pods = list(model.pods.values())
    timed(
        "one pod watch event (MODIFIED)",
        lambda: model.apply(ch.PodUpserted(replace(pods[17], phase="Running"))),
        repeat=2000,
    )
    poll = ch.MetricsPolled(NOW, tuple(Usage(n, usage=Resources(1234, 2**30)) for n in model.nodes))
    timed("one NodeMetrics poll (all nodes)", lambda: model.apply(poll), repeat=50)
    timed("feed: newest 200 of placements+evictions", lambda: model.feed(200), repeat=50)
    timed("node list sorted by CPU", lambda: model.node_list(), repeat=50)

    async def ui() -> None:
        source = RecordedSource(cluster, now=lambda: NOW)
        app = make_app(source, clock=lambda: NOW, tick_seconds=3600)
        start = time.perf_counter()
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            print(
                f"{'app start: apply snapshot + first nodes table render':<58}"
                f"{(time.perf_counter() - start) * 1000:9.2f} ms"
            )
            screen = app.screen
            assert isinstance(screen, MainScreen)
            table = screen.query_one(NodesTable)
            assert table.row_count == args.nodes
            for label, visible_only in (
                ("old path: every row rebuilt", False),
                ("rows in view only", True),
            ):
                NodesTable.visible_only = visible_only
                await poll_refresh(app, screen, pilot, label)
            NodesTable.visible_only = True
            samples = []
            for _ in range(10):
                t = time.perf_counter()
                screen.refresh_view()
                await pilot.pause()
                samples.append(time.perf_counter() - t)
            print(
                f"{'refresh nodes table, nothing changed (1 s tick)':<58}"
                f"{statistics.median(samples) * 1000:9.2f} ms  (median of 10)"
            )
            t = time.perf_counter()
            await pilot.press("2")
            await pilot.pause()
            print(
                f"{'switch to placements tab (render 200-row feed)':<58}"
                f"{(time.perf_counter() - t) * 1000:9.2f} ms"
            )

    asyncio.run(ui())


if __name__ == "__main__":
    main()
