#!/usr/bin/env python3
"""What the extender's cluster side adds to its own CPU per pod, in one process.

    .venv/bin/python -m benchmarks.cluster_side              # ~1 minute
    .venv/bin/python -m benchmarks.cluster_side --nodes 100 --pods 1000 --rounds 3

The placement benchmark's cost table (docs/benchmarks.md, "The extender's own share") has
loadwise's process at about 1.1 ms of CPU a pod above the null extender's at 500 nodes, and
the request path alone on loopback at 0.1 ms above it. This puts the rest of what the
extender does per pod beside its verbs, without HTTP and without a cluster, so the shares
can be told apart on a noisy machine (each round runs every configuration once, in turn):

- ``verbs``: an ``Extender`` with the fast path and a fresh load reading for every node;
  each pod (distinct, as in a burst) is filtered and prioritized over every node's name
  (``NodeNames``, kube-scheduler's cache-capable mode, as the role configures it);
- ``+watch``: the same with the pod watch (``ClusterWatch``, fed its events in-process):
  per pod, the binding to the favourite and two status updates (Pending, Running), each
  decoded from its JSON as the watch's thread does and applied as the loop does;
- ``+events``: the same with the Event recorder at its default rate (60 a minute), whose
  sends go nowhere; it holds 512 pods at most, so in a burst most notes are dropped.

It prints the median CPU per pod of each and its ratio to ``verbs``. A measurement, not a
test: the exit code is non-zero only when something is broken.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from typing import Any

import msgspec

from loadwise.extender import kubeobjects
from loadwise.extender.cluster import ClusterWatch
from loadwise.extender.config import load_settings
from loadwise.extender.events import EventRecorder
from loadwise.extender.model import LoadSnapshot, NodeLoad, ResourceLoad
from loadwise.extender.service import Extender
from loadwise.extender.wire import Node, Pod, decode_args
from loadwise.extender.wiring import RecordedPlacements, build_source

CONFIGS = ("verbs", "+watch", "+events")
_pod = msgspec.json.Decoder(Pod)


def _pods(pods: int, rng: random.Random) -> list[dict[str, Any]]:
    """Each pod's container (distinct pods, as in a burst; two shapes)."""
    shapes = [{"cpu": "100m", "memory": "128Mi"}, {"cpu": "250m", "memory": "384Mi"}]
    return [kubeobjects.container("app", requests=rng.choice(shapes)) for _ in range(pods)]


def _bodies(names: list[str], containers: list[dict[str, Any]]) -> list[bytes]:
    """One filter/prioritize body per pod."""
    return [
        json.dumps({"Pod": _pod_doc(i, c), "NodeNames": names}).encode()
        for i, c in enumerate(containers)
    ]


def _pod_doc(i: int, container: dict[str, Any], **status: Any) -> dict[str, Any]:
    return kubeobjects.pod(f"p{i}", uid=f"u{i}", containers=[container], **status)


def _updates(i: int, container: dict[str, Any], node: str) -> list[bytes]:
    """The pod watch's three updates of pod ``i`` bound to ``node``: the binding, then
    Pending and Running (what the API server sends; made before the clock starts)."""
    bound = _pod_doc(i, container, node_name=node)
    updates = [
        _pod_doc(i, container, node_name=node, phase=phase, scheduled_at="2026-11-27T00:00:00Z")
        for phase in ("Pending", "Running")
    ]
    return [json.dumps(doc).encode() for doc in (bound, *updates)]


async def _run(
    config: str,
    names: list[str],
    containers: list[dict[str, Any]],
    bodies: list[bytes],
    seed: int,
) -> float:
    """CPU seconds per pod for ``config``; ``bodies``: ``_bodies(names, containers)``."""
    rng = random.Random(seed)
    now = time.time()
    loads = {
        n: NodeLoad(ResourceLoad(rng.uniform(5, 40)), ResourceLoad(rng.uniform(5, 40)))
        for n in names
    }
    snap = LoadSnapshot("bench", now - 5, now, loads)
    settings = load_settings(None, {"source.kind": "file", "source.file": "/dev/null"})
    recorder = EventRecorder(lambda ns, ev: None, per_minute=60) if config == "+events" else None
    # the file source is never read: the snapshot is set in its place
    ext = Extender(settings, build_source(settings, api=None, cluster=None), recorder=recorder)
    ext.refresher.snapshot = snap
    nodes = [kubeobjects.node(n, cpu="4", memory="8Gi") for n in names]
    watch = None
    if config == "verbs":  # sizes from one full-Node request, as without a kubeconfig
        warm = {"Pod": kubeobjects.pod("warm"), "Nodes": {"items": nodes}}
        ext.prioritize(decode_args(json.dumps(warm).encode(), raw_nodes=False))
    else:
        watch = ClusterWatch(
            None,  # type: ignore[arg-type]  # never started: its events are applied below
            estimator=settings.estimator_args(),
            tlp=settings.tlp_args(),
            placements=ext.ledger if recorder is None else RecordedPlacements(ext.ledger, recorder),
        )
        watch._listed_nodes([msgspec.convert(n, Node) for n in nodes])
        watch._listed_pods([])
        ext.cluster = watch
    if recorder is not None:
        recorder.start()
    spent = 0.0
    for i, body in enumerate(bodies):
        t0 = time.process_time()
        ext.filter(decode_args(body))  # raw Nodes, as the server decodes a filter call
        answer = ext.prioritize_json(decode_args(body, raw_nodes=False))
        spent += time.process_time() - t0
        hosts = msgspec.json.decode(bytes(answer))
        top = max(h["Score"] for h in hosts)
        # kube-scheduler picks at random among its top scores (selectHost)
        chosen = rng.choice([h["Host"] for h in hosts if h["Score"] == top])
        if watch is not None:
            updates = _updates(i, containers[i], chosen)
            t0 = time.process_time()
            for raw in updates:
                watch._pod_event("MODIFIED", _pod.decode(raw))
            spent += time.process_time() - t0
        if i % 16 == 15:
            t0 = time.process_time()
            await asyncio.sleep(0)  # the recorder's task runs, as between requests
            spent += time.process_time() - t0
    if recorder is not None:
        await recorder.stop()
    return spent / len(bodies)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500, help="nodes (default 500)")
    parser.add_argument("--pods", type=int, default=2000, help="pods a round (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args(argv)
    names = [f"node-{i:04d}" for i in range(a.nodes)]
    containers = _pods(a.pods, random.Random(a.seed))
    bodies = _bodies(names, containers)
    spent: dict[str, list[float]] = {c: [] for c in CONFIGS}
    for r in range(a.rounds):
        for config in CONFIGS:
            spent[config].append(asyncio.run(_run(config, names, containers, bodies, a.seed + r)))
        print(
            f"round {r + 1}: " + ", ".join(f"{c} {spent[c][-1] * 1e3:.3f} ms" for c in CONFIGS),
            flush=True,
        )
    base = statistics.median(spent["verbs"])
    print(
        f"\n{a.nodes} nodes, {a.pods} pods a round, {a.rounds} rounds; CPU per pod, median (range)"
    )
    for c in CONFIGS:
        med = statistics.median(spent[c])
        print(
            f"  {c:8} {med * 1e3:.3f} ms ({min(spent[c]) * 1e3:.3f}-{max(spent[c]) * 1e3:.3f})"
            f"  {med / base:.2f}x verbs"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
