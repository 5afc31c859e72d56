"""The server's life: build the extender, serve, stop.

The process serves until SIGTERM or SIGINT, then stops as Go's ``http.Server.Shutdown``
does: it closes its listeners (a new connection is refused), lets each request in
flight finish, a body still arriving included, for up to ``shutdown_grace_seconds``
(a second signal cuts the wait short), closes every connection and returns. Under
systemd (``Type=notify``) it reports READY=1 once it listens, WATCHDOG=1 while its
event loop runs (``extender/sdnotify.py``) and STOPPING=1 on the signal.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping

from aiohttp import web

from . import __version__
from .certs import ca_not_after, not_after
from .cluster import ClusterWatch
from .config import Settings, host_port
from .listener import Listener, tls_context
from .metrics import Metrics
from .sdnotify import Notifier, keep_alive, watchdog_interval
from .server import (
    HEADER_DEADLINE_SECONDS,
    ServerState,
    make_app,
    make_health_app,
    request_logger,
)
from .tasks import cancel
from .throttle import loop_exception_handler
from .wiring import build_extender

__all__ = ["serve"]

log = logging.getLogger("loadwise.extender")

# A warning at start when a certificate expires sooner: the role renews leaf
# certificates 30 days ahead (loadwise_extender_tls_renew_days), the alert fires at 14.
_EXPIRY_WARNING_DAYS = 14.0

# After the grace period, how long aiohttp may take to close what is left (it cancels
# the handlers still running once this is over).
_CLOSE_SECONDS = 1.0


async def serve(settings: Settings, environ: Mapping[str, str] | None = None) -> None:
    """Serve until SIGTERM/SIGINT, then stop gracefully (see the module docstring).
    ``environ`` holds systemd's NOTIFY_SOCKET and WATCHDOG_USEC (default: os.environ)."""
    env = os.environ if environ is None else environ
    ssl_context = tls_context(settings.tls) if settings.tls is not None else None
    ext = build_extender(settings)
    loop = asyncio.get_running_loop()
    # asyncio's default handler logs each report with a traceback; a caller provoking
    # them (failed accepts, broken transports) would fill the journal.
    loop.set_exception_handler(loop_exception_handler(log, ext.metrics.loop_errors.inc))
    if isinstance(ext.cluster, ClusterWatch):
        ext.cluster.on_bound = ext.metrics.pods_bound.inc
    if settings.tls is not None and ssl_context is not None:
        _certificate_expiry(ext.metrics, not_after(settings.tls.cert_file), "serving")
        _certificate_expiry(ext.metrics, ca_not_after(ssl_context), "client_ca")
        if settings.tls.client_names is None:
            log.warning(
                "tls.client_names is not set: any certificate %s signed is accepted; set it "
                "to the name in the scheduler's certificate",
                settings.tls.client_ca_file,
            )
    if not settings.kubeconfig:
        log.warning(
            "no kubeconfig: node sizes are known only from full-Node requests "
            "(nodeCacheCapable: false); with NodeNames alone, nodes are scored on "
            "percentages and a pod cannot be weighed against a node's size"
        )
    if ssl_context is None:
        log.warning(
            "no TLS (tls.cert_file, tls.key_file, tls.client_ca_file): any process that can "
            "connect to %s can call the extender and steer scheduling",
            settings.listen,
        )
    state = ServerState()
    apps = [make_app(ext, state=state)]
    if settings.health_listen is not None:
        apps.append(make_health_app(ext, state))
    names = ("scheduler", "health")
    runners = [
        web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            keepalive_timeout=HEADER_DEADLINE_SECONDS,
            shutdown_timeout=_CLOSE_SECONDS,
            logger=request_logger(ext.metrics, name),
        )
        for app, name in zip(apps, names, strict=False)
    ]
    addresses = [settings.host_port]
    if settings.health_listen is not None:
        addresses.append(host_port(settings.health_listen, "health_listen"))
    listeners = [
        Listener(
            runner,
            host,
            port,
            ssl_context=ssl_context if i == 0 else None,
            client_names=settings.tls.client_names if i == 0 and settings.tls else None,
            max_connections=settings.max_connections,
            on_refused=ext.metrics.connections_refused.inc,
            on_accepted=ext.metrics.connections.labels(names[i]).inc,
            on_failed=_count_failures(ext.metrics, names[i]),
            on_accept_error=ext.metrics.accept_errors.labels(names[i]).inc,
        )
        for i, (runner, (host, port)) in enumerate(zip(runners, addresses, strict=True))
    ]
    notifier = Notifier.from_environ(env)
    watchdog: asyncio.Task[None] | None = None
    stop, hurry = asyncio.Event(), asyncio.Event()

    def on_signal() -> None:
        (hurry if stop.is_set() else stop).set()

    # Before anything is announced: a signal right after READY=1 must stop gracefully.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    set_up: list[web.AppRunner] = []
    try:
        for runner in runners:
            await runner.setup()  # the first one starts the extender (make_app's lifecycle)
            set_up.append(runner)
        for listener in listeners:
            await listener.start()
        log.info(
            "loadwise-extender %s serving on %s (policy %s, source %s)",
            __version__,
            " and ".join(
                f"{listener.url}" + (" (health only)" if i else "")
                for i, listener in enumerate(listeners)
            ),
            settings.policy,
            settings.source.kind,
        )
        notifier.notify("READY=1", f"STATUS=serving on {listeners[0].url}")
        interval = watchdog_interval(env)
        if interval is not None and notifier.enabled:
            watchdog = asyncio.create_task(
                keep_alive(notifier, interval, lambda: ext.readiness()[1]), name="watchdog"
            )
        await stop.wait()
        notifier.notify("STOPPING=1")
        for listener in listeners:
            listener.close()
        state.stopping = True
        grace = settings.shutdown_grace_seconds
        log.info(
            "stopping: listeners closed; waiting up to %gs for %d request(s) in flight",
            grace,
            state.in_flight,
        )
        left = await state.drain(grace, hurry)
        if left:
            log.warning("stopping: %d request(s) still in flight; closing them", left)
    finally:
        for listener in listeners:
            listener.close()
        await cancel(watchdog)
        for runner in reversed(set_up):
            await runner.cleanup()
        notifier.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    log.info("stopped")


def _count_failures(metrics: Metrics, listener: str) -> Callable[[str], None]:
    def count(reason: str) -> None:
        metrics.handshake_failures.labels(listener, reason).inc()

    return count


def _certificate_expiry(metrics: Metrics, when: float | None, which: str) -> None:
    """Export ``which`` certificate's notAfter, and say at start if it is near or past."""
    if when is None:
        return
    metrics.certificate_expiry.labels(which).set(when)
    days = (when - time.time()) / 86400
    if days < 0:
        log.error(
            "the %s certificate expired %.0f days ago: the scheduler's calls fail their "
            "TLS handshake (renew: docs/ansible.md)",
            which,
            -days,
        )
    elif days < _EXPIRY_WARNING_DAYS:
        log.warning("the %s certificate expires in %.1f days (renew: docs/ansible.md)", which, days)
