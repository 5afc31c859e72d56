"""``loadwise-extender``: run the scheduler extender.

The process serves until SIGTERM or SIGINT, then stops as Go's ``http.Server.Shutdown``
does: it closes its listeners (a new connection is refused), lets each request in
flight finish, a body still arriving included, for up to ``shutdown_grace_seconds``
(a second signal cuts the wait short), closes every connection and exits 0. Under
systemd (``Type=notify``) it reports READY=1 once it listens, WATCHDOG=1 while its
event loop runs (``extender/sdnotify.py``) and STOPPING=1 on the signal.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import textwrap
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from . import __version__
from .config import Settings, host_port, load_settings
from .exceptions import ConfigError, KubeError, LoadwiseError
from .metrics import Metrics
from .policies import POLICY_NAMES
from .tasks import cancel

__all__ = ["EXIT_CODES", "build_parser", "main", "overrides_from", "serve"]

# What ``loadwise-extender`` returns when it cannot start (docs/contracts.md).
EXIT_OK = 0
EXIT_CANNOT_SERVE = 1  # the listen address is taken or not ours; any other start failure
EXIT_CONFIG = 2  # ConfigError / PolicyError (argparse uses 2 for bad flags too)
EXIT_KUBE = 3  # KubeError: the kubeconfig cannot be loaded
EXIT_CODES = {
    EXIT_OK: "stopped by SIGTERM/SIGINT",
    EXIT_CANNOT_SERVE: "cannot serve on the listen address (or another start failure)",
    EXIT_CONFIG: "bad configuration or flags",
    EXIT_KUBE: "the kubeconfig cannot be loaded",
}

log = logging.getLogger("loadwise.extender")

DEFAULTS = Settings()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loadwise-extender",
        description=textwrap.fill(
            "A kube-scheduler HTTP extender that filters and scores nodes by their real load. "
            "Point a KubeSchedulerConfiguration extender at http://HOST:PORT/scheduler with "
            "filterVerb: filter, prioritizeVerb: prioritize."
        ),
        epilog="Flags override the config file. See docs/contracts.md for every config key.\n\n"
        "exit codes:\n" + "\n".join(f"  {code}  {what}" for code, what in EXIT_CODES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="FILE", help="YAML config file with all settings")
    p.add_argument(
        "--listen", metavar="HOST:PORT", help=f"address to serve on (default {DEFAULTS.listen})"
    )
    p.add_argument(
        "--policy", choices=POLICY_NAMES, help=f"scoring policy (default {DEFAULTS.policy})"
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--watcher-url", metavar="URL", help="load-watcher base URL; the extender GETs URL/watcher"
    )
    src.add_argument(
        "--load-file",
        metavar="FILE",
        help="a file holding a load-watcher /watcher JSON document, re-read when it changes",
    )
    src.add_argument(
        "--metrics-server",
        action="store_true",
        help="read NodeMetrics from metrics.k8s.io (needs --kubeconfig)",
    )
    src.add_argument(
        "--prometheus-url", metavar="URL", help="Prometheus base URL for instant queries"
    )
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig for watching nodes and pods, metrics-server and Events "
        "(optional: without it only full-Node requests are sized)",
    )
    p.add_argument(
        "--health-listen",
        metavar="HOST:PORT",
        help="also serve GET /healthz, /readyz and /metrics (nothing else) over plain HTTP here",
    )
    tls = p.add_argument_group(
        "mutual TLS", "all three together: serve HTTPS and accept only clients the CA signed"
    )
    tls.add_argument("--tls-cert-file", metavar="FILE", help="the server's certificate (PEM)")
    tls.add_argument("--tls-key-file", metavar="FILE", help="its private key (PEM)")
    tls.add_argument(
        "--tls-client-ca-file", metavar="FILE", help="CA that signs the scheduler's certificate"
    )
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"))
    p.add_argument(
        "--observe",
        action="store_true",
        help="observe only (mode: observe): score and explain in Events, but reject no "
        "node and answer equal priorities",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return p


def overrides_from(ns: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for flag, key in (
        ("listen", "listen"),
        ("health_listen", "health_listen"),
        ("policy", "policy"),
        ("kubeconfig", "kubeconfig"),
        ("log_level", "log_level"),
        ("tls_cert_file", "tls.cert_file"),
        ("tls_key_file", "tls.key_file"),
        ("tls_client_ca_file", "tls.client_ca_file"),
    ):
        if getattr(ns, flag) is not None:
            out[key] = getattr(ns, flag)
    if ns.observe:
        out["mode"] = "observe"
    if ns.watcher_url:
        out.update({"source.kind": "load-watcher", "source.url": ns.watcher_url})
    elif ns.load_file:
        out.update({"source.kind": "file", "source.file": ns.load_file})
    elif ns.metrics_server:
        out["source.kind"] = "metrics-server"
    elif ns.prometheus_url:
        out.update({"source.kind": "prometheus", "source.url": ns.prometheus_url})
    return out


# A warning at start when a certificate expires sooner: the role renews leaf
# certificates 30 days ahead (loadwise_extender_tls_renew_days), the alert fires at 14.
_EXPIRY_WARNING_DAYS = 14.0

# After the grace period, how long aiohttp may take to close what is left (it cancels
# the handlers still running once this is over).
_CLOSE_SECONDS = 1.0


async def serve(settings: Settings, environ: Mapping[str, str] | None = None) -> None:
    """Serve until SIGTERM/SIGINT, then stop gracefully (see the module docstring).
    ``environ`` holds systemd's NOTIFY_SOCKET and WATCHDOG_USEC (default: os.environ)."""
    from .certs import ca_not_after, not_after
    from .cluster import ClusterWatch
    from .listener import Listener, tls_context
    from .sdnotify import Notifier, keep_alive, watchdog_interval
    from .server import (
        HEADER_DEADLINE_SECONDS,
        ServerState,
        make_app,
        make_health_app,
        request_logger,
    )
    from .throttle import loop_exception_handler
    from .wiring import build_extender

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


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        settings = load_settings(ns.config, overrides_from(ns))
    except ConfigError as exc:
        print(f"loadwise-extender: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(serve(settings))
    except ConfigError as exc:  # a TLS file that cannot be used
        print(f"loadwise-extender: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except OSError as exc:
        where = settings.listen
        if settings.health_listen is not None:
            where += f" or {settings.health_listen}"
        print(f"loadwise-extender: cannot serve on {where}: {exc}", file=sys.stderr)
        return EXIT_CANNOT_SERVE
    except KubeError as exc:
        print(f"loadwise-extender: {exc}", file=sys.stderr)
        return EXIT_KUBE
    except LoadwiseError as exc:
        print(f"loadwise-extender: {exc}", file=sys.stderr)
        return EXIT_CANNOT_SERVE
    return EXIT_OK
