"""One bad reading, through the whole extender over the real wire.

A real aiohttp server on 127.0.0.1 plays the load source (Prometheus' HTTP API, a
load-watcher ``/watcher``, or the API server's metrics.k8s.io through test_cluster's
fake API); the extender is built by ``wiring.build_extender`` from its settings, as the
command line builds it, and served by the real app; the scheduler's calls are HTTP
requests with real Node and Pod shapes (nodeCacheCapable: false, so full Nodes).

Three nodes of 4 CPU and 8 GiB: ``a`` idle-ish, ``b`` with the bad reading, ``c`` at
95 % CPU. Whatever ``b`` reports, ``a`` and ``c`` keep their load-awareness (``c`` is
rejected by the filter and scored low, ``a`` is the favourite), ``b`` is scored
lowest (never as idle, never above a measured node), nothing is answered fail-open, and
``/readyz`` and ``/metrics`` say which node was refused and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families

from loadwise.extender.config import load_settings
from loadwise.extender.server import make_app
from loadwise.extender.service import Extender
from loadwise.extender.wiring import build_extender

from .helpers import container, node_json, pod_json
from .test_cluster import FakeAPI, kubeconfig

NODES = ["a", "b", "c"]
GOOD = {"a": (20.0, 30.0), "b": (40.0, 40.0), "c": (95.0, 50.0)}  # cpu, memory percent
TEN_YEARS = 10 * 365 * 86400


@dataclass
class Upstream:
    """A load source on loopback: Prometheus' instant-query API (values as fractions, in
    strings, as its HTTP API writes them) or load-watcher's /watcher (percent, as JSON
    numbers). ``tokens`` are written into the answer as they are, so a test can send
    what a broken exporter sends ("NaN", -0.5, 1e400)."""

    kind: str
    tokens: dict[str, tuple[str, str]] = field(default_factory=dict)  # node -> cpu, memory
    at: Callable[[], float] = time.time
    status: int = 200

    def __post_init__(self) -> None:
        for node in NODES:
            self.good(node)

    def good(self, node: str) -> None:
        cpu, memory = GOOD[node]
        scale = 100 if self.kind == "prometheus" else 1
        self.tokens[node] = (repr(cpu / scale), repr(memory / scale))

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1/query", self.query)
        app.router.add_get("/watcher", self.watcher)
        return app

    async def query(self, request: web.Request) -> web.Response:
        if self.status != 200:
            return web.json_response({"status": "error", "error": "down"}, status=self.status)
        i = 0 if "cpu" in request.query["query"] else 1
        result = [
            {"metric": {"instance": n}, "value": [self.at(), v[i]]} for n, v in self.tokens.items()
        ]
        body = {"status": "success", "data": {"resultType": "vector", "result": result}}
        return web.json_response(body)

    async def watcher(self, request: web.Request) -> web.Response:
        if self.status != 200:
            return web.Response(status=self.status, text="down")
        end = int(self.at())
        nodes = {
            n: {
                "metrics": [
                    {"type": "CPU", "operator": "AVG", "value": f"@{n}@0"},
                    {"type": "Memory", "operator": "AVG", "value": f"@{n}@1"},
                ]
            }
            for n in self.tokens
        }
        doc = {
            "timestamp": end,
            "window": {"duration": "15m", "start": end - 900, "end": end},
            "source": "Prometheus",
            "data": {"NodeMetricsMap": nodes},
        }
        text = json.dumps(doc)
        for n, values in self.tokens.items():
            for i, token in enumerate(values):
                text = text.replace(f'"@{n}@{i}"', token)
        return web.Response(text=text, content_type="application/json")


@dataclass
class Served:
    client: httpx.AsyncClient
    ext: Extender

    async def filter(self, names: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
        r = await self.client.post("/scheduler/filter", content=_args(names))
        assert r.status_code == 200, r.text
        out = r.json()
        if names is None:
            passed = [n["metadata"]["name"] for n in out["Nodes"]["items"]]
        else:
            passed = out["NodeNames"]
        return passed, out["FailedAndUnresolvableNodes"] or {}

    async def prioritize(self, names: list[str] | None = None) -> dict[str, int]:
        r = await self.client.post("/scheduler/prioritize", content=_args(names))
        assert r.status_code == 200, r.text
        return {h["Host"]: h["Score"] for h in r.json()}

    async def metrics(self) -> str:
        return (await self.client.get("/metrics")).text

    async def readyz(self, needle: str, *, status: int = 200) -> str:
        """/readyz once it answers ``status`` with ``needle`` (the refresher polls the
        source every 0.1 s), else fail with what it said."""
        for _ in range(200):
            r = await self.client.get("/readyz")
            if r.status_code == status and needle in r.text:
                return r.text
            await asyncio.sleep(0.05)
        raise AssertionError(f"/readyz never answered {status} with {needle!r}: {r.text}")


def _args(names: list[str] | None = None) -> bytes:
    """ExtenderArgs as kube-scheduler sends them: the pod and either the candidate Node
    objects (nodeCacheCapable: false) or their names (true)."""
    pod = pod_json(container({"cpu": "100m", "memory": "64Mi"}), name="web", uid="w1")
    nodes = None if names else {"metadata": {}, "items": [node_json(n) for n in NODES]}
    return json.dumps({"Pod": pod, "Nodes": nodes, "NodeNames": names}).encode()


def _metric(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name{labels}`` in /metrics text; None when absent."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return None


def _nodes_named(text: str) -> list[str]:
    return [
        sample.labels["node"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "loadwise_extender_invalid_reading"
    ]


Start = Callable[..., Awaitable[Served]]


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """``await start(app, **settings)``: ``app`` served on loopback as the load source
    (its URL is ``source.url``), the extender built from ``settings`` and served too."""
    async with contextlib.AsyncExitStack() as stack:

        async def run(upstream: web.Application | None, **settings: Any) -> Served:
            if upstream is not None:
                source = TestServer(upstream, host="127.0.0.1")
                await source.start_server()
                stack.push_async_callback(source.close)
                settings.setdefault("source.url", str(source.make_url("")).rstrip("/"))
            settings.setdefault("source.refresh_seconds", 0.1)
            ext = build_extender(load_settings(None, settings))
            server = TestServer(make_app(ext), host="127.0.0.1")
            await server.start_server()
            stack.push_async_callback(server.close)
            client = httpx.AsyncClient(base_url=str(server.make_url("")))
            stack.push_async_callback(client.aclose)
            return Served(client, ext)

        yield run


async def assert_only_b_refused(served: Served, reason: str, detail: str) -> None:
    await served.readyz("ok: ")  # the first reading is in
    passed, failed = await served.filter()
    assert passed == ["a", "b"]  # b: no figures to reject on
    assert list(failed) == ["c"] and failed["c"].startswith("cpu 9"), failed  # c still rejected

    scores = await served.prioritize()
    # b: lowest, not read as idle, never above a measured node (c is busy: it may tie)
    assert scores["b"] == 0 and scores["a"] > scores["c"] >= scores["b"], scores

    ready = await served.readyz("with invalid readings")
    assert ready.startswith("ok: 2 nodes from "), ready
    assert f"1 node with invalid readings, scored as unknown: b ({detail})" in ready, ready

    text = await served.metrics()
    assert _metric(text, "loadwise_extender_invalid_readings_total", reason=reason) >= 1
    assert _metric(text, "loadwise_extender_invalid_reading", node="b", reason=reason) == 1
    assert _metric(text, "loadwise_extender_invalid_reading", node="a", reason=reason) is None
    assert _metric(text, "loadwise_extender_invalid_reading_nodes") == 1
    assert 'kind="internal"' not in text  # nothing answered fail-open


PROMETHEUS_CASES = [
    # value token, which resource, reason, what /readyz says about b
    ("NaN", 0, "not_finite", "cpu use is NaN"),
    ("+Inf", 0, "not_finite", "cpu use is +Inf"),
    ("-Inf", 1, "not_finite", "memory use is -Inf"),
    ("-0.5", 0, "negative", "cpu use -50% is negative"),
    ("2.5", 1, "over_capacity", "memory use 250% is over 200% of capacity"),
    ("1e308", 0, "over_capacity", "cpu use 1e+308% is over 200% of capacity"),
    ("lots", 0, "malformed", 'cpu value "lots" is not a number'),
]


@pytest.mark.parametrize(
    ("token", "which", "reason", "detail"),
    [pytest.param(*case, id=f"{case[0]}-{case[1]}") for case in PROMETHEUS_CASES],
)
async def test_prometheus_one_bad_node_leaves_the_others_scored_by_load(
    start: Start, caplog: pytest.LogCaptureFixture, token: str, which: int, reason: str, detail: str
) -> None:
    up = Upstream("prometheus")
    cpu, memory = up.tokens["b"]
    up.tokens["b"] = (token, memory) if which == 0 else (cpu, token)
    served = await start(up.app(), **{"source.kind": "prometheus"})
    await assert_only_b_refused(served, reason, detail)
    # one WARNING when b was first refused, no traceback, no line per request
    refused = [r for r in caplog.records if "invalid readings" in r.getMessage()]
    assert len(refused) == 1 and refused[0].levelno == logging.WARNING
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


WATCHER_CASES = [
    # load-watcher documents: cpu, memory tokens for b (percent), reason, detail
    ("-50", "-50", "negative", "cpu use -50% is negative"),
    ("1e308", "1e308", "over_capacity", "cpu use 1e+308% is over 200% of capacity"),
    ("250", "40", "over_capacity", "cpu use 250% is over 200% of capacity"),
    ("1e400", "40", "malformed", "entry unusable: Number out of range - at `$.metrics[0].value`"),
]


@pytest.mark.parametrize(("cpu", "memory", "reason", "detail"), WATCHER_CASES)
async def test_load_watcher_one_bad_node_leaves_the_others_scored_by_load(
    start: Start, cpu: str, memory: str, reason: str, detail: str
) -> None:
    up = Upstream("load-watcher")
    up.tokens["b"] = (cpu, memory)
    served = await start(up.app(), **{"source.kind": "load-watcher"})
    await assert_only_b_refused(served, reason, detail)


@pytest.fixture
async def metrics_api() -> AsyncIterator[tuple[FakeAPI, str, dict[str, tuple[str, str]]]]:
    """test_cluster's fake API server with nodes a, b, c of 4 CPU and 8 GiB, serving
    NodeMetrics stamped now from ``usage`` (node -> cpu, memory quantities)."""
    fake = FakeAPI()
    fake.nodes = [node_json(n) for n in NODES]
    usage = {"a": ("800m", "2458Mi"), "b": ("1600m", "3277Mi"), "c": ("3800m", "4Gi")}

    async def node_metrics(request: web.Request) -> web.Response:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        items = [
            {
                "metadata": {"name": n},
                "timestamp": stamp,
                "window": "15s",
                "usage": {"cpu": cpu, "memory": memory},
            }
            for n, (cpu, memory) in usage.items()
        ]
        return web.json_response({"kind": "NodeMetricsList", "items": items})

    fake.node_metrics = node_metrics  # type: ignore[method-assign]
    api = TestServer(fake.app(), host="127.0.0.1")
    await api.start_server()
    yield fake, str(api.make_url("")).rstrip("/"), usage
    fake.closing.set()
    await api.close()


async def test_metrics_server_usage_beyond_capacity_refuses_that_node_only(
    metrics_api: tuple[FakeAPI, str, dict[str, tuple[str, str]]], start: Start, tmp_path
) -> None:
    _, url, usage = metrics_api
    usage["b"] = ("9", "1Gi")  # 9 cores used on a node of 4: more than its capacity
    settings = {
        "kubeconfig": str(kubeconfig(tmp_path, url)),
        "source.kind": "metrics-server",
        "events.enabled": False,
    }
    served = await start(None, **settings)
    await assert_only_b_refused(served, "over_capacity", "cpu use 225% is over 200% of capacity")
    # names only (nodeCacheCapable: true): the sizes come from the node watch
    passed, failed = await served.filter(NODES)
    assert passed == ["a", "b"] and list(failed) == ["c"]
    usage["b"] = ("-1", "1Gi")
    await served.readyz("b (cpu use -25% is negative)")


async def test_a_refused_node_recovers_and_the_gauges_forget_it(start: Start) -> None:
    up = Upstream("prometheus")
    up.tokens["b"] = ("NaN", "0.4")
    served = await start(up.app(), **{"source.kind": "prometheus"})
    await assert_only_b_refused(served, "not_finite", "cpu use is NaN")
    up.good("b")
    assert "invalid" not in await served.readyz("ok: 3 nodes from prometheus")
    text = await served.metrics()
    assert _metric(text, "loadwise_extender_invalid_reading_nodes") == 0
    assert _nodes_named(text) == []
    assert _metric(text, "loadwise_extender_invalid_readings_total", reason="not_finite") >= 1
    scores = await served.prioritize()
    assert scores["a"] > scores["b"] > scores["c"]  # b (40 %) scored by its load again


async def test_a_source_refusing_every_node_names_a_bounded_few(start: Start) -> None:
    up = Upstream("prometheus")
    up.tokens = {f"node-{i:02}": ("NaN", "NaN") for i in range(40)}
    served = await start(up.app(), **{"source.kind": "prometheus"})
    ready = await served.readyz("40 nodes with invalid readings")
    assert ready.startswith("ok: 0 nodes from prometheus")  # partial data is not unreadiness
    assert ready.rstrip().endswith("node-04 (cpu use is NaN), +35 more"), ready
    text = await served.metrics()
    assert _metric(text, "loadwise_extender_invalid_reading_nodes") == 40
    assert sorted(_nodes_named(text)) == [f"node-{i:02}" for i in range(16)]
    # nodes of unknown load only: all lowest, the favourite a step ahead of the others
    # (docs/contracts.md, "Ties and the ledger"), none rejected
    names = ["node-00", "node-01", "node-02"]
    scores = await served.prioritize(names)
    assert sorted(scores.values()) == [0, 0, 1]
    assert await served.filter(names) == (names, {})


@pytest.mark.parametrize("kind", ["prometheus", "load-watcher"])
async def test_a_reading_dated_years_ahead_is_refused_not_fresh_until_then(
    start: Start, kind: str
) -> None:
    up = Upstream(kind, at=lambda: time.time() + TEN_YEARS)
    served = await start(up.app(), **{"source.kind": kind})
    ready = await served.readyz("3 nodes with invalid readings")
    assert ready.startswith("ok: 0 nodes from"), ready
    assert "after it was read (clock skew allowed: 60s)" in ready, ready
    text = await served.metrics()
    assert _metric(text, "loadwise_extender_invalid_reading", node="a", reason="future") == 1
    scores = await served.prioritize()
    assert sorted(scores.values()) == [0, 0, 1]  # unknown: all lowest, the favourite a step up


@pytest.mark.parametrize("kind", ["prometheus", "load-watcher"])
async def test_a_reading_dated_within_the_clock_skew_still_goes_stale_when_the_source_dies(
    start: Start, kind: str
) -> None:
    up = Upstream(kind, at=lambda: time.time() + 30)  # a clock 30 s ahead: read as now
    served = await start(
        up.app(),
        **{"source.kind": kind, "source.stale_after_seconds": 1, "source.max_stale_seconds": 1},
    )
    await served.readyz("ok: 3 nodes")
    up.status = 500  # the source dies; the last reading is all the extender has
    await served.readyz("is stale", status=503)
    scores = await served.prioritize()
    assert sorted(scores.values()) == [0, 0, 1]  # unknown: all lowest, the favourite a step up
