"""A small stream in the shape of the placement benchmark's steady-mix, in-process.

Four 4-core / 8 GiB nodes (200m / 512 MiB background each) and three workloads whose
pods each live 60-180 s and are replaced as they go: "idle" requests 400m / 512 MiB and
uses 100m / 128 MiB, "exact" uses its request 250m / 384 MiB, "over" requests 100m /
128 MiB and uses 400m / 768 MiB (benchmarks/scenarios/steady-mix.yaml). Node readings
come every 60 s, each the mean of the last 60 s (as load-watcher gives them, so they lag
by their window); per-pod readings every 15 s (metrics-server's resolution) for pods
running 10 s or more. Every random choice comes from one seeded generator.

The extender contenders run the real ``Extender`` (its ledger, estimates and scoring)
with the real ``ClusterWatch`` fed the pods' bindings and deletions as watch events, on
a fake clock; the scheduler is modelled as taking the extender's top priority, ties at
random. The request-counting placer scores like NodeResourcesFit's LeastAllocated
(integer 0..100, mean of CPU and memory), ties at random, as kube-scheduler breaks them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from extender import kubeobjects
from extender.cluster import ClusterWatch
from extender.config import load_settings
from extender.model import LoadSnapshot, NodeLoad, ResourceLoad
from extender.podusage import PodUsage, PodUsageReading
from extender.service import Extender
from extender.wire import Node, Pod, decode_args

MI = 1024**2
GI = 1024**3
T0 = 1_800_000_000.0
NODES = [f"sm-{i}" for i in range(4)]
CPU_CAP, MEM_CAP = 4000, 8 * GI
BG_CPU, BG_MEM = 200, 512 * MI


@dataclass(frozen=True)
class Workload:
    name: str
    replicas: int
    request: tuple[int, int]  # millicores, bytes
    use: tuple[int, int]


WORKLOADS = (
    Workload("idle", 16, (400, 512 * MI), (100, 128 * MI)),
    Workload("exact", 12, (250, 384 * MI), (250, 384 * MI)),
    Workload("over", 14, (100, 128 * MI), (400, 768 * MI)),
)


@dataclass
class Running:
    workload: Workload
    name: str
    node: str
    start: float
    end: float
    pod: Pod


@dataclass
class Result:
    hottest_cpu: float
    """Mean over time, after the warm-up, of the hottest node's CPU (percent)."""
    largest_share: float
    """Mean over time and workloads of the largest share of a workload's pods on one node."""
    placed: int


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(w: Workload, name: str, node: str = "", at: float | None = None) -> Pod:
    obj = kubeobjects.pod(
        name,
        namespace="sim",
        uid=f"uid-{name}",
        containers=[
            kubeobjects.container(
                "c", requests={"cpu": f"{w.request[0]}m", "memory": str(w.request[1])}
            )
        ],
    )
    meta = obj["metadata"]
    meta["labels"] = {"app": w.name, "pod-template-hash": f"h-{w.name}"}
    meta["ownerReferences"] = [
        {"kind": "ReplicaSet", "name": w.name, "uid": f"rs-{w.name}", "controller": True}
    ]
    if node:
        obj["spec"]["nodeName"] = node
        obj["status"] = {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": _iso(at or T0)}
            ],
        }
    return msgspec.convert(obj, type=Pod)


class Placer:
    def place(self, w: Workload, name: str, pod: Pod, t: float) -> str:
        raise NotImplementedError

    def bound(self, run: Running, t: float) -> None:
        pass

    def deleted(self, run: Running, t: float) -> None:
        pass

    def node_reading(self, snap: LoadSnapshot, t: float) -> None:
        pass

    def pod_reading(self, reading: PodUsageReading, t: float) -> None:
        pass

    def tick(self, t: float) -> None:
        pass


@dataclass
class RequestPlacer(Placer):
    """NodeResourcesFit LeastAllocated on requests, integer scores, ties at random."""

    rng: random.Random
    requested: dict[str, list[int]] = field(default_factory=lambda: {n: [0, 0] for n in NODES})

    def place(self, w: Workload, name: str, pod: Pod, t: float) -> str:
        def score(node: str) -> int:
            cpu, mem = self.requested[node]
            c = (CPU_CAP - cpu - w.request[0]) * 100 // CPU_CAP
            m = (MEM_CAP - mem - w.request[1]) * 100 // MEM_CAP
            return (c + m) // 2

        scores = {n: score(n) for n in NODES}
        top = max(scores.values())
        return self.rng.choice([n for n in NODES if scores[n] == top])

    def bound(self, run: Running, t: float) -> None:
        entry = self.requested[run.node]
        entry[0] += run.workload.request[0]
        entry[1] += run.workload.request[1]

    def deleted(self, run: Running, t: float) -> None:
        entry = self.requested[run.node]
        entry[0] -= run.workload.request[0]
        entry[1] -= run.workload.request[1]


class _NoAPI:
    """The watch is fed events directly: nothing lists or watches."""


