"""`loadwise-tui`: parse flags, pick a source, run the app."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

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


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from .app import make_app

    if args.demo is not None:
        from datetime import UTC, datetime

        from .fake import FakeSource, RecordedCluster
        from .synthetic import synthetic_cluster

        now = datetime.now(UTC)
        cluster = (
            RecordedCluster.from_dir(args.demo)
            if args.demo
            else synthetic_cluster(nodes=24, pods=400, now=now)
        )
        source = FakeSource(
            cluster, now=lambda: datetime.now(UTC), description=f"demo {args.demo or 'synthetic'}"
        )
    else:
        from .kube import KubernetesSource, load_api_client

        try:
            api_client, context = load_api_client(args.kubeconfig, args.context)
        except Exception as exc:  # noqa: BLE001 - a bad kubeconfig is a usage error
            print(f"loadwise-tui: cannot load kubeconfig: {exc}", file=sys.stderr)
            return 2

        def reload() -> object:
            return load_api_client(args.kubeconfig, context)[0]

        source = KubernetesSource(
            api_client, description=context, refresh=args.refresh, reload=reload
        )
    make_app(source, refresh_seconds=args.refresh).run()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
