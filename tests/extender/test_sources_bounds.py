"""What a load source's answer may cost: ``source.max_response_bytes`` and
``source.max_nodes``.

The servers are real aiohttp servers on 127.0.0.1 playing whoever answers on the
source's address. The oversized answers are streamed from one small chunk written
again and again (or inflated from a small gzip stream), so the test holds little in
memory and tracemalloc around the fetch measures what the extender kept of them.
"""

from __future__ import annotations

import contextlib
import json
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from loadwise.extender.exceptions import SourceError
from loadwise.extender.model import NodeInfo
from loadwise.extender.sources import (
    LoadWatcherSource,
    PrometheusSource,
    parse_node_metrics,
    parse_vectors,
    parse_watcher,
)
from loadwise.extender.sources.http import CHUNK_BYTES

from .test_sources_wire import Start, Upstream, start  # noqa: F401 (a fixture)

MIB = 1024 * 1024
CHUNK = b'{"padding": "' + b"x" * (CHUNK_BYTES - 20) + b'"}\n'


@contextlib.asynccontextmanager
async def serving(handler: Any) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/watcher", handler)
    app.router.add_get("/api/v1/query", handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


async def endless(request: web.Request) -> web.StreamResponse:
    """256 MiB in chunked encoding, no length announced: only counting stops it."""
    response = web.StreamResponse()
    await response.prepare(request)
    with contextlib.suppress(ConnectionError):
        for _ in range(256 * MIB // len(CHUNK)):
            await response.write(CHUNK)
    return response


async def announced(request: web.Request) -> web.StreamResponse:
    """A Content-Length of 1 GiB; the body never comes."""
    response = web.StreamResponse()
    response.content_length = 1024 * MIB
    await response.prepare(request)
    with contextlib.suppress(ConnectionError):
        await response.write(CHUNK)
    return response


def _gzip_bomb() -> bytes:
    """64 MiB of JSON white space, gzipped to about 64 KiB (built a chunk at a time)."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    blank = b" " * MIB
    parts = [squeeze.compress(blank) for _ in range(64)]
    return b"".join([*parts, squeeze.flush()])


BOMB = _gzip_bomb()


async def bomb(request: web.Request) -> web.Response:
    return web.Response(
        body=BOMB, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
    )


def make(kind: str, url: str, max_bytes: int) -> LoadWatcherSource | PrometheusSource:
    if kind == "load-watcher":
        return LoadWatcherSource(url, timeout=30, max_bytes=max_bytes)
    return PrometheusSource(url, timeout=30, max_bytes=max_bytes)


@pytest.mark.parametrize("kind", ["load-watcher", "prometheus"])
@pytest.mark.parametrize("handler", [endless, announced, bomb], ids=lambda h: h.__name__)
async def test_an_answer_over_the_byte_cap_fails_naming_it_with_bounded_memory(
    kind: str, handler: Any
) -> None:
    async with serving(handler) as url:
        source = make(kind, url, max_bytes=MIB)
        try:
            tracemalloc.start()
            started = time.monotonic()
            try:
                with pytest.raises(SourceError) as raised:
                    await source.fetch()
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            took = time.monotonic() - started
        finally:
            await source.close()
    what = "load-watcher" if kind == "load-watcher" else "Prometheus"
    assert f"{what} response over 1 MiB (source.max_response_bytes)" in str(raised.value)
    # what was read before stopping, with aiohttp's buffers and the server's side (in this
    # process too): a few MiB, not the 64 or 256 MiB sent
    assert peak < 4 * MIB, peak
    assert took < 10  # stopped at the cap, not after reading the rest


@pytest.mark.parametrize("kind", ["load-watcher", "prometheus"])
async def test_an_answer_within_the_cap_is_read_whole(kind: str) -> None:
    up = Upstream(kind)
    server = TestServer(up.app(), host="127.0.0.1")
    await server.start_server()
    source = make(kind, str(server.make_url("")).rstrip("/"), max_bytes=1024)
    try:
        snapshot = await source.fetch()
    finally:
        await source.close()
        await server.close()
    assert sorted(snapshot.nodes) == ["a", "b", "c"]


def _watcher(count: int) -> bytes:
    nodes = {f"n{i}": {"metrics": [{"type": "CPU", "value": 10}]} for i in range(count)}
    end = int(time.time())
    return json.dumps({"window": {"end": end}, "data": {"NodeMetricsMap": nodes}}).encode()


def _vector(count: int) -> bytes:
    result = [
        {"metric": {"instance": f"n{i}"}, "value": [time.time(), "0.1"]} for i in range(count)
    ]
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    ).encode()


def test_each_decoder_refuses_more_nodes_than_the_cap_and_takes_the_cap_itself() -> None:
    assert len(parse_watcher(_watcher(10), max_nodes=10).nodes) == 10
    with pytest.raises(SourceError, match=r"names 11 nodes, over 10 \(source.max_nodes\)"):
        parse_watcher(_watcher(11), max_nodes=10)
    assert len(parse_vectors(_vector(10), _vector(10), "instance", max_nodes=10).nodes) == 10
    with pytest.raises(SourceError, match=r"names 11 nodes, over 10 \(source.max_nodes\)"):
        parse_vectors(_vector(10), _vector(11), "instance", max_nodes=10)
    items = [
        {"metadata": {"name": f"n{i}"}, "timestamp": "", "usage": {"cpu": "1", "memory": "1Gi"}}
        for i in range(11)
    ]
    infos = {f"n{i}": NodeInfo(f"n{i}", 4000, 8 * 2**30) for i in range(11)}
    body = json.dumps({"items": items}).encode()
    assert len(parse_node_metrics(body, infos, max_nodes=11).nodes) == 11
    with pytest.raises(SourceError, match=r"NodeMetricsList names 11 nodes, over 10"):
        parse_node_metrics(body, infos, max_nodes=10)


@pytest.mark.parametrize("kind", ["load-watcher", "prometheus"])
async def test_the_caps_reach_the_source_from_the_config(start: Start, kind: str) -> None:  # noqa: F811
    up = Upstream(kind)
    up.tokens = {f"node-{i}": ("1", "1") for i in range(6)}
    served = await start(up.app(), **{"source.kind": kind, "source.max_nodes": 5})
    await served.readyz("names 6 nodes, over 5 (source.max_nodes)", status=503)
    up.tokens = {f"node-{i}": ("1", "1") for i in range(40)}  # over 2 KiB in either shape
    served = await start(up.app(), **{"source.kind": kind, "source.max_response_bytes": 1024})
    await served.readyz("response over 1024 bytes (source.max_response_bytes)", status=503)


@pytest.mark.parametrize(
    ("kind", "default"),
    [("load-watcher", 6 * MIB), ("prometheus", 16 * MIB), ("metrics-server", 16 * MIB)],
)
def test_each_kind_of_source_has_its_own_default_byte_cap(kind: str, default: int) -> None:
    """load-watcher's nodes are the keys of one object, built before they can be counted:
    its default is 6 MiB (91 MiB to decode at worst), the others' 16 MiB, which their
    counting pass makes safe (benchmarks/source_decode_memory.py)."""
    from loadwise.extender.config import SourceConfig
    from loadwise.extender.sources.base import WATCHER_MAX_RESPONSE_BYTES

    assert SourceConfig(kind=kind).response_cap == default
    assert SourceConfig(kind=kind, max_response_bytes=2048).response_cap == 2048
    assert LoadWatcherSource("http://127.0.0.1:1")._http.max_bytes == WATCHER_MAX_RESPONSE_BYTES


@pytest.mark.parametrize("kind", ["load-watcher", "prometheus", "metrics-server"])
def test_the_pod_metrics_read_beside_any_source_keeps_16_mib(kind: str) -> None:
    """The PodMetrics list is counted before it is built whatever the node source
    (sources/pod_metrics.py), so load-watcher's smaller default does not shrink it; an
    operator's own cap applies to both."""
    from loadwise.extender.config import SourceConfig

    assert SourceConfig(kind=kind).pod_metrics_cap == 16 * MIB
    assert SourceConfig(kind=kind, max_response_bytes=2048).pod_metrics_cap == 2048