class ExtenderPlacer(Placer):
    """The real Extender and ClusterWatch on a fake clock; the scheduler takes the top
    priority, ties at random. ``pod_usage``: whether per-pod readings reach it."""

    def __init__(self, rng: random.Random, overrides: dict[str, Any], *, pod_usage: bool) -> None:
        self.rng = rng
        self.now = T0
        self.pod_usage = pod_usage
        settings = load_settings(
            None, {"source.kind": "file", "source.file": "/dev/null", **overrides}
        )
        clock: Callable[[], float] = lambda: self.now  # noqa: E731
        first = LoadSnapshot("sim", T0, T0, {})

        class _Source:
            name = "sim"

            async def fetch(self) -> LoadSnapshot:
                return first

            async def close(self) -> None:
                return None

        self.ext = Extender(settings, _Source(), clock=clock)
        self.watch = ClusterWatch(
            _NoAPI(),  # type: ignore[arg-type]
            estimator=self.ext.estimator,
            tlp=self.ext.tlp,
            placements=self.ext.ledger,
            inflight=self.ext.inflight,
            clock=clock,
        )
        self.ext.cluster = self.watch
        nodes = [
            msgspec.convert(kubeobjects.node(n, cpu="4", memory="8Gi"), type=Node) for n in NODES
        ]
        self.watch._listed_nodes(nodes)
        self.watch._listed_pods([])

    def place(self, w: Workload, name: str, pod: Pod, t: float) -> str:
        self.now = t
        args = decode_args(
            json.dumps({"Pod": msgspec.to_builtins(pod), "NodeNames": NODES}).encode()
        )
        hosts = self.ext.prioritize(args)
        top = max(h.score for h in hosts)
        return self.rng.choice([h.host for h in hosts if h.score == top])

    def bound(self, run: Running, t: float) -> None:
        self.now = t
        self.watch._pod_event("ADDED", run.pod)

    def deleted(self, run: Running, t: float) -> None:
        self.now = t
        self.watch._pod_event("DELETED", run.pod)

    def node_reading(self, snap: LoadSnapshot, t: float) -> None:
        self.now = t
        self.ext.refresher.snapshot = snap

    def pod_reading(self, reading: PodUsageReading, t: float) -> None:
        self.now = t
        if self.pod_usage:
            self.ext.inflight.take(reading)

    def tick(self, t: float) -> None:
        self.now = t
        self.ext.housekeep()


def run(
    placer: Placer,
    seed: int,
    *,
    duration: float = 600.0,
    warmup: float = 120.0,
) -> Result:
    """One run of the stream (arrivals, lifetimes and order from ``seed`` alone)."""
    rng = random.Random(seed)
    running: dict[str, Running] = {}
    arrivals: list[tuple[float, Workload]] = []
    for w in WORKLOADS:  # the first replicas arrive at 0.25 a second per workload
        arrivals += [(4.0 * i + rng.random(), w) for i in range(w.replicas)]
    arrivals.sort(key=lambda a: a[0])
    counter = 0
    samples: dict[str, list[tuple[float, float]]] = {n: [] for n in NODES}
    hottest: list[float] = []
    shares: list[float] = []
    placed = 0
    for step in range(int(duration) + 1):
        t = T0 + step
        # departures due, each replaced by a new pod of its workload
        for key in [k for k, r in running.items() if r.end <= t]:
            gone = running.pop(key)
            placer.deleted(gone, t)
            arrivals.append((float(step), gone.workload))
        due = [a for a in arrivals if a[0] <= step]
        arrivals = [a for a in arrivals if a[0] > step]
        for _, w in due:
            counter += 1
            name = f"{w.name}-{counter}"
            node = placer.place(w, name, _pod(w, name), t)
            life = rng.uniform(60.0, 180.0)
            run_ = Running(w, name, node, t, t + life, _pod(w, name, node, t))
            running[name] = run_
            placer.bound(run_, t)
            placed += 1
        # the truth, each second
        use = {n: [BG_CPU, BG_MEM] for n in NODES}
        for r in running.values():
            use[r.node][0] += r.workload.use[0]
            use[r.node][1] += r.workload.use[1]
        for n in NODES:
            samples[n].append((100.0 * use[n][0] / CPU_CAP, 100.0 * use[n][1] / MEM_CAP))
            del samples[n][:-60]
        if step >= warmup:
            hottest.append(max(100.0 * use[n][0] / CPU_CAP for n in NODES))
            for w in WORKLOADS:
                mine = [r.node for r in running.values() if r.workload is w]
                if len(mine) >= len(NODES):
                    shares.append(max(mine.count(n) for n in NODES) / len(mine))
        if step and step % 60 == 0:  # a node reading: the mean of the last 60 s
            loads = {
                n: NodeLoad(
                    ResourceLoad(sum(c for c, _ in samples[n]) / len(samples[n])),
                    ResourceLoad(sum(m for _, m in samples[n]) / len(samples[n])),
                )
                for n in NODES
            }
            placer.node_reading(LoadSnapshot("sim", t, t, loads, settle_seconds=60.0), t)
        if step % 15 == 0:
            pods = {
                f"sim/{r.name}": PodUsage(float(r.workload.use[0]), float(r.workload.use[1]), t)
                for r in running.values()
                if t - r.start >= 10.0
            }
            placer.pod_reading(PodUsageReading(pods, {}, t), t)
        if step % 5 == 0:
            placer.tick(t)
    return Result(sum(hottest) / len(hottest), sum(shares) / len(shares), placed)


OLD = {"estimator.delta": False, "estimator.spread_weight": 0.0, "estimator.pod_usage": False}


def request_placer(seed: int) -> Placer:
    return RequestPlacer(random.Random(seed * 7919 + 1))


def old_extender(seed: int) -> Placer:
    return ExtenderPlacer(random.Random(seed * 7919 + 2), OLD, pod_usage=False)


def new_extender(seed: int, **overrides: Any) -> Placer:
    # with the spreading term, which is off by default (extender/config.py, spread_weight)
    settings = {"estimator.spread_weight": 1.0, **overrides}
    return ExtenderPlacer(random.Random(seed * 7919 + 3), settings, pod_usage=True)
