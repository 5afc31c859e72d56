"""``loadwise-extender``: parse the flags and the config, run the server
(``lifecycle.serve``), and map what stops it to an exit code (``EXIT_CODES``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import textwrap
from typing import Any

from . import __version__
from .config import Settings, load_settings
from .exceptions import ConfigError, KubeError, LoadwiseError
from .policies import POLICY_NAMES

__all__ = ["EXIT_CODES", "build_parser", "main", "overrides_from"]

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
    # Imported here: ``--help`` and a config error answer without loading the server.
    from .lifecycle import serve

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
