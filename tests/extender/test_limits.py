"""Bounded under load, over real HTTP on loopback: the body limit and its sizing, a body
over it refused before it is read, the cap on open connections, and fail-open answers
logged once a minute yet counted and reported by /readyz."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from extender.config import load_settings
from extender.listener import Listener
from extender.server import ServerState, make_app
from extender.service import Extender
from extender.sources import LoadFileSource

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
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, never answered
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
