"""Bounded under load, over real HTTP on loopback: the body limit and its sizing, a body
over it refused before it is read, the cap on open connections, and fail-open answers
logged once a minute yet counted and reported by /readyz."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from loadwise.extender.config import NAMES_BODY_BYTES, load_settings
from loadwise.extender.listener import Listener
from loadwise.extender.server import MAX_REQUEST_NODES, ServerState, make_app
from loadwise.extender.service import Extender
from loadwise.extender.sources import LoadFileSource

from .helpers import container, pod_json
from .running import LOAD, filter_body, post_head, watcher_document

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("settings", "limit", "why"),
    [
        ({"kubeconfig": "/etc/loadwise/kubeconfig"}, MIB, "node names only"),
        ({}, MIB + 50 * 64 * 1024, "up to max_nodes 50 nodes; raise max_nodes"),  # full Nodes
        ({"max_nodes": 500}, MIB + 500 * 64 * 1024, "max_nodes 500"),
        ({"kubeconfig": "/k", "max_body_bytes": 4096}, 4096, "max_body_bytes"),
    ],
)
def test_the_body_limit_is_sized_for_what_the_scheduler_sends(settings, limit, why):
    base = {"source.kind": "file", "source.file": "/dev/null"}
    loaded = load_settings(None, {**base, **settings})
    assert loaded.body_limit == limit and why in loaded.body_limit_why


@pytest.fixture
def extender(tmp_path):
    def make(**overrides) -> Extender:
        load = tmp_path / "watcher.json"
        load.write_text(watcher_document(LOAD))
        settings = load_settings(
            None, {"source.kind": "file", "source.file": str(load), **overrides}
        )
        return Extender(settings, LoadFileSource(load))

    return make


async def test_a_body_over_the_limit_is_refused_by_its_length_before_it_is_sent(extender):
    ext = extender(max_body_bytes=64 * 1024)
    srv = TestServer(make_app(ext), host="127.0.0.1")
    await srv.start_server()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(post_head("/scheduler/filter", 64 * 1024 + 1))  # and no body at all
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 5)  # answered, then closed
        writer.close()
        assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
        assert answer.endswith(b'{"Error":"request body larger than 65536 bytes (max_body_bytes)"}')
        metrics = ext.metrics.render().decode()
        assert 'reason="too_large",status="413",verb="filter"} 1.0' in metrics
    finally:
        await srv.close()


async def test_connections_over_the_cap_are_closed_on_arrival(extender):
    ext = extender()
    runner = web.AppRunner(make_app(ext), access_log=None, handle_signals=False)
    await runner.setup()
    listener = Listener(
        runner,
        "127.0.0.1",
        0,
        max_connections=3,
        on_refused=ext.metrics.connections_refused.inc,
        on_accepted=ext.metrics.connections.labels("scheduler").inc,
    )
    await listener.start()
    clients = [httpx.AsyncClient(base_url=listener.url) for _ in range(3)]
    try:
        for client in clients:  # three keep-alive connections, each open after its answer
            for _ in range(4):  # four requests each, on the one connection
                r = await client.post("/scheduler/filter", content=filter_body(["n1", "n2"]))
                assert r.status_code == 200 and r.json()["NodeNames"] == ["n1"]
        accepted = 'loadwise_extender_connections_total{listener="scheduler"} 3.0'
        assert accepted in ext.metrics.render().decode()
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(post_head("/scheduler/filter", 2) + b"{}")
        # closed, never answered: after FULL_GRACE_SECONDS, with the request unread (a
        # reset) when it came within them
        try:
            assert await asyncio.wait_for(reader.read(), 5) == b""
        except ConnectionResetError:
            pass
        writer.close()
        metrics = ext.metrics.render().decode()
        assert "loadwise_extender_connections_refused_total 1.0" in metrics
        await clients.pop().aclose()  # one leaves: a new caller gets in
        for _ in range(50):
            async with httpx.AsyncClient(base_url=listener.url) as late:
                try:
                    r = await late.get("/healthz")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)  # the server has not seen the close yet
        assert r.status_code == 200
    finally:
        for client in clients:
            await client.aclose()
        listener.close()
        await runner.cleanup()


async def test_fail_open_answers_are_logged_once_a_minute_and_reported_by_readyz(
    extender, monkeypatch, caplog
):
    def broken(self, args):
        raise ZeroDivisionError("a bug in a decision")

    monkeypatch.setattr(Extender, "filter", broken)
    now = [1000.0]
    state = ServerState(clock=lambda: now[0])
    ext = extender()
    # log_interval: once a second rather than a minute, to keep the test short
    srv = TestServer(make_app(ext, state=state, log_interval=1.0), host="127.0.0.1")
    await srv.start_server()
    caplog.set_level(logging.ERROR, logger="loadwise.extender.server")
    try:
        async with httpx.AsyncClient(base_url=str(srv.make_url(""))) as client:
            for _ in range(100):  # wait for the first snapshot
                if (await client.get("/readyz")).status_code == 200:
                    break
                await asyncio.sleep(0.02)
            for _ in range(5):
                r = await client.post("/scheduler/filter", content=filter_body(["n1", "n2"]))
                assert r.status_code == 200 and r.json()["NodeNames"] == ["n1", "n2"]  # all pass
            tracebacks = [rec for rec in caplog.records if rec.exc_info]
            assert len(tracebacks) == 1 and "answering fail-open" in tracebacks[0].getMessage()
            ready = await client.get("/readyz")
            assert ready.status_code == 200
            assert "warning: 5 fail-open answers in the last 10 min" in ready.text
            metrics = (await client.get("/metrics")).text
            assert 'loadwise_extender_errors_total{kind="internal",verb="filter"} 5.0' in metrics
            await asyncio.sleep(1.1)  # the next one is logged, with the count held back
            await client.post("/scheduler/filter", content=filter_body(["n1"]))
            tracebacks = [rec for rec in caplog.records if rec.exc_info]
            assert len(tracebacks) == 2
            assert "[4 more fail-open answers since the last line]" in tracebacks[1].getMessage()
            now[0] += 600.0  # ten minutes without one (the window's clock): not reported
            assert "fail-open" not in (await client.get("/readyz")).text
    finally:
        await srv.close()


def _body(names: list[str] | None = None, nodes: list[dict[str, Any]] | None = None) -> bytes:
    pod = pod_json(container({"cpu": "100m", "memory": "64Mi"}), name="web", uid="w1")
    return json.dumps(
        {
            "Pod": pod,
            "Nodes": None if nodes is None else {"items": nodes},
            "NodeNames": names,
        }
    ).encode()


def _node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}}


# The cap on nodes, over every way a request names them: names in a small body (decoded,
# then counted), names in a body over the names-only limit (counted by the scan before any
# string is made), Node objects (full Nodes, nodeCacheCapable false).
_OVER = MAX_REQUEST_NODES + 1
_TOO_MANY = [
    ("filter", "NodeNames", _body(names=[f"n{i}" for i in range(_OVER)])),
    ("filter", "NodeNames", _body(names=[f"node-{i:06d}-{'x' * 100}" for i in range(_OVER)])),
    ("filter", "Nodes.items", _body(nodes=[_node(f"n{i}") for i in range(_OVER)])),
    ("prioritize", "NodeNames", _body(names=[f"n{i}" for i in range(_OVER)])),
    ("prioritize", "Nodes.items", _body(nodes=[_node(f"n{i}") for i in range(_OVER)])),
]


@pytest.mark.parametrize(("verb", "what", "body"), _TOO_MANY, ids=lambda v: str(v)[:12])
async def test_more_nodes_than_the_cap_are_refused_naming_it_and_serving_goes_on(
    extender, verb, what, body
):
    ext = extender()  # no kubeconfig: the body limit is sized for full Nodes (4.125 MiB)
    assert len(body) < ext.settings.body_limit
    srv = TestServer(make_app(ext), host="127.0.0.1")
    await srv.start_server()
    try:
        async with httpx.AsyncClient(base_url=str(srv.make_url("")), timeout=30) as client:
            r = await client.post(f"/scheduler/{verb}", content=body)
            assert r.status_code == 400, (r.status_code, r.text[:200])
            error = r.json()["Error"]
            assert f"{_OVER} nodes" in error and what in error, error
            assert f"at most {MAX_REQUEST_NODES}" in error and "MAX_REQUEST_NODES" in error
            metrics = ext.metrics.render().decode()
            assert f'reason="too_many_nodes",status="400",verb="{verb}"}} 1.0' in metrics
            # the next request is served as ever
            r = await client.post("/scheduler/filter", content=filter_body(["n1", "n2"]))
            assert r.status_code == 200 and r.json()["NodeNames"] == ["n1"]
    finally:
        await srv.close()


async def test_exactly_the_cap_is_served(extender):
    ext = extender()
    srv = TestServer(make_app(ext), host="127.0.0.1")
    await srv.start_server()
    try:
        names = [f"n{i}" for i in range(MAX_REQUEST_NODES)]
        async with httpx.AsyncClient(base_url=str(srv.make_url("")), timeout=30) as client:
            r = await client.post("/scheduler/filter", content=_body(names=names))
        assert r.status_code == 200, r.text[:200]
        # n1 and n3 have room, n2's memory is over the threshold, the rest report no load
        assert {"n1", "n3"} <= set(r.json()["NodeNames"]) and "n2" not in r.json()["NodeNames"]
    finally:
        await srv.close()


async def test_a_names_only_body_over_1_mib_is_a_413_a_full_nodes_one_is_served(extender):
    ext = extender()  # body limit 4.125 MiB: room for both bodies below
    # 4,200 names of 253 characters (the longest DNS name): under the cap, over 1 MiB
    names = [f"{i:05d}{'n' * 248}" for i in range(4200)]
    names_only = _body(names=names)
    assert NAMES_BODY_BYTES < len(names_only) < ext.settings.body_limit
    # the same bytes as three Node objects with large labels: what full Nodes look like
    labels = {f"example.com/l{j}": "v" * 60 for j in range(4500)}
    full = _body(nodes=[_node(n, labels) for n in ("n1", "n2", "n3")])
    assert NAMES_BODY_BYTES < len(full) < ext.settings.body_limit
    srv = TestServer(make_app(ext), host="127.0.0.1")
    await srv.start_server()
    try:
        async with httpx.AsyncClient(base_url=str(srv.make_url("")), timeout=30) as client:
            for verb in ("filter", "prioritize"):
                r = await client.post(f"/scheduler/{verb}", content=names_only)
                assert r.status_code == 413, (verb, r.status_code, r.text[:200])
                error = r.json()["Error"]
                assert f"request body of {len(names_only)} bytes with NodeNames only" in error
                assert f"at most {NAMES_BODY_BYTES} bytes" in error
            r = await client.post("/scheduler/filter", content=full)
            assert r.status_code == 200, r.text[:200]
            answered = {n["metadata"]["name"] for n in r.json()["Nodes"]["items"]}
            assert {"n1", "n3"} <= answered <= {"n1", "n2", "n3"}, answered
        metrics = ext.metrics.render().decode()
        assert 'reason="too_large",status="413",verb="filter"} 1.0' in metrics
        assert 'reason="too_large",status="413",verb="prioritize"} 1.0' in metrics
    finally:
        await srv.close()
