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
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from aiohttp import web
from prometheus_client import Histogram

from .exceptions import WireError
from .service import Extender
from .wire import ExtenderArgs, PrioritizeArgs, decode_args, encode

__all__ = ["EXTENDER_KEY", "make_app"]

log = logging.getLogger("loadwise.extender.server")

EXTENDER_KEY = web.AppKey("extender", Extender)
_JSON = "application/json"

A = TypeVar("A", ExtenderArgs, PrioritizeArgs)


def _error(status: int, message: str) -> web.Response:
    return web.Response(status=status, body=encode({"Error": message}), content_type=_JSON)


async def _read_body(request: web.Request, verb: str, ext: Extender) -> bytes:
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        ext.metrics.errors.labels(verb, "too_large").inc()
        raise
    if not body:
        raise WireError("empty request body; expected ExtenderArgs JSON")
    return body


def _filter_args(body: bytes) -> ExtenderArgs:
    return decode_args(body, raw_nodes=True)


def _prioritize_args(body: bytes) -> PrioritizeArgs:
    return decode_args(body, raw_nodes=False)


def _handler(
    verb: str,
    decode: Callable[[bytes], A],
    answer: Callable[[Extender, A], object],
    fallback: Callable[[Extender, A], object],
) -> Callable[[web.Request], Awaitable[web.Response]]:
    latency: Histogram | None = None

    async def handle(request: web.Request) -> web.Response:
        nonlocal latency
        ext = request.app[EXTENDER_KEY]
        if latency is None:
            latency = ext.metrics.request_seconds.labels(verb)
        started = time.perf_counter()
        try:
            args = decode(await _read_body(request, verb, ext))
        except WireError as exc:
            ext.metrics.errors.labels(verb, "bad_request").inc()
            return _error(400, str(exc))
        try:
            result = answer(ext, args)
        except WireError as exc:
            ext.metrics.errors.labels(verb, "bad_request").inc()
            return _error(400, str(exc))
        except Exception:
            # The fail-open boundary: whatever goes wrong in a decision, the scheduler
            # gets an answer that changes nothing, and the bug is logged and counted.
            log.exception("%s failed; answering fail-open", verb)
            ext.metrics.errors.labels(verb, "internal").inc()
            try:
                result = fallback(ext, args)
            except WireError as exc:
                return _error(400, str(exc))
        body = encode(result)
        latency.observe(time.perf_counter() - started)
        return web.Response(body=body, content_type=_JSON)

    handle.__name__ = f"handle_{verb}"
    return handle


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def _readyz(request: web.Request) -> web.Response:
    ready, why = request.app[EXTENDER_KEY].readiness()
    return web.Response(status=200 if ready else 503, text=why + "\n")


async def _metrics(request: web.Request) -> web.Response:
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
    app.router.add_post(
        "/scheduler/filter",
        _handler("filter", _filter_args, Extender.filter, Extender.fallback_filter),
    )
    app.router.add_post(
        "/scheduler/prioritize",
        _handler(
            "prioritize", _prioritize_args, Extender.prioritize_json, Extender.fallback_prioritize
        ),
    )
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    if manage_lifecycle:

        async def lifecycle(app: web.Application) -> AsyncIterator[None]:
            await ext.start()
            yield
            await ext.stop()

        app.cleanup_ctx.append(lifecycle)
    return app
