"""``loadwise-extender``: run the scheduler extender."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import textwrap
from typing import Any

from aiohttp import web

from . import __version__
from .config import Settings, load_settings
from .exceptions import ConfigError, KubeError, LoadwiseError
from .policies import POLICY_NAMES

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
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"))
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return p


def overrides_from(ns: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for flag, key in (
        ("listen", "listen"),
        ("policy", "policy"),
        ("kubeconfig", "kubeconfig"),
        ("log_level", "log_level"),
    ):
        if getattr(ns, flag) is not None:
            out[key] = getattr(ns, flag)
    if ns.watcher_url:
        out.update({"source.kind": "load-watcher", "source.url": ns.watcher_url})
    elif ns.load_file:
        out.update({"source.kind": "file", "source.file": ns.load_file})
    elif ns.metrics_server:
        out["source.kind"] = "metrics-server"
    elif ns.prometheus_url:
        out.update({"source.kind": "prometheus", "source.url": ns.prometheus_url})
    return out


async def serve(settings: Settings) -> None:
    from .server import HEADER_DEADLINE_SECONDS, make_app
    from .wiring import build_extender

    ext = build_extender(settings)
    if not settings.kubeconfig:
        log.warning(
            "no kubeconfig: node sizes are known only from full-Node requests "
            "(nodeCacheCapable: false); with NodeNames alone, nodes are scored on "
            "percentages and a pod cannot be weighed against a node's size"
        )
    app = make_app(ext)
    runner = web.AppRunner(
        app, access_log=None, handle_signals=False, keepalive_timeout=HEADER_DEADLINE_SECONDS
    )
    await runner.setup()
    host, port = settings.host_port
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    log.info(
        "loadwise-extender %s serving on http://%s:%d (policy %s, source %s)",
        __version__,
        host,
        port,
        settings.policy,
        settings.source.kind,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping")
    await runner.cleanup()


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
    except OSError as exc:
        print(f"loadwise-extender: cannot serve on {settings.listen}: {exc}", file=sys.stderr)
        return EXIT_CANNOT_SERVE
    except KubeError as exc:
        print(f"loadwise-extender: {exc}", file=sys.stderr)
        return EXIT_KUBE
    except LoadwiseError as exc:
        print(f"loadwise-extender: {exc}", file=sys.stderr)
        return EXIT_CANNOT_SERVE
    return EXIT_OK
