"""`loadwise-tui`: parse flags, pick a source, run the app."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from .exceptions import LoadwiseTuiError
from .sources import ClusterSource

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

__all__ = ["main", "parse_args"]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="loadwise-tui",
        description="Live node load and pod placements, with the loadwise extender's reasons.",
    )
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"
    )
    parser.add_argument("--context", help="kubeconfig context (default: the current context)")
    parser.add_argument(
        "--refresh",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="metrics.k8s.io poll interval; PodMetrics every second poll (default: 15, "
        "metrics-server's own resolution)",
    )
    parser.add_argument(
        "--demo",
        nargs="?",
        const="",
        metavar="DIR",
        help="no cluster: show a recorded cluster directory, or a synthetic one if DIR is omitted",
    )
    args = parser.parse_args(argv)
    if args.refresh < 1:
        parser.error("--refresh must be at least 1 second")
    return args


def _source(args: argparse.Namespace) -> ClusterSource:
    """The source the flags ask for; raises `KubeconfigError` or `RecordedClusterError`."""
    if args.demo is not None:
        from .sources.recorded import RecordedCluster, RecordedSource
        from .sources.synthetic import synthetic_cluster

        cluster = (
            RecordedCluster.from_dir(args.demo)
            if args.demo
            else synthetic_cluster(nodes=24, pods=400, now=datetime.now(timezone.utc))
        )
        return RecordedSource(
            cluster,
            now=lambda: datetime.now(timezone.utc),
            description=f"demo {args.demo or 'synthetic'}",
        )
    from .sources.kubernetes import KubernetesSource, load_api_client

    api_client, context = load_api_client(args.kubeconfig, args.context)

    def reload() -> ApiClient:
        return load_api_client(args.kubeconfig, context)[0]

    return KubernetesSource(api_client, description=context, refresh=args.refresh, reload=reload)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the dashboard; returns the exit code (an error's `exit_code`, printed first)."""
    args = parse_args(argv)
    from .app import make_app

    try:
        source = _source(args)
    except LoadwiseTuiError as exc:
        print(f"loadwise-tui: {exc}", file=sys.stderr)
        return exc.exit_code
    make_app(source, refresh_seconds=args.refresh).run()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
