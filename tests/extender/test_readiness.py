"""/readyz while the node/pod watch is broken: 503 with the reason until the watch has
listed again, through the real Kubernetes client against a loopback API stand-in."""

from __future__ import annotations

import asyncio
import json

import httpx
from aiohttp import web
from aiohttp.test_utils import TestServer

from loadwise.extender.config import load_settings
from loadwise.extender.server import make_app
from loadwise.extender.wiring import build_extender

from .helpers import node_json
from .running import LOAD, watcher_document
from .test_cluster import kubeconfig, wait_for


class BreakableAPI:
    """Nodes and pods that list and watch until told to fail: then the node watch ends
    with an ERROR event (as an API server that lost etcd does) and lists answer 500."""

    def __init__(self) -> None:
        self.broken = asyncio.Event()
        self.closing = asyncio.Event()
        self.lists = {"nodes": 0, "pods": 0}

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1/nodes", self.nodes)
        app.router.add_get("/api/v1/pods", self.pods)
        return app

    def _list(self, what: str, items: list) -> web.Response:
        if self.broken.is_set():
            return web.json_response({"kind": "Status", "code": 500}, status=500)
        self.lists[what] += 1
        return web.json_response({"metadata": {"resourceVersion": "10"}, "items": items})

    async def nodes(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return self._list("nodes", [node_json(n) for n in LOAD])
        response = web.StreamResponse()
        await response.prepare(request)
        closing = asyncio.create_task(self.closing.wait())
        broken = asyncio.create_task(self.broken.wait())
        await asyncio.wait([closing, broken], return_when=asyncio.FIRST_COMPLETED)
        closing.cancel()
        broken.cancel()
        if self.broken.is_set():
            error = {"kind": "Status", "code": 500, "message": "etcdserver: request timed out"}
            await response.write(json.dumps({"type": "ERROR", "object": error}).encode() + b"\n")
        return response

    async def pods(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return self._list("pods", [])
        response = web.StreamResponse()
        await response.prepare(request)
        await self.closing.wait()
        return response


async def test_readyz_is_503_while_the_watch_is_broken_and_200_once_it_has_listed_again(
    tmp_path,
):
    api = BreakableAPI()
    api_server = TestServer(api.app(), host="127.0.0.1")
    await api_server.start_server()
    load = tmp_path / "watcher.json"
    load.write_text(watcher_document(LOAD))
    settings = load_settings(
        None,
        {
            "kubeconfig": str(kubeconfig(tmp_path, str(api_server.make_url("")).rstrip("/"))),
            "source.kind": "file",
            "source.file": str(load),
            "source.stale_after_seconds": 0,
            "events.enabled": False,
        },
    )
    ext = build_extender(settings)
    srv = TestServer(make_app(ext), host="127.0.0.1")
    await srv.start_server()
    try:
        async with httpx.AsyncClient(base_url=str(srv.make_url(""))) as client:
            status: list[httpx.Response] = []

            async def readyz() -> int:
                status[:] = [await client.get("/readyz")]
                return status[0].status_code

            async def becomes(code: int, what: str) -> None:
                for _ in range(300):
                    if await readyz() == code:
                        return
                    await asyncio.sleep(0.05)
                raise AssertionError(f"/readyz never {code} ({what}): {status[0].text}")

            await becomes(200, "synced")
            assert api.lists["nodes"] == 1
            api.broken.set()
            await becomes(503, "the node watch broke")
            text = status[0].text
            assert "node/pod watch not synced: nodes:" in text and "etcdserver" in text, text
            await asyncio.sleep(1.5)  # a retry or two, each failing to list
            assert await readyz() == 503 and api.lists["nodes"] == 1
            api.broken.clear()
            await becomes(200, "listed again")  # after the reflector's backoff (1 s, 2 s)
            assert api.lists["nodes"] == 2 and status[0].text.startswith("ok: 3 nodes")
            await wait_for(lambda: ext.cluster.synced, "synced")
    finally:
        api.closing.set()
        await srv.close()
        await api_server.close()
