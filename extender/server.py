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
starting (else 408 and the connection is closed). Bodies larger than
``Settings.body_limit`` are refused (413), by their Content-Length before any byte is
read. At most ``BODY_READS`` requests whose body is still arriving are served at once
(reading, answering, sending): another waits up to ``BODY_SLOT_SECONDS`` for a turn, then
gets 503. Until its turn aiohttp buffers at most 128 KiB of it (twice its 64 KiB
``read_bufsize``) and stops reading the socket, so memory is bounded by the turns, not
by the callers. For the header, serve with
``web.AppRunner(..., keepalive_timeout=HEADER_DEADLINE_SECONDS)``: aiohttp arms that
timer when a connection opens and after each answer, and closes a connection that
has not sent a whole request header by then (aiohttp web_protocol.py).
kube-scheduler gives an extender call 5 s in all unless ``httpTimeout`` says otherwise
(``DefaultExtenderTimeout``, k8s.io/kubernetes pkg/scheduler/extender.go), so 10 s for
each is generous for it.

Fail-open answers are logged with their traceback at most once a minute per verb and
exception type, counted in ``loadwise_extender_errors_total{kind="internal"}``, and
reported by ``/readyz`` while any happened in the last ``FAIL_OPEN_WINDOW_SECONDS``.

Stopping: ``ServerState`` counts the requests being answered; once ``stopping`` is set,
every answer closes its connection, and ``drain`` waits for the count to reach zero
(``extender/cli.py`` closes the listeners first, as Go's ``http.Server.Shutdown`` does).
``make_health_app`` serves only the read-only endpoints, for a plain-HTTP listener
beside a TLS one.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import msgspec
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from prometheus_client import Histogram

from .config import NAMES_BODY_BYTES
from .estimate import check_pod
from .exceptions import QuantityError, WireError
from .metrics import Metrics
from .service import Extender
from .throttle import LogThrottle
from .wire import ExtenderArgs, PrioritizeArgs, decode_args, encode

# asyncio.timeout is Python 3.11's; on 3.10 (Ubuntu 22.04's python3) the aio-libs package it
# came from, which aiohttp itself requires there. Either raises asyncio.TimeoutError, the
# builtin TimeoutError on 3.11 but a class of its own on 3.10, hence that name below.
if sys.version_info >= (3, 11):
    from asyncio import timeout
else:  # pragma: no cover
    from async_timeout import timeout

__all__ = [
    "BODY_DEADLINE_SECONDS",
    "BODY_READS",
    "BODY_SLOT_SECONDS",
    "EXTENDER_KEY",
    "FAIL_OPEN_WINDOW_SECONDS",
    "HEADER_DEADLINE_SECONDS",
    "MAX_REQUEST_NODES",
    "ServerState",
    "make_app",
    "make_health_app",
    "request_logger",
]

log = logging.getLogger("loadwise.extender.server")

_JSON = "application/json"
HEADER_DEADLINE_SECONDS = 10.0
BODY_DEADLINE_SECONDS = 10.0
# kube-scheduler runs one scheduling cycle at a time, and each makes its extender calls
# one after the other (filter, then prioritize; pkg/scheduler/schedule_one.go), so one
# scheduler sends one body at a time; a second scheduler (docs/ansible.md) a second.
# Two turns serve both. Each holds about three times its body at its peak (the body, the
# answer, as large for a filter of full Nodes, and asyncio's copy of what the caller has
# not read yet): benchmarks/memory.py measured 83 MB for 20 callers sending 4.125 MiB at
# once, and 106 MB with 7.25 MiB bodies (134 MB with four turns). A turn that does not
# come within a second is held by callers that are not a scheduler at work: answering
# 503 at once lets the scheduler go on (ignorable: true) or retry the pod, where waiting
# would stall its one scheduling cycle up to its 5 s httpTimeout.
BODY_READS = 2
BODY_SLOT_SECONDS = 1.0
FAIL_OPEN_WINDOW_SECONDS = 600.0
_LOG_CHARS = 300
# The most nodes one request may name or carry: twice the 5,000 nodes a Kubernetes cluster
# supports at most (kubernetes.io "Considerations for large clusters"), and kube-scheduler
# sends an extender only the nodes that passed its own filters, so a real request never
# comes near it. Without it a body of short names within the body limit (4.125 MiB
# without a kubeconfig) is a million strings: two such requests took 237 MB.
MAX_REQUEST_NODES = 10_000


_NULL = msgspec.Raw(b"null")


class _NamesOnly(msgspec.Struct):
    """What a body says before it is decoded: whether it carries names, not Nodes."""

    # Raw, not ``Raw | None``: msgspec reads that union as "null only" and refuses a list
    # of names, which left both checks below undone. An absent field is JSON null.
    node_names: msgspec.Raw = msgspec.field(default=_NULL, name="NodeNames")
    nodes: msgspec.Raw = msgspec.field(default=_NULL, name="Nodes")


_names_only = msgspec.json.Decoder(_NamesOnly)


def _is_null(raw: msgspec.Raw) -> bool:
    return bytes(raw).strip() == b"null"


def _check_size(body: bytes) -> None:
    """A body over the names-only limit must carry Nodes (then the body limit sized for
    full Nodes applies), and a list of names must not exceed ``MAX_REQUEST_NODES``: a
    scan that builds no object (about 1 ms a MiB) before the decode that builds one
    string per name. Only bodies over ``NAMES_BODY_BYTES`` are scanned: under it, the
    decode itself costs at most that many strings (well under 100 MB at its peak)."""
    if len(body) <= NAMES_BODY_BYTES:
        return
    try:
        head = _names_only.decode(body)
    except msgspec.DecodeError:
        return  # the decode says what is wrong
    if _is_null(head.nodes) and not _is_null(head.node_names):
        names = bytes(head.node_names).count(b'"') // 2
        if names > MAX_REQUEST_NODES:
            raise WireError(
                f"NodeNames lists {names} nodes; at most {MAX_REQUEST_NODES} are accepted "
                "(MAX_REQUEST_NODES, twice the largest cluster Kubernetes supports)",
                reason="too_many_nodes",
            )
        raise WireError(
            f"request body of {len(body)} bytes with NodeNames only: node names take at most "
            f"{NAMES_BODY_BYTES} bytes (5,000 names of 253 characters, the longest a DNS "
            "name may be, fit with room for the Pod)",
            reason="too_large",
            status=413,
        )


def _count_nodes(args: ExtenderArgs | PrioritizeArgs) -> None:
    names = len(args.node_names) if args.node_names is not None else 0
    nodes = len(args.nodes.items or ()) if args.nodes is not None else 0
    if max(names, nodes) > MAX_REQUEST_NODES:
        what = "NodeNames" if names > nodes else "Nodes.items"
        raise WireError(
            f"{what} holds {max(names, nodes)} nodes; at most {MAX_REQUEST_NODES} are accepted "
            "(MAX_REQUEST_NODES, twice the largest cluster Kubernetes supports)",
            reason="too_many_nodes",
        )


class _MalformedRequests(logging.Filter):
    """aiohttp logs a request it cannot parse at ERROR with its traceback ("Error handling
    request", aiohttp web_protocol.py handle_error): one per request, so a caller
    sending garbage fills the journal, and journald's rate limit then drops the
    extender's own lines. This counts each, and lets through one WARNING line a minute
    per kind of error, without the traceback. Other records pass unchanged."""

    def __init__(self, metrics: Metrics | None, interval: float) -> None:
        super().__init__()
        self._metrics = metrics
        self._throttle = LogThrottle(interval)

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return record.levelno >= logging.INFO
        if self._metrics is not None:
            self._metrics.client_errors.labels("other", "400", "malformed_http").inc()
        held = self._throttle.allow(type(exc).__name__)
        if held is None:
            return False
        peer = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
        text = str(exc).replace("\n", " ")[:_LOG_CHARS]
        record.msg = "malformed HTTP request from %s answered 400 (%s: %s)%s"
        record.args = (
            peer,
            type(exc).__name__,
            text,
            f" [{held} more since the last line]" if held else "",
        )
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text = None, None
        return True


def request_logger(
    metrics: Metrics | None, listener: str, *, interval: float = 60.0
) -> logging.Logger:
    """The logger to give aiohttp's request handler (``AppRunner(..., logger=...)``):
    malformed requests counted and logged without a traceback, once a minute per kind.
    A logger of its own per runner, so its counts go to that runner's metrics; its
    records go on to ``loadwise.extender.server``'s handlers."""
    logger = logging.Logger(f"loadwise.extender.http.{listener}", logging.DEBUG)
    logger.parent = log
    logger.addFilter(_MalformedRequests(metrics, interval))
    return logger


class _Recent:
    """How many times ``add`` was called in the last ``window`` seconds (counted in
    one-minute buckets, so memory stays bounded whatever the rate)."""

    def __init__(
        self, window: float, *, step: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window = window
        self._step = step
        self._clock = clock
        self._buckets: deque[list[int]] = deque()  # [bucket number, count], oldest first

    def _now(self) -> int:
        bucket = int(self._clock() // self._step)
        oldest = bucket - int(self.window // self._step)
        while self._buckets and self._buckets[0][0] <= oldest:
            self._buckets.popleft()
        return bucket

    def add(self) -> None:
        bucket = self._now()
        if self._buckets and self._buckets[-1][0] == bucket:
            self._buckets[-1][1] += 1
        else:
            self._buckets.append([bucket, 1])

    def count(self) -> int:
        self._now()
        return sum(count for _, count in self._buckets)


class ServerState:
    """What the extender's listeners share: the requests being answered (for a graceful
    stop) and the fail-open answers lately (for ``/readyz``)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.in_flight = 0
        self.stopping = False
        """Set when the process stops: each answer then closes its connection."""
        self.fail_open = _Recent(FAIL_OPEN_WINDOW_SECONDS, clock=clock)

    async def drain(self, grace: float, hurry: asyncio.Event | None = None) -> int:
        """Wait until no request is being answered, at most ``grace`` seconds (or until
        ``hurry`` is set); the number still in flight."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        # A request whose header arrived just before this starts its handler a few loop
        # turns later (aiohttp web_protocol.py runs each in a task of its own): let it.
        await asyncio.sleep(0.01)
        while self.in_flight and loop.time() < deadline:
            if hurry is not None and hurry.is_set():
                break
            await asyncio.sleep(0.01)
        return self.in_flight


@dataclass(frozen=True)
class _Limits:
    body_bytes: int
    body_why: str  # what the limit is sized for (Settings.body_limit_why)
    body_deadline: float
    reads: asyncio.Semaphore
    slot_wait: float


EXTENDER_KEY = web.AppKey("extender", Extender)
_THROTTLE_KEY = web.AppKey("client_error_log", LogThrottle)
_LIMITS_KEY = web.AppKey("limits", _Limits)
_STATE_KEY = web.AppKey("state", ServerState)

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
            message = _too_large(request.app[_LIMITS_KEY])
        else:
            message = exc.text or exc.reason
        return _refuse(request, exc.status, _HTTP_REASONS.get(exc.status, "http"), message)


@web.middleware
async def _track(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Count the request as in flight while it is answered; once stopping, close its
    connection after the answer (a keep-alive caller then reconnects elsewhere or later)."""
    state = request.app[_STATE_KEY]
    state.in_flight += 1
    try:
        response = await handler(request)
    finally:
        state.in_flight -= 1
    if state.stopping:
        response.force_close()
    return response


def _too_large(limits: _Limits) -> str:
    return f"request body larger than {limits.body_bytes} bytes ({limits.body_why})"


async def _read_all(request: web.Request, limit: int) -> bytes:
    """The body as it arrives, joined once at the end: ``request.read()`` grows one
    bytearray (a reallocation copies it each time it outgrows its room) and then copies
    it into bytes, up to three times the body at its peak; this holds twice."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.readany():
        size += len(chunk)
        if size > limit:
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=size)
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_body(request: web.Request) -> bytes:
    """The whole body, within the body deadline."""
    if request.content.is_eof():
        # The whole body is in already (a small one arrives with its header), so
        # read() cannot wait: no deadline timer to arm and cancel (~4 us a request).
        body = await request.read()
    else:
        limits = request.app[_LIMITS_KEY]
        deadline = limits.body_deadline
        try:
            async with timeout(deadline):
                body = await _read_all(request, limits.body_bytes)
        except asyncio.TimeoutError:
            raise WireError(
                f"request body not received within {deadline:g} s",
                reason="body_timeout",
                status=408,
            ) from None
    if not body:
        raise WireError("empty request body; expected ExtenderArgs JSON", reason="empty")
    return body


async def _take_turn(limits: _Limits) -> bool:
    """One of the ``BODY_READS`` turns, if one comes free within ``slot_wait``."""
    try:
        async with timeout(limits.slot_wait):
            await limits.reads.acquire()
    except asyncio.TimeoutError:
        return False
    return True


async def _send(request: web.Request, response: web.StreamResponse, deadline: float) -> None:
    """Send the answer now, within ``deadline``: a caller that does not read it has its
    connection closed rather than keep the answer (as large as the body, for a filter
    of full Nodes) in memory."""
    if request.app[_STATE_KEY].stopping:
        response.force_close()
    try:
        async with timeout(deadline):
            await response.prepare(request)
            await response.write_eof()
    except asyncio.TimeoutError:
        if request.transport is not None:
            request.transport.close()


def _busy(request: web.Request, verb: str) -> web.Response:
    """503: every turn to read a body stayed taken (counted as ``kind="busy"``)."""
    request.app[EXTENDER_KEY].metrics.errors.labels(verb, "busy").inc()
    limits = request.app[_LIMITS_KEY]
    held = request.app[_THROTTLE_KEY].allow(f"{verb}:busy")
    if held is not None:
        log.warning(
            "%s from %s answered 503: %d request bodies already arriving, none done within %g s%s",
            verb,
            request.remote,
            BODY_READS,
            limits.slot_wait,
            f" [{held} more busy answers since the last line]" if held else "",
        )
    return _error(503, f"busy: {BODY_READS} request bodies are arriving already; try again")


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
    _check_size(body)
    args = decode_args(body, raw_nodes=True)
    _count_nodes(args)
    return _checked(args)


def _prioritize_args(body: bytes) -> PrioritizeArgs:
    _check_size(body)
    args = decode_args(body, raw_nodes=False)
    _count_nodes(args)
    return _checked(args)


def _handler(
    verb: str,
    decode: Callable[[bytes], A],
    answer: Callable[[Extender, A], object],
    fallback: Callable[[Extender, A], object],
) -> Callable[[web.Request], Awaitable[web.Response]]:
    latency: Histogram | None = None

    def refuse(request: web.Request, exc: WireError) -> web.Response:
        return _refuse(request, exc.status, exc.reason, str(exc))

    async def respond(request: web.Request) -> web.Response:
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
        await ext.catch_up(args.pod)
        try:
            result = answer(ext, args)
        except WireError as exc:
            return refuse(request, exc)
        except Exception as exc:
            # The fail-open boundary: whatever goes wrong in a decision, the scheduler
            # gets an answer that changes nothing, and the bug is logged and counted.
            # One traceback a minute per verb and kind of error: a bug that fails every
            # request would otherwise log ~20 lines per pod.
            ext.metrics.errors.labels(verb, "internal").inc()
            request.app[_STATE_KEY].fail_open.add()
            held = request.app[_THROTTLE_KEY].allow(f"{verb}:internal:{type(exc).__name__}")
            if held is not None:
                log.exception(
                    "%s failed; answering fail-open%s",
                    verb,
                    f" [{held} more fail-open answers since the last line]" if held else "",
                )
            try:
                result = fallback(ext, args)
            except WireError as exc:
                return refuse(request, exc)
        body = encode(result)
        latency.observe(time.perf_counter() - started)
        return web.Response(body=body, content_type=_JSON)

    async def handle(request: web.Request) -> web.Response:
        if request.content.is_eof():  # the whole body is in already: no turn to take
            return await respond(request)
        limits = request.app[_LIMITS_KEY]
        size = request.content_length
        if size is not None and size > limits.body_bytes:
            # by its length, before a byte of it is read
            message = _too_large(limits)
            return await _hang_up(request, _refuse(request, 413, "too_large", message))
        if not await _take_turn(limits):
            return await _hang_up(request, _busy(request, verb))
        try:
            # The turn covers reading, answering and sending, so the bodies and answers
            # held at once are bounded by the turns.
            response = await respond(request)
            if not response.prepared:
                await _send(request, response, limits.body_deadline)
            return response
        finally:
            limits.reads.release()

    handle.__name__ = f"handle_{verb}"
    return handle


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def _readyz(request: web.Request) -> web.Response:
    ready, why = request.app[EXTENDER_KEY].readiness()
    failed = request.app[_STATE_KEY].fail_open.count()
    if failed:
        # Still ready: each such answer let scheduling go on, but without load-awareness.
        why += (
            f"; warning: {failed} fail-open answer{'s' if failed != 1 else ''} in the last "
            f"{FAIL_OPEN_WINDOW_SECONDS / 60:g} min (an internal error; see the log and "
            'loadwise_extender_errors_total{kind="internal"})'
        )
    return web.Response(status=200 if ready else 503, text=why + "\n")


async def _metrics(request: web.Request) -> web.Response:
    ext = request.app[EXTENDER_KEY]
    ext.update_gauges()
    return web.Response(
        body=ext.metrics.render(), headers={"Content-Type": "text/plain; version=0.0.4"}
    )


def _application(
    ext: Extender, state: ServerState | None, limits: _Limits, log_interval: float
) -> web.Application:
    app = web.Application(client_max_size=limits.body_bytes, middlewares=[_track, _json_errors])
    app[EXTENDER_KEY] = ext
    app[_THROTTLE_KEY] = LogThrottle(log_interval)
    app[_LIMITS_KEY] = limits
    app[_STATE_KEY] = state if state is not None else ServerState()
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    return app


def make_health_app(ext: Extender, state: ServerState | None = None) -> web.Application:
    """Only GET /healthz, /readyz and /metrics, none of the scheduler's verbs: for a
    plain-HTTP listener that probes and Prometheus reach without a client certificate.
    Share ``state`` with ``make_app`` so both report the same fail-open answers."""
    limits = _Limits(
        1024, "no request bodies here", BODY_DEADLINE_SECONDS, asyncio.Semaphore(1), 0.0
    )
    return _application(ext, state, limits, 60.0)


def make_app(
    ext: Extender,
    *,
    state: ServerState | None = None,
    manage_lifecycle: bool = True,
    body_deadline: float = BODY_DEADLINE_SECONDS,
    body_slot_wait: float = BODY_SLOT_SECONDS,
    log_interval: float = 60.0,
) -> web.Application:
    """The extender's aiohttp application; serve it with
    ``keepalive_timeout=HEADER_DEADLINE_SECONDS`` (see the module docstring)."""
    settings = ext.settings
    limits = _Limits(
        settings.body_limit,
        settings.body_limit_why,
        body_deadline,
        asyncio.Semaphore(BODY_READS),
        body_slot_wait,
    )
    app = _application(ext, state, limits, log_interval)
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
    if manage_lifecycle:

        async def lifecycle(app: web.Application) -> AsyncIterator[None]:
            await ext.start()
            yield
            await ext.stop()

        app.cleanup_ctx.append(lifecycle)
    return app
