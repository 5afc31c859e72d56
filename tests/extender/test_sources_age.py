"""Each node's reading ages on its own.

A Prometheus sample 3,000 s old beside new ones, a NodeMetrics item of a kubelet that
stopped answering: that node alone is refused (``stale``) and scored as one without
data, the others keep their figures. A load-watcher ``window.end`` far in the future
is refused (``future``) instead of staying fresh until then. A node that reaches
``max_stale_seconds`` between two fetches is refused when it does, not at the next
fetch.
"""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web

from loadwise.extender.exceptions import SourceError
from loadwise.extender.model import LoadSnapshot, NodeInfo, NodeLoad, ResourceLoad
from loadwise.extender.readings import FUTURE, STALE, expired, next_expiry
from loadwise.extender.sources import Refresher, parse_node_metrics, parse_watcher

from .test_sources_wire import GOOD, Start, _metric, start  # noqa: F401 (a fixture)

OLD = 3000.0  # seconds: five times the default max_stale_seconds (600)


class Once:
    """A source answering ``snapshots`` in turn, then failing."""

    name = "once"

    def __init__(self, *snapshots: LoadSnapshot) -> None:
        self.snapshots = list(snapshots)
        self.fetches = 0

    async def fetch(self) -> LoadSnapshot:
        self.fetches += 1
        if not self.snapshots:
            raise SourceError("gone")
        return self.snapshots.pop(0)

    async def close(self) -> None:
        return None


def prometheus_with_one_old_sample() -> web.Application:
    """Prometheus' query API: a, b and c as test_sources_wire has them, a's samples
    (CPU and memory) stamped ``OLD`` seconds ago, the others 5 s ago."""

    async def query(request: web.Request) -> web.Response:
        i = 0 if "cpu" in request.query["query"] else 1
        now = time.time()
        result = [
            {
                "metric": {"instance": node},
                "value": [now - (OLD if node == "a" else 5), repr(figures[i] / 100)],
            }
            for node, figures in GOOD.items()
        ]
        body = {"status": "success", "data": {"resultType": "vector", "result": result}}
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    return app


async def test_prometheus_an_old_sample_makes_its_node_unknown_alone(start: Start) -> None:  # noqa: F811
    served = await start(prometheus_with_one_old_sample(), **{"source.kind": "prometheus"})
    ready = await served.readyz("1 node with invalid readings")
    assert ready.startswith("ok: 2 nodes from prometheus"), ready
    assert "a (reading 3000s old, over max_stale_seconds (600s))" in ready, ready
    snapshot = served.ext.refresher.snapshot
    assert snapshot is not None and sorted(snapshot.nodes) == ["b", "c"]
    assert snapshot.nodes["c"].cpu.avg == 95.0  # the others keep their figures
    assert snapshot.invalid["a"].reason == STALE
    text = await served.metrics()
    assert _metric(text, "loadwise_extender_invalid_reading", node="a", reason="stale") == 1
    passed, failed = await served.filter()
    assert passed == ["a", "b"]  # a: no figures to reject on (fail-open for a alone)
    assert list(failed) == ["c"]  # c is still rejected on its own fresh 95 % CPU


def _item(name: str, at: float, cpu: str) -> dict[str, object]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    return {
        "metadata": {"name": name},
        "timestamp": stamp,
        "window": "15s",
        "usage": {"cpu": cpu, "memory": "1Gi"},
    }


async def test_metrics_server_an_old_item_makes_its_node_unknown_alone() -> None:
    now = time.time()
    items = [_item("a", now - OLD, "1"), _item("b", now - 5, "2"), _item("c", now - 20, "3")]
    infos = {n: NodeInfo(n, 4000, 8 * 2**30) for n in "abc"}
    parsed = parse_node_metrics(json.dumps({"items": items}).encode(), infos)
    assert parsed.measured_at["a"] < now - OLD + 1 < parsed.measured_at["b"]
    refresher = Refresher(Once(parsed), interval=30, stale_after=180, max_stale=600)
    await refresher.refresh_once()
    snapshot = refresher.snapshot
    assert snapshot is not None
    assert {n: load.cpu.avg for n, load in snapshot.nodes.items()} == {"b": 50.0, "c": 75.0}
    assert snapshot.invalid["a"].reason == STALE
    assert refresher.fresh()  # the snapshot itself: its newest reading is 5 s old


def _document(end: float) -> bytes:
    nodes = {n: {"metrics": [{"type": "CPU", "operator": "AVG", "value": 10}]} for n in "ab"}
    doc = {"timestamp": int(end), "window": {"end": int(end)}, "data": {"NodeMetricsMap": nodes}}
    return json.dumps(doc).encode()


def test_load_watcher_a_future_window_end_is_refused_beyond_the_clock_skew() -> None:
    now = float(int(time.time()))  # load-watcher's times are whole seconds
    ahead = parse_watcher(_document(now + 3600), fetched_at=now)
    assert not ahead.nodes and {r.reason for r in ahead.invalid.values()} == {FUTURE}
    assert "measured 3600s after it was read" in ahead.invalid["a"].detail
    skewed = parse_watcher(_document(now + 30), fetched_at=now)  # a clock 30 s ahead
    assert sorted(skewed.nodes) == ["a", "b"] and skewed.window_end == now


async def test_load_watcher_a_document_older_than_max_stale_refuses_every_node() -> None:
    old = parse_watcher(_document(time.time() - OLD))
    refresher = Refresher(Once(old), interval=30, stale_after=180, max_stale=600)
    await refresher.refresh_once()
    assert refresher.snapshot is not None and not refresher.snapshot.nodes
    assert {r.reason for r in refresher.snapshot.invalid.values()} == {STALE}


async def test_a_node_reaching_max_stale_between_fetches_is_refused_then() -> None:
    now = time.time()
    loads = {n: NodeLoad(ResourceLoad(10.0), ResourceLoad(20.0)) for n in "ab"}
    snapshot = LoadSnapshot("s", now, now, loads, measured_at={"a": now - 1.6, "b": now})
    source = Once(snapshot)
    # the next fetch is 30 s away; a gets 2 s old 0.4 s from now
    refresher = Refresher(source, interval=30, stale_after=1, max_stale=2)
    refresher.start()
    try:
        for _ in range(60):
            held = refresher.snapshot
            if held is not None and "a" in held.invalid:
                break
            await asyncio.sleep(0.05)
        held = refresher.snapshot
        assert held is not None and "a" in held.invalid, held
        assert held.invalid["a"].reason == STALE
        assert list(held.nodes) == ["b"]  # b keeps its reading
        assert time.time() - now < 2.5  # refused when it got old, not at the next fetch
        assert source.fetches == 1
    finally:
        await refresher.stop()


def test_expired_and_next_expiry_judge_each_node_by_its_own_time() -> None:
    loads = {n: NodeLoad(ResourceLoad(10.0)) for n in "abc"}
    snap = LoadSnapshot("s", 1000.0, 1000.0, loads, measured_at={"a": 100.0, "b": 900.0})
    assert next_expiry(snap, 600) == 700.0  # a's: c has none, it reads window_end (1000)
    assert expired(snap, 700.0, 600) is snap  # exactly max_stale old: still read
    at_1550 = expired(snap, 1550.0, 600)  # a 1450 s, b 650 s, c 550 s old
    assert sorted(at_1550.nodes) == ["c"] and sorted(at_1550.invalid) == ["a", "b"]
    assert at_1550.measured_at == {}
    never = LoadSnapshot("s", 1000.0, 1000.0, {})
    assert next_expiry(never, 600) == float("inf")
