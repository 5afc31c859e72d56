"""The HTTP face of the extender (aiohttp).

Two rules shape every handler:

- Malformed input is the caller's problem: a 4xx with ``{"Error": message}`` naming
  it (not JSON, not UTF-8, nested too deep, no Pod, a wrong type at a JSON path, an
  unusable quantity in the Pod, a body over the limit or too slow to arrive, an
  unknown path or method), logged at WARNING (at most one line per reason a
  minute: kube-scheduler never reads the body of a non-200 answer) and counted in
  ``loadwise_extender_client_errors_total``; the server keeps serving.
- Our own failure must never block scheduling: an unexpected error inside a
  decision is logged and counted as ``internal``, and the answer falls back to
  "every node passes" (filter) or equal scores (prioritize).

Slow clients: the body must arrive within ``body_deadline`` seconds of the handler
starting (else 408 and the connection is closed). For the header, serve with
``web.AppRunner(..., keepalive_timeout=HEADER_DEADLINE_SECONDS)``: aiohttp arms that
timer when a connection opens and after each answer, and closes a connection that
has not sent a whole request header by then (aiohttp web_protocol.py).
kube-scheduler gives an extender call 5 s in all unless ``httpTimeout`` says otherwise
(``DefaultExtenderTimeout``, k8s.io/kubernetes pkg/scheduler/extender.go), so 10 s for
each is generous for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import msgspec
from aiohttp import web
from prometheus_client import Histogram

from .estimate import check_pod
from .exceptions import QuantityError, WireError
from .service import Extender
from .throttle import LogThrottle
from .wire import ExtenderArgs, PrioritizeArgs, decode_args, encode

__all__ = [
    "BODY_DEADLINE_SECONDS",
    "EXTENDER_KEY",
    "HEADER_DEADLINE_SECONDS",
    "make_app",
]

log = logging.getLogger("loadwise.extender.server")

EXTENDER_KEY = web.AppKey("extender", Extender)
_THROTTLE_KEY = web.AppKey("client_error_log", LogThrottle)
_DEADLINE_KEY = web.AppKey("body_deadline", float)
_JSON = "application/json"
HEADER_DEADLINE_SECONDS = 10.0
BODY_DEADLINE_SECONDS = 10.0
_LOG_CHARS = 300

A = TypeVar("A", ExtenderArgs, PrioritizeArgs)

# aiohttp's own refusals, raised before or around a handler: status -> metrics reason
_HTTP_REASONS = {
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
}


def _error(status: int, message: str) -> web.Response:
    return web.Response(status=status, body=encode({"Error": message}), content_type=_JSON)


_VERBS = {"/scheduler/filter": "filter", "/scheduler/prioritize": "prioritize"}


def _verb(request: web.Request) -> str:
    """The ``verb`` label: bounded, whatever path a client makes up."""
    return _VERBS.get(request.path, "other")


def _refuse(request: web.Request, status: int, reason: str, message: str) -> web.Response:
    """Answer a client error: count it, log it (rate-limited), JSON body."""
    verb = _verb(request)
    request.app[EXTENDER_KEY].metrics.client_errors.labels(verb, str(status), reason).inc()
    held = request.app[_THROTTLE_KEY].allow(f"{verb}:{reason}")
    if held is not None:
        text = message if len(message) <= _LOG_CHARS else message[:_LOG_CHARS] + "..."
        log.warning(
            "%s %s from %s answered %d (%s): %s%s",
            request.method,
            request.path[:100],
            request.remote,
            status,
            reason,
            text,
            f" [{held} more {reason} answers since the last line]" if held else "",
        )
    return _error(status, message)


@web.middleware
async def _json_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """aiohttp's own 404/405/413 (and any other HTTP error it raises) as JSON."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 404:
            message = f"no such endpoint: {request.method} {request.path[:100]}"
        elif isinstance(exc, web.HTTPMethodNotAllowed):
            allowed = ", ".join(sorted(exc.allowed_methods))
            path = request.path[:100]
            message = f"method {request.method} not allowed on {path}; use {allowed}"
        elif exc.status == 413:
            limit = request.app[EXTENDER_KEY].settings.max_body_bytes
            message = f"request body larger than {limit} bytes"
        else:
            message = exc.text or exc.reason
        return _refuse(request, exc.status, _HTTP_REASONS.get(exc.status, "http"), message)


