"""The HTTP face of the extender (aiohttp).

Two rules shape every handler:

- Malformed input is the caller's problem: a 4xx with a message that names it
  (not JSON, no Pod, a wrong type at a JSON path, a body over the limit), and
  the server keeps serving.
- Our own failure must never block scheduling: an unexpected error inside a
  decision is logged and counted, and the answer falls back to "every node
  passes" (filter) or equal scores (prioritize).
"""

from __future__ import annotations

import logging
import time

from aiohttp import web

from .service import Extender
from .wire import WireError, decode_args, encode

__all__ = ["EXTENDER_KEY", "make_app"]

log = logging.getLogger("loadwise.extender.server")

EXTENDER_KEY = web.AppKey("extender", Extender)
_JSON = "application/json"


def _error(status: int, message: str) -> web.Response:
    return web.Response(status=status, body=encode({"Error": message}), content_type=_JSON)


async def _read_args(request: web.Request, verb: str, ext: Extender):  # type: ignore[no-untyped-def]
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        ext.metrics.errors.labels(verb, "too_large").inc()
        raise
    if not body:
        raise WireError("empty request body; expected ExtenderArgs JSON")
    return decode_args(body, raw_nodes=verb == "filter")


def _handler(verb: str):  # type: ignore[no-untyped-def]
    latency = None

    async def handle(request: web.Request) -> web.Response:
        nonlocal latency
        ext = request.app[EXTENDER_KEY]
        if latency is None:
            latency = ext.metrics.request_seconds.labels(verb)
        started = time.perf_counter()
        try:
            args = await _read_args(request, verb, ext)
        except WireError as exc:
            ext.metrics.errors.labels(verb, "bad_request").inc()
            return _error(400, str(exc))
        try:
            answer = ext.filter(args) if verb == "filter" else ext.prioritize(args)
        except WireError as exc:
            ext.metrics.errors.labels(verb, "bad_request").inc()
            return _error(400, str(exc))
        except Exception:
            log.exception("%s failed; answering fail-open", verb)
            ext.metrics.errors.labels(verb, "internal").inc()
            try:
                answer = (
                    ext.fallback_filter(args) if verb == "filter" else ext.fallback_prioritize(args)
                )
            except WireError as exc:
                return _error(400, str(exc))
        body = encode(answer)
        latency.observe(time.perf_counter() - started)
        return web.Response(body=body, content_type=_JSON)

    handle.__name__ = f"handle_{verb}"
    return handle


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    ready, why = request.app[EXTENDER_KEY].readiness()
    return web.Response(status=200 if ready else 503, text=why + "\n")


async def metrics(request: web.Request) -> web.Response:
    ext = request.app[EXTENDER_KEY]
    ext.update_gauges()
    return web.Response(
        body=ext.metrics.render(), headers={"Content-Type": "text/plain; version=0.0.4"}
    )


async def _not_found(request: web.Request) -> web.Response:
    return _error(404, f"no such endpoint: {request.method} {request.path}")


def make_app(ext: Extender, *, manage_lifecycle: bool = True) -> web.Application:
    app = web.Application(client_max_size=ext.settings.max_body_bytes)
    app[EXTENDER_KEY] = ext
    app.router.add_post("/scheduler/filter", _handler("filter"))
    app.router.add_post("/scheduler/prioritize", _handler("prioritize"))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    if manage_lifecycle:

        async def lifecycle(app: web.Application):  # type: ignore[no-untyped-def]
            await ext.start()
            yield
            await ext.stop()

        app.cleanup_ctx.append(lifecycle)
    return app
