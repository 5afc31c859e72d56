"""Reads every kwok node's resource metrics once a second, so their CPU counters integrate.

kwok v0.8.0 grows a node's cumulative CPU only when its metrics are read, by the time since
the last read times the use of the pods on the node at this read
(pkg/kwok/server/metrics_resource_usage.go, ``nodeResourceCumulativeUsage``). Read only by
metrics-server every 15 s, the rate metrics-server derives is the use of the pods there at
its scrape: a pod gone a second before counts nothing, one placed a second before counts in
full. A real kubelet's counter integrates, so its rate over the 15 s holds a pod that left
or arrived within them in part, and the extender's accounting of pods in flight
(``extender/inflight.py``) is made for that. Read every second, kwok's counter integrates
too, to within a second.

Run by the lab as a process of its own (``components.start_kwok_clock``); it lists the nodes
kwok manages every few seconds and reads each one's
``/metrics/nodes/<node>/metrics/resource``. Only loopback: the API server and kwok the lab
started.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import time
import urllib.request
from pathlib import Path

# How often each node's counter is read: the error in a pod's share of a 15 s rate window.
READ_SECONDS = 1.0
# How often the node list is read again (nodes join and leave in some scenarios).
LIST_SECONDS = 5.0


def kwok_nodes(api: str, ctx: ssl.SSLContext, annotation: tuple[str, str]) -> list[str]:
    """The names of the nodes carrying kwok's management annotation."""
    with urllib.request.urlopen(f"{api}/api/v1/nodes", context=ctx, timeout=5) as resp:
        items = json.load(resp).get("items") or []
    key, value = annotation
    return [
        n["metadata"]["name"]
        for n in items
        if (n["metadata"].get("annotations") or {}).get(key) == value
    ]


def read_node(kwok: str, ctx: ssl.SSLContext, node: str) -> None:
    with urllib.request.urlopen(
        f"{kwok}/metrics/nodes/{node}/metrics/resource", context=ctx, timeout=5
    ) as resp:
        resp.read()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", required=True, help="the lab's API server URL")
    parser.add_argument("--kwok", required=True, help="kwok's server URL")
    parser.add_argument("--pki", required=True, type=Path, help="the lab's pki directory")
    parser.add_argument("--annotation", required=True, help="kwok's node annotation, key=value")
    args = parser.parse_args(argv)
    key, _, value = args.annotation.partition("=")
    api_ctx = ssl.create_default_context(cafile=str(args.pki / "ca.crt"))
    api_ctx.load_cert_chain(str(args.pki / "admin.crt"), str(args.pki / "admin.key"))
    kwok_ctx = ssl.create_default_context(cafile=str(args.pki / "ca.crt"))
    nodes: list[str] = []
    listed = -LIST_SECONDS
    failing: set[str] = set()
    while True:
        started = time.monotonic()
        if started - listed >= LIST_SECONDS:
            try:
                nodes = kwok_nodes(args.api, api_ctx, (key, value))
                listed = started
            except OSError as exc:  # the API server restarting: keep the last list
                print(f"listing nodes failed: {exc}", file=sys.stderr, flush=True)
        for node in nodes:
            try:
                read_node(args.kwok, kwok_ctx, node)
                failing.discard(node)
            except OSError as exc:  # said once per node until it reads again
                if node not in failing:
                    print(f"reading {node} failed: {exc}", file=sys.stderr, flush=True)
                    failing.add(node)
        time.sleep(max(0.0, READ_SECONDS - (time.monotonic() - started)))


if __name__ == "__main__":
    raise SystemExit(main())