async def _read_body(request: web.Request) -> bytes:
    if request.content.is_eof():
        # The whole body is in already (a small one arrives with its header), so
        # read() cannot wait: no deadline timer to arm and cancel (~4 us a request).
        body = await request.read()
        if not body:
            raise WireError("empty request body; expected ExtenderArgs JSON", reason="empty")
        return body
    deadline = request.app[_DEADLINE_KEY]
    try:
        async with asyncio.timeout(deadline):
            body = await request.read()
    except TimeoutError:
        raise WireError(
            f"request body not received within {deadline:g} s", reason="body_timeout", status=408
        ) from None
    if not body:
        raise WireError("empty request body; expected ExtenderArgs JSON", reason="empty")
    return body


async def _hang_up(request: web.Request, response: web.Response) -> web.Response:
    """Send ``response`` and close the connection at once. Returned normally, aiohttp
    would keep reading the unread body for up to ``lingering_time`` (10 s) before
    closing, which is what a client trickling its body wants."""
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    if request.transport is not None:
        request.transport.close()  # asyncio flushes what is buffered, then closes
    return response


# Resources specs that passed check_pod, as JSON: a burst is many pods of one
# template, and checking one spec again costs ~5 us (parsing every quantity)
# against ~0.5 us to encode the key. Only specs that passed are kept.
_CHECKED_MAX = 256
_checked_specs: set[bytes] = set()
_spec_key = msgspec.json.Encoder()


def _checked(args: A) -> A:
    assert args.pod is not None  # decode_args refuses a request without one
    spec = args.pod.spec
    # every field check_pod reads (estimate.pod_amounts)
    key = _spec_key.encode((spec.containers, spec.initContainers, spec.overhead, spec.resources))
    if key in _checked_specs:
        return args
    try:
        check_pod(args.pod)
    except QuantityError as exc:
        raise WireError(str(exc), reason="bad_quantity") from None
    if len(_checked_specs) >= _CHECKED_MAX:
        _checked_specs.clear()
    _checked_specs.add(key)
    return args


def _filter_args(body: bytes) -> ExtenderArgs:
    return _checked(decode_args(body, raw_nodes=True))


def _prioritize_args(body: bytes) -> PrioritizeArgs:
    return _checked(decode_args(body, raw_nodes=False))


def _handler(
    verb: str,
    decode: Callable[[bytes], A],
    answer: Callable[[Extender, A], object],
    fallback: Callable[[Extender, A], object],
) -> Callable[[web.Request], Awaitable[web.Response]]:
    latency: Histogram | None = None

    def refuse(request: web.Request, exc: WireError) -> web.Response:
        return _refuse(request, exc.status, exc.reason, str(exc))

    async def handle(request: web.Request) -> web.Response:
        nonlocal latency
        ext = request.app[EXTENDER_KEY]
        if latency is None:
            latency = ext.metrics.request_seconds.labels(verb)
        started = time.perf_counter()
        try:
            args = decode(await _read_body(request))
        except WireError as exc:
            if exc.status == 408:
                return await _hang_up(request, refuse(request, exc))
            return refuse(request, exc)
        try:
            result = answer(ext, args)
        except WireError as exc:
            return refuse(request, exc)
        except Exception:
            # The fail-open boundary: whatever goes wrong in a decision, the scheduler
            # gets an answer that changes nothing, and the bug is logged and counted.
            log.exception("%s failed; answering fail-open", verb)
            ext.metrics.errors.labels(verb, "internal").inc()
            try:
                result = fallback(ext, args)
            except WireError as exc:
                return refuse(request, exc)
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


def make_app(
    ext: Extender,
    *,
    manage_lifecycle: bool = True,
    body_deadline: float = BODY_DEADLINE_SECONDS,
    log_interval: float = 60.0,
) -> web.Application:
    """The extender's aiohttp application; serve it with
    ``keepalive_timeout=HEADER_DEADLINE_SECONDS`` (see the module docstring)."""
    app = web.Application(client_max_size=ext.settings.max_body_bytes, middlewares=[_json_errors])
    app[EXTENDER_KEY] = ext
    app[_THROTTLE_KEY] = LogThrottle(log_interval)
    app[_DEADLINE_KEY] = body_deadline
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
