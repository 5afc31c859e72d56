"""Streams of pods that come and go, placed in-process with the lab's timing.

A stream is a set of nodes (any sizes, each with a background use no pod requests) and
workloads whose pods each live a drawn time and are replaced as they go (the placement
benchmark's steady scenarios, benchmarks/scenarios/steady-*.yaml). ``STEADY_MIX`` is
steady-mix; ``heterogeneous(seed)`` draws another: mixed node sizes, backgrounds, use over
request from 0.2 to 6, and use that drifts over the run.

What reaches the contenders lags as in the lab (lab/components.py, contenders.py,
extender/sources/watcher.py): metrics-server scrapes every 15 s, a node's CPU the mean use
of its pods over the 15 s before the scrape, as a real kubelet and the lab's kwok nodes
(read every second by lab/kwokclock.py) report it (``run``'s ``cpu=INSTANT``: the use at
the scrape, as kwok reports it when read only then), its memory the instant's; a pod's use
shows from its second scrape (a CPU rate needs two samples). load-watcher collects
metrics-server's latest every 60 s (its ``window.end``); the extender reads load-watcher
every 15 s (REFRESH, the role's default) and PodMetrics every 15 s. With
``run(source=METRICS_SERVER)`` it reads metrics.k8s.io instead, as the role installs it:
every REFRESH, the last scrape's figures stamped with the scrape's time. Every phase is drawn
from the seed, by a generator of its own (so a period's change leaves the arrivals alone).

The scheduler is kube-scheduler's default profile on these nodes: NodeResourcesFit
(LeastAllocated on requests, weight 1), NodeResourcesBalancedAllocation (weight 1) and
PodTopologySpread (weight 2, the system default constraint on ``kubernetes.io/hostname``,
maxSkew 3, ScheduleAnyway: each ReplicaSet's pods spread), plus, for the extender
contenders, the extender's 0..10 priority x its weight 10 x 10 (MaxNodeScore /
MaxExtenderPriority, pkg/scheduler/schedule_one.go); the highest total wins, ties at random.
The other default plugins score every node alike here. ``RequestPlacer`` is that scheduler
alone: the stock contender.

The extender contenders run the real ``Extender`` (its ledger, estimates, scoring and
decision records) with the real ``ClusterWatch`` fed the bindings and deletions as watch
events, on a fake clock. Every random choice comes from the seed.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import msgspec

from benchmarks.placement.generator import DURATION as GENERATED_SECONDS
from benchmarks.placement.generator import generate
from benchmarks.placement.measures import HOT_THRESHOLD
from benchmarks.placement.scenario import SCENARIOS_DIR, Scenario
from benchmarks.placement.scenario import load as load_scenario
from loadwise.extender import kubeobjects
from loadwise.extender.cluster import ClusterWatch
from loadwise.extender.config import load_settings
from loadwise.extender.model import LoadSnapshot, NodeLoad, ResourceLoad
from loadwise.extender.podusage import PodUsage, PodUsageReading
from loadwise.extender.service import Extender
from loadwise.extender.wire import Node, Pod, decode_args

MI = 1024**2
GI = 1024**3
T0 = 1_800_000_000.0
SCRAPE = 15.0  # metrics-server --metric-resolution
COLLECT = 60.0  # load-watcher's collection period
REFRESH = 15.0  # the extender's source.refresh_seconds
POD_POLL = 15.0  # estimator.pod_usage_seconds
SETTLE = 45.0  # extender/sources/watcher.py LATEST_SETTLE_SECONDS
EXTENDER_WEIGHT = 10  # the role's loadwise_scheduler_config_weight
PTS_WEIGHT = 2
PTS_MAX_SKEW = 3
METRICS_SERVER_SETTLE = 30.0  # extender/sources/metrics_server.py
LOAD_WATCHER = "load-watcher"  # run(source=...): load-watcher's document, collected every 60 s
METRICS_SERVER = "metrics-server"  # NodeMetrics, each scrape's as it is taken (the role's default)
INSTANT = "instant"  # run(cpu=...): kwok's nodes read only at the scrapes
MEAN = "mean"  # a real kubelet's, and the lab's kwok nodes read every second


@dataclass(frozen=True)
class SimNode:
    name: str
    cpu: int  # millicores
    memory: int  # bytes
    background: tuple[int, int] = (200, 512 * MI)


@dataclass(frozen=True)
class Workload:
    name: str
    replicas: int
    request: tuple[int, int]  # millicores, bytes
    use: tuple[int, int]
    rate: float = 0.25  # first replicas per second
    life: tuple[float, float] = (60.0, 180.0)
    drift: float = 0.0
    """A pod created at the end of the run uses (1 + drift) x ``use``; linear in between."""
    limits: tuple[int, int] | None = None
    """millicores, bytes: the pods' limits, which the request rule estimates from."""
    bare: bool = False
    """Pods without a controller (the placement benchmark's one-shot scenarios): no
    ownerReference, so no system default PodTopologySpread; the extender takes pods of one
    template for one workload."""

    def use_at(self, elapsed: float, duration: float) -> tuple[int, int]:
        f = 1.0 + self.drift * min(1.0, elapsed / duration)
        return int(self.use[0] * f), int(self.use[1] * f)


@dataclass(frozen=True)
class Stream:
    name: str
    nodes: tuple[SimNode, ...]
    workloads: tuple[Workload, ...]
    changes: tuple[tuple[float, str, int], ...] = ()
    """(second, node, memory background from then on): a background that comes and goes,
    as the placement benchmark's ``steady.changes``."""


STEADY_MIX = Stream(
    "steady-mix",
    tuple(SimNode(f"sm-{i}", 4000, 8 * GI) for i in range(4)),
    (
        Workload("idle", 16, (400, 512 * MI), (100, 128 * MI)),
        Workload("exact", 12, (250, 384 * MI), (250, 384 * MI)),
        Workload("over", 14, (100, 128 * MI), (400, 768 * MI)),
    ),
)


STEADY_HOG = Stream(
    "steady-hog",
    tuple(SimNode(f"sh-{i}", 4000, 8 * GI) for i in range(1, 5)),
    (Workload("web", 28, (300, 256 * MI), (150, 512 * MI), rate=0.5),),
    ((60.0, "sh-4", 6 * GI), (240.0, "sh-4", 512 * MI)),
)
"""benchmarks/scenarios/steady-hog.yaml: a memory hog on one node from 60 s to 240 s."""


def heterogeneous(seed: int) -> Stream:
    """A stream drawn from ``seed``: 4-6 nodes of 2, 4 or 8 cores (2 GiB a core, as
    steady-mix's), each with a background of 0-30 % of its CPU and 5-40 % of its memory;
    3-5 workloads whose pods use 0.2-6 times their request, some drifting by up to +-40 %
    over the run; the replicas sized so pods and backgrounds use about 65 % of the
    cluster's CPU (capped at 40 a workload, so a stream can be heavier than that)."""
    rng = random.Random(seed * 104_729 + 17)
    nodes = []
    for i in range(rng.randint(4, 6)):
        cores = rng.choice((2, 4, 4, 8))
        bg = (
            int(cores * 1000 * rng.uniform(0.0, 0.3)),
            int(2 * cores * GI * rng.uniform(0.05, 0.4)),
        )
        nodes.append(SimNode(f"het-{i}", cores * 1000, 2 * cores * GI, bg))
    total_cpu = sum(n.cpu for n in nodes)
    total_mem = sum(n.memory for n in nodes)
    room_cpu = 0.65 * total_cpu - sum(n.background[0] for n in nodes)
    room_mem = 0.6 * total_mem - sum(n.background[1] for n in nodes)
    kinds = rng.randint(3, 5)
    workloads = []
    for k in range(kinds):
        req = (rng.choice((100, 200, 250, 400, 500)), rng.choice((128, 256, 512)) * MI)
        ratio = math.exp(rng.uniform(math.log(0.2), math.log(6.0)))
        mem_ratio = math.exp(rng.uniform(math.log(0.3), math.log(3.0)))
        use = (max(10, int(req[0] * ratio)), max(16 * MI, int(req[1] * mem_ratio)))
        drift = rng.choice((0.0, 0.0, rng.uniform(-0.4, 0.4)))
        per = room_cpu / kinds
        replicas = max(2, min(int(per / use[0]), int(room_mem / kinds / use[1]), 40))
        workloads.append(
            Workload(f"w{k}", replicas, req, use, rng.choice((0.25, 0.5)), drift=drift)
        )
    return Stream(f"het-{seed}", tuple(nodes), tuple(workloads))


def equal_sizes(seed: int) -> Stream:
    """``heterogeneous(seed)`` with every node the median node's size (backgrounds scaled
    with it) and the replicas scaled by the change in total CPU: the class where the
    scores' trade between CPU and memory, not the nodes' sizes, decides."""
    drawn = heterogeneous(seed)
    cores = [n.cpu for n in drawn.nodes]
    size = sorted(cores)[len(cores) // 2]
    nodes = tuple(
        replace(
            n,
            cpu=size,
            memory=2 * size // 1000 * GI,
            background=(int(n.background[0] * size / n.cpu), int(n.background[1] * size / n.cpu)),
        )
        for n in drawn.nodes
    )
    total, before = sum(n.cpu for n in nodes), sum(cores)
    workloads = tuple(
        replace(w, replicas=max(2, int(w.replicas * total / before))) for w in drawn.workloads
    )
    return Stream(f"eq-{seed}", nodes, workloads)


def hogged(seed: int) -> Stream:
    """``equal_sizes(seed)`` with a memory hog: on one node drawn from ``seed`` something
    no pod requests holds 65-80 % of the memory (a database outside Kubernetes, a leaking
    daemon), its CPU background kept. The class of the one-shot hog scenario
    (benchmarks/scenarios/hog.yaml) as a stream: the term that keeps the hottest CPU
    cool must not buy it with pods beside the hog."""
    drawn = equal_sizes(seed)
    rng = random.Random(seed * 7_919 + 5)
    at = rng.randrange(len(drawn.nodes))
    nodes = list(drawn.nodes)
    hog = nodes[at]
    nodes[at] = replace(
        hog, background=(hog.background[0], int(hog.memory * rng.uniform(0.65, 0.8)))
    )
    return Stream(f"hog-{seed}", tuple(nodes), drawn.workloads)


def generated(seed: int) -> Stream:
    """The placement benchmark's generated scenario gen-<seed>-1
    (benchmarks/placement/generator.py) as a stream: its nodes, their backgrounds as they
    start (the memory backgrounds that change during the lab's stream hold here), its
    workloads with their rates and lifetimes. The class the lab's generated reports judge,
    here in seconds instead of a lab's minutes. Without the workloads' limits, as the
    figures the simulator's classes were measured and judged with (tests/extender/
    test_steady_sim.py) were: with them the request rule reads the limits, as in the lab."""
    return from_scenario(generate(seed, 1).scenario, limits=False)


AT_ONCE = 30.0
"""Pods a second for a one-shot workload created all at once (the lab creates them 8
requests at a time)."""


def from_scenario(sc: Scenario, *, limits: bool = True) -> Stream:
    """A placement benchmark scenario as a stream: its nodes with their backgrounds as they
    start, its workloads with their requests, use, limits (``limits``), rates and lifetimes.
    A steady scenario's workload without a rate arrives at 0.25 a second and without a
    lifetime lives 60-180 s; a one-shot scenario's arrives at ``AT_ONCE`` and stays. Bare
    pods where the scenario's are (``Scenario.owned``)."""
    steady = sc.steady is not None
    nodes = tuple(
        SimNode(
            n.name,
            round(n.capacity.cpu * 1000),
            round(n.capacity.memory),
            (round(n.background.cpu * 1000), round(n.background.memory)),
        )
        for n in sc.nodes
    )
    workloads = tuple(
        Workload(
            w.name,
            w.replicas,
            (round(w.requests.cpu * 1000), round(w.requests.memory)),
            (round(w.usage.cpu * 1000), round(w.usage.memory)),
            w.rate or (0.25 if steady else AT_ONCE),
            w.lifetime or ((60.0, 180.0) if steady else (1e9, 1e9)),
            limits=(round(w.limits.cpu * 1000), round(w.limits.memory))
            if limits and w.limits is not None
            else None,
            bare=not sc.owned,
        )
        for w in sc.workloads
    )
    return Stream(sc.name, nodes, workloads)


ONE_SHOT = {
    name: from_scenario(load_scenario(SCENARIOS_DIR / f"{name}.yaml"))
    for name in ("strong-weak", "hog")
}
"""benchmarks/scenarios/strong-weak.yaml (48 bare pods at 2 a second, 5 nodes of two sizes)
and hog.yaml (30 bare pods at once beside a memory hog no pod requests): pods that stay."""
STRONG_WEAK, HOG = ONE_SHOT["strong-weak"], ONE_SHOT["hog"]


@dataclass
class Running:
    workload: Workload
    name: str
    node: str
    start: float
    end: float
    pod: Pod
    use: tuple[int, int]
    started: float = -math.inf
    """When its containers start and its use begins (``run``'s ``start_lag``); -inf: at
    the binding, with no container status to say so."""


@dataclass
class Result:
    hottest_cpu: float
    """Mean over time, after the warm-up, of the hottest node's CPU (percent)."""
    largest_share: float
    """Mean over time and workloads of the largest share of a workload's pods on one node."""
    placed: int
    hottest_cpu_p99: float = 0.0
    hottest_memory: float = 0.0
    above_80: int = 0
    """Seconds after the warm-up with some node's CPU above 80 %."""
    thirds: tuple[float, float] = (0.0, 0.0)
    """The hottest node's mean CPU over the first and the last third after the warm-up."""
    error: dict[str, float] = field(default_factory=dict)
    """Mean absolute error, in points of the node's capacity, of the extender's predicted
    use of the node a pod went to, against its true use ``lag`` seconds later (per
    resource: ``cpu@0``, ``memory@60``, ...); empty for the stock placer."""
    all_on_one: int = 0
    """Seconds after the warm-up with some workload's running pods (two or more, all its
    replicas) all on one node while another node would stay at or under ``HOT_THRESHOLD``
    in CPU and memory with one more of them (``_room``)."""
    bias: dict[int, float] = field(default_factory=dict)
    """Per minute of the run (its first second: 0, 60, ...), the mean signed error of the
    predicted CPU of the node a pod went to at its binding (points; above 0: over)."""
    top_share: float = 0.0
    """Mean over time of the largest share of any one workload's pods on one node (the
    placement benchmark's measure: steady_measures.mean_share)."""
    memory_over: int = 0
    """Seconds of the whole stream, warm-up included, with some node's memory demand (its
    background and its pods' use) above its capacity: on a real node the kubelet's eviction
    and the kernel's OOM killer, where kwok's nodes and this simulator only count."""


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(
    w: Workload,
    name: str,
    node: str = "",
    at: float | None = None,
    *,
    phase: str = "Running",
    started: float | None = None,
) -> Pod:
    obj = kubeobjects.pod(
        name,
        namespace="sim",
        uid=f"uid-{name}",
        containers=[
            kubeobjects.container(
                "c",
                requests={"cpu": f"{w.request[0]}m", "memory": str(w.request[1])},
                limits=None
                if w.limits is None
                else {"cpu": f"{w.limits[0]}m", "memory": str(w.limits[1])},
            )
        ],
    )
    meta = obj["metadata"]
    meta["labels"] = {"app": w.name}
    if not w.bare:
        meta["labels"]["pod-template-hash"] = f"h-{w.name}"
        meta["ownerReferences"] = [
            {"kind": "ReplicaSet", "name": w.name, "uid": f"rs-{w.name}", "controller": True}
        ]
    if node:
        obj["spec"]["nodeName"] = node
        obj["status"] = {
            "phase": phase,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": _iso(at or T0)}
            ],
        }
        if started is not None:
            obj["status"]["containerStatuses"] = [
                {"name": "c", "state": {"running": {"startedAt": _iso(started)}}}
            ]
    return msgspec.convert(obj, type=Pod)


@dataclass
class Scheduler:
    """kube-scheduler's own scores (see the module docstring) over its cache of requests."""

    nodes: tuple[SimNode, ...]
    requested: dict[str, list[int]] = field(default_factory=dict)
    owners: dict[str, dict[str, int]] = field(default_factory=dict)  # workload -> node -> pods

    def __post_init__(self) -> None:
        self.requested = {n.name: [0, 0] for n in self.nodes}

    def scores(self, w: Workload) -> dict[str, int]:
        out: dict[str, int] = {}
        counts = self.owners.get(w.name, {})
        raw = {}
        weight = math.log(len(self.nodes) + 2)
        for n in self.nodes:
            cpu, mem = self.requested[n.name]
            cpu, mem = cpu + w.request[0], mem + w.request[1]
            least = (
                max(0, n.cpu - cpu) * 100 // n.cpu + max(0, n.memory - mem) * 100 // n.memory
            ) // 2
            fc, fm = min(1.0, cpu / n.cpu), min(1.0, mem / n.memory)
            balanced = int((1 - abs(fc - fm) / 2) * 100)
            out[n.name] = least + balanced
            raw[n.name] = round(counts.get(n.name, 0) * weight + (PTS_MAX_SKEW - 1))
        if w.bare:  # the system default constraint selects a controller's pods only
            return out
        top, low = max(raw.values()), min(raw.values())
        for name, s in raw.items():
            spread = 100 if top == 0 else 100 * (top + low - s) // top
            out[name] += PTS_WEIGHT * spread
        return out

    def bound(self, run: Running) -> None:
        entry = self.requested[run.node]
        entry[0] += run.workload.request[0]
        entry[1] += run.workload.request[1]
        nodes = self.owners.setdefault(run.workload.name, {})
        nodes[run.node] = nodes.get(run.node, 0) + 1

    def deleted(self, run: Running) -> None:
        entry = self.requested[run.node]
        entry[0] -= run.workload.request[0]
        entry[1] -= run.workload.request[1]
        self.owners[run.workload.name][run.node] -= 1


class Placer:
    def __init__(self, stream: Stream, rng: random.Random) -> None:
        self.stream = stream
        self.rng = rng
        self.scheduler = Scheduler(stream.nodes)

    def extra(self, w: Workload, name: str, pod: Pod, t: float) -> dict[str, int]:
        """What the placer adds to the scheduler's own scores."""
        return {}

    def place(self, w: Workload, name: str, pod: Pod, t: float) -> str:
        scores = self.scheduler.scores(w)
        for node, more in self.extra(w, name, pod, t).items():
            scores[node] += more
        top = max(scores.values())
        return self.rng.choice([n.name for n in self.stream.nodes if scores[n.name] == top])

    def bound(self, run: Running, t: float) -> None:
        self.scheduler.bound(run)

    def deleted(self, run: Running, t: float) -> None:
        self.scheduler.deleted(run)

    def started(self, run: Running, t: float) -> None:
        """``run``'s containers started (``run``'s ``start_lag``): the watch sees it."""

    def node_reading(self, snap: LoadSnapshot, t: float) -> None:
        pass

    def pod_reading(self, reading: PodUsageReading, t: float) -> None:
        pass

    def tick(self, t: float) -> None:
        pass

    def decisions(self) -> list[dict[str, Any]]:
        return []


class RequestPlacer(Placer):
    """Stock kube-scheduler: its own scores alone."""


class _NoAPI:
    """The watch is fed events directly: nothing lists or watches."""


class _Records:
    """The decision records, kept in memory (the extender writes them as JSON lines)."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any]) -> None:
        self.lines.append(record)

    def close(self) -> None:
        pass


class ExtenderPlacer(Placer):
    """The real Extender and ClusterWatch on a fake clock, its priorities added to the
    scheduler's scores. ``pod_usage``: whether per-pod readings reach it."""

    def __init__(
        self, stream: Stream, rng: random.Random, overrides: dict[str, Any], *, pod_usage: bool
    ) -> None:
        super().__init__(stream, rng)
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
        self.records = _Records()
        self.ext.decision_log = self.records
        self.watch = ClusterWatch(
            _NoAPI(),  # type: ignore[arg-type]
            estimator=self.ext.estimator,
            tlp=self.ext.tlp,
            placements=self.ext.ledger,
            inflight=self.ext.inflight,
            clock=clock,
        )
        self.ext.cluster = self.watch
        self.names = [n.name for n in stream.nodes]
        nodes = [
            msgspec.convert(
                kubeobjects.node(n.name, cpu=f"{n.cpu}m", memory=str(n.memory)), type=Node
            )
            for n in stream.nodes
        ]
        self.watch._listed_nodes(nodes)
        self.watch._listed_pods([])

    def extra(self, w: Workload, name: str, pod: Pod, t: float) -> dict[str, int]:
        self.now = t
        args = decode_args(
            json.dumps({"Pod": msgspec.to_builtins(pod), "NodeNames": self.names}).encode()
        )
        return {h.host: h.score * EXTENDER_WEIGHT * 10 for h in self.ext.prioritize(args)}

    def place(self, w: Workload, name: str, pod: Pod, t: float) -> str:
        node = super().place(w, name, pod, t)
        lines = self.records.lines
        if lines and lines[-1]["pod"] == f"sim/{name}":
            lines[-1]["bound"] = node  # the benchmark joins the records with the bindings
        return node

    def bound(self, run: Running, t: float) -> None:
        super().bound(run, t)
        self.now = t
        self.watch._pod_event("ADDED", run.pod)

    def deleted(self, run: Running, t: float) -> None:
        super().deleted(run, t)
        self.now = t
        self.watch._pod_event("DELETED", run.pod)

    def started(self, run: Running, t: float) -> None:
        self.now = t
        pod = _pod(run.workload, run.name, run.node, run.start, started=run.started)
        self.watch._pod_event("MODIFIED", pod)

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

    def decisions(self) -> list[dict[str, Any]]:
        return self.records.lines


def _room(node: SimNode, use: tuple[float, float], pod: tuple[int, int]) -> bool:
    """Whether ``node`` (at ``use``, percent) stays at or under the placement benchmark's
    room threshold (``measures.HOT_THRESHOLD``, as its ``steady_measures.piled``) in CPU
    and memory with ``pod``."""
    room = 100.0 * HOT_THRESHOLD
    return (
        use[0] + 100.0 * pod[0] / node.cpu <= room and use[1] + 100.0 * pod[1] / node.memory <= room
    )


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def run(
    placer: Placer,
    seed: int,
    *,
    duration: float = 600.0,
    warmup: float = 120.0,
    lags: tuple[int, ...] = (0, 60),
    cpu: str = MEAN,
    source: str = LOAD_WATCHER,
    start_lag: tuple[float, float] = (0.0, 0.0),
    refresh: float = REFRESH,
) -> Result:
    """One run of ``placer.stream`` (arrivals, lifetimes, phases from ``seed`` alone).

    ``refresh``: how often the extender reads its source (``source.refresh_seconds``;
    ``REFRESH``, the role's default, unless a test looks at another period).

    ``start_lag``: the range of seconds between a pod's binding and its containers'
    start, drawn per pod (a real kubelet's 1-3 s without an image to pull; more with
    one). With it a pod is bound ``Pending``, uses nothing until it starts, and the watch
    then sees it ``Running`` with its containers' ``startedAt`` (whole seconds, as the API
    server writes it). (0, 0): its use begins at the binding and no status says when.

    ``cpu``: what a node's CPU figure at a scrape is. ``INSTANT`` (kwok read only at the
    scrapes, the lab before lab/kwokclock.py): the use of the pods there at the scrape;
    kwok's emulated kubelet grows a node's CPU counter at each scrape by the time since the
    last one times the use of the pods it lists then (kwok v0.8.0
    pkg/kwok/server/metrics_resource_usage.go ``nodeResourceCumulativeUsage``), so
    metrics-server's rate over the two scrapes is that instant's use. ``MEAN`` (a real
    kubelet, whose counter integrates, and kwok read every second): the mean over the
    resolution before the scrape."""
    if cpu not in (INSTANT, MEAN):
        raise ValueError(f"cpu must be {INSTANT!r} or {MEAN!r}, got {cpu!r}")
    if source not in (LOAD_WATCHER, METRICS_SERVER):
        raise ValueError(f"source must be {LOAD_WATCHER!r} or {METRICS_SERVER!r}, got {source!r}")
    stream = placer.stream
    nodes = {n.name: n for n in stream.nodes}
    rng = random.Random(seed)
    # The periods' phases come from a generator of their own, one draw each, so that a
    # period's change (REFRESH, say) moves only its phase. The stream's generator still
    # makes the four draws it made when it drew the phases itself (periods 15, 60, 30 and 15
    # then), so that every arrival and life stays what the seeds gave before: the tests name
    # streams by their seeds.
    for period in (15, 60, 30, 15):
        rng.randrange(period)
    phases = random.Random(seed * 6_151 + 11)
    scrape_at, collect_at, refresh_at, poll_at = (
        int(p * phases.random()) for p in (SCRAPE, COLLECT, refresh, POD_POLL)
    )
    running: dict[str, Running] = {}
    background = {n.name: [n.background[0], n.background[1]] for n in stream.nodes}
    arrivals: list[tuple[float, Workload]] = []
    for w in stream.workloads:
        arrivals += [(i / w.rate + rng.random(), w) for i in range(w.replicas)]
    arrivals.sort(key=lambda a: a[0])
    counter = placed = 0
    starting: set[str] = set()  # pods bound whose containers have not started
    truth: list[dict[str, tuple[float, float]]] = []  # per second, node -> (cpu %, memory %)
    window: dict[str, list[float]] = {n: [] for n in nodes}  # CPU % of the last 15 s
    scraped: dict[str, tuple[float, float]] = {}  # metrics-server's latest node figures
    pods_seen: dict[str, int] = {}  # pod -> scrapes it has been running in
    pod_figures: dict[str, PodUsage] = {}
    # the lab's nodes are measured at their backgrounds before the stream starts
    before = T0 - rng.uniform(0.0, COLLECT)
    collected = LoadSnapshot(
        "sim",
        before,
        before,
        {
            n.name: NodeLoad(
                ResourceLoad(100.0 * n.background[0] / n.cpu),
                ResourceLoad(100.0 * n.background[1] / n.memory),
            )
            for n in stream.nodes
        },
        settle_seconds=SETTLE,
    )
    placer.node_reading(collected, T0)
    hottest: list[float] = []
    hottest_mem: list[float] = []
    all_on_one = 0
    memory_over = 0
    shares: list[float] = []
    top_shares: list[float] = []
    for step in range(int(duration) + 1):
        t = T0 + step
        for key in [k for k, r in running.items() if r.end <= t]:
            gone = running.pop(key)
            placer.deleted(gone, t)
            pods_seen.pop(gone.name, None)
            pod_figures.pop(f"sim/{gone.name}", None)
            arrivals.append((float(step), gone.workload))
        due = [a for a in arrivals if a[0] <= step]
        arrivals = [a for a in arrivals if a[0] > step]
        for _, w in due:
            counter += 1
            name = f"{w.name}-{counter}"
            node = placer.place(w, name, _pod(w, name), t)
            life = rng.uniform(*w.life)
            if start_lag[1] > 0:
                started = t + rng.uniform(*start_lag)
                pod = _pod(w, name, node, t, phase="Pending")
                starting.add(name)
            else:
                started, pod = -math.inf, _pod(w, name, node, t)
            run_ = Running(w, name, node, t, t + life, pod, w.use_at(step, duration), started)
            running[name] = run_
            placer.bound(run_, t)
            placed += 1
        for name in [n for n in starting if n not in running or running[n].started <= t]:
            starting.discard(name)
            if name in running:
                placer.started(running[name], t)
        for at, node_name, memory in stream.changes:
            if at == step:
                background[node_name][1] = memory
        use = {n: list(background[n]) for n in nodes}
        for r in running.values():
            if r.started > t:
                continue
            use[r.node][0] += r.use[0]
            use[r.node][1] += r.use[1]
        now = {
            n: (100.0 * use[n][0] / s.cpu, 100.0 * use[n][1] / s.memory) for n, s in nodes.items()
        }
        truth.append(now)
        memory_over += any(m > 100.0 for _, m in now.values())
        for n in nodes:
            window[n].append(now[n][0])
            del window[n][: -int(SCRAPE)]
        if step >= warmup:
            hottest.append(max(c for c, _ in now.values()))
            hottest_mem.append(max(m for _, m in now.values()))
            piled = False
            tops: list[float] = []
            for w in stream.workloads:
                mine = [r.node for r in running.values() if r.workload is w]
                if len(mine) >= 2:
                    shares.append(max(mine.count(n) for n in nodes) / len(mine))
                    tops.append(shares[-1])
                    # judged only with all its replicas running, as steady_measures.piled:
                    # a replacement still starting says nothing of where it was put
                    if len(set(mine)) == 1 and len(mine) >= w.replicas:
                        piled = piled or any(
                            n != mine[0] and _room(nodes[n], now[n], w.use_at(step, duration))
                            for n in nodes
                        )
            all_on_one += piled
            if tops:
                top_shares.append(max(tops))
        if step % int(SCRAPE) == scrape_at:
            if cpu == MEAN:
                scraped = {n: (sum(window[n]) / len(window[n]), now[n][1]) for n in nodes}
            else:
                scraped = dict(now)
            for r in running.values():
                if r.started > t:
                    continue
                pods_seen[r.name] = pods_seen.get(r.name, 0) + 1
                if pods_seen[r.name] >= 2:  # a CPU rate needs two samples
                    pod_figures[f"sim/{r.name}"] = PodUsage(float(r.use[0]), float(r.use[1]), t)
        if source == METRICS_SERVER and step % int(SCRAPE) == scrape_at:
            # NodeMetrics of this scrape, stamped with its time (sources/metrics_server.py)
            loads = {n: NodeLoad(ResourceLoad(c), ResourceLoad(m)) for n, (c, m) in scraped.items()}
            collected = LoadSnapshot(
                "sim",
                t,
                t,
                loads,
                settle_seconds=METRICS_SERVER_SETTLE,
                measured_at=dict.fromkeys(loads, t),
            )
        elif source == LOAD_WATCHER and step % int(COLLECT) == collect_at and scraped:
            loads = {n: NodeLoad(ResourceLoad(c), ResourceLoad(m)) for n, (c, m) in scraped.items()}
            collected = LoadSnapshot("sim", t, t, loads, settle_seconds=SETTLE)
        if step % int(refresh) == refresh_at and collected is not None:
            placer.node_reading(collected, t)
        if step % int(POD_POLL) == poll_at:
            placer.pod_reading(PodUsageReading(dict(pod_figures), {}, t), t)
        if step % 5 == 0:
            placer.tick(t)
    third = max(1, len(hottest) // 3)
    return Result(
        sum(hottest) / len(hottest),
        sum(shares) / len(shares),
        placed,
        hottest_cpu_p99=_p99(hottest),
        hottest_memory=sum(hottest_mem) / len(hottest_mem),
        above_80=sum(h > 80.0 for h in hottest),
        memory_over=memory_over,
        all_on_one=all_on_one,
        thirds=(sum(hottest[:third]) / third, sum(hottest[-third:]) / third),
        error=prediction_error(placer.decisions(), truth, lags),
        bias=cpu_bias(placer.decisions(), truth),
        top_share=sum(top_shares) / len(top_shares) if top_shares else 0.0,
    )


def one_shot(placer: Placer, seed: int, *, source: str = METRICS_SERVER) -> dict[str, int]:
    """Where ``placer`` leaves a one-shot stream's pods (``ONE_SHOT``): pods per node, once
    all are placed (90 s, on the lab's metrics-server readings, containers starting 1-3 s
    after their binding, as a kubelet starts them)."""
    run(placer, seed, duration=90.0, warmup=0.0, lags=(0,), source=source, start_lag=(1.0, 3.0))
    owners = placer.scheduler.owners
    return {
        n.name: sum(owners.get(w.name, {}).get(n.name, 0) for w in placer.stream.workloads)
        for n in placer.stream.nodes
    }


def hottest_of(stream: Stream, pods: dict[str, int]) -> float:
    """The hotter of CPU and memory of the hottest node, percent, for a one-shot stream
    of one workload with ``pods`` per node (the report's max CPU % / max mem %)."""
    (w,) = stream.workloads
    return max(
        100
        * max(
            (n.background[0] + pods[n.name] * w.use[0]) / n.cpu,
            (n.background[1] + pods[n.name] * w.use[1]) / n.memory,
        )
        for n in stream.nodes
    )


def cpu_bias(
    records: list[dict[str, Any]], truth: list[dict[str, tuple[float, float]]]
) -> dict[int, float]:
    """``Result.bias``: per minute, the mean of predicted less true CPU at the binding."""
    sums: dict[int, list[float]] = {}
    for rec in records:
        node, at = rec.get("bound"), int(rec["at"] - T0)
        predicted = rec["nodes"].get(node) if node else None
        if predicted is None or predicted[0] is None or at >= len(truth):
            continue
        sums.setdefault(at // 60 * 60, []).append(predicted[0] - truth[at][node][0])
    return {k: sum(v) / len(v) for k, v in sorted(sums.items())}


def prediction_error(
    records: list[dict[str, Any]],
    truth: list[dict[str, tuple[float, float]]],
    lags: tuple[int, ...],
) -> dict[str, float]:
    """Mean absolute error of each record's predicted use of the node its pod went to
    against the true use ``lag`` seconds after the decision, per resource and lag (the
    same measure as benchmarks/placement/steady_measures.py ``prediction_error``)."""
    sums: dict[str, list[float]] = {}
    for rec in records:
        node, at = rec.get("bound"), int(rec["at"] - T0)
        predicted = rec["nodes"].get(node) if node else None
        if predicted is None:
            continue
        for lag in lags:
            if at + lag >= len(truth):
                continue
            real = truth[at + lag][node]
            for i, resource in enumerate(("cpu", "memory")):
                if predicted[i] is None:
                    continue
                sums.setdefault(f"{resource}@{lag}", []).append(abs(predicted[i] - real[i]))
    return {k: sum(v) / len(v) for k, v in sums.items()}


OLD = {"estimator.delta": False, "estimator.spread_weight": 0.0, "estimator.pod_usage": False}


def request_placer(seed: int, stream: Stream = STEADY_MIX) -> Placer:
    return RequestPlacer(stream, random.Random(seed * 7919 + 1))


def old_extender(seed: int, stream: Stream = STEADY_MIX) -> Placer:
    return ExtenderPlacer(stream, random.Random(seed * 7919 + 2), OLD, pod_usage=False)


def request_rule_extender(seed: int, stream: Stream = STEADY_MIX, **overrides: Any) -> Placer:
    """The extender with ``estimator.mode: request``: what the learned estimates replace."""
    settings = {"estimator.mode": "request", **overrides}
    return ExtenderPlacer(stream, random.Random(seed * 7919 + 3), settings, pod_usage=True)


def new_extender(seed: int, stream: Stream = STEADY_MIX, **overrides: Any) -> Placer:
    """The extender at its defaults (``overrides`` on top)."""
    return ExtenderPlacer(stream, random.Random(seed * 7919 + 3), overrides, pod_usage=True)


# The classes of stream ``main`` compares on, each with its length in seconds.
CLASSES: dict[str, tuple[Callable[[int], Stream], float]] = {
    "heterogeneous": (heterogeneous, 900.0),
    "equal sizes": (equal_sizes, 900.0),
    "hogged": (hogged, 900.0),
    "generated": (generated, GENERATED_SECONDS),
}


def _worse_than_stock(
    make_stream: Callable[[int], Stream],
    seeds: range,
    duration: float = 900.0,
    source: str = LOAD_WATCHER,
    start_lag: tuple[float, float] = (0.0, 0.0),
    refresh: float = REFRESH,
) -> dict[str, list[tuple[float, int]]]:
    """Per measure (the hottest node's mean CPU and memory after the warm-up and the hotter
    of the two, the largest share of a workload on one node, the seconds a workload sat all
    on one node while another had room, the seconds some node's memory demand was above its
    capacity, ``Result.memory_over``, and on streams whose nodes are all of one size the
    placement benchmark's share measure, ``Result.top_share``), least-used minus stock on
    each stream of ``seeds``, (points or seconds, seed)."""
    out: dict[str, list[tuple[float, int]]] = {
        "cpu": [],
        "memory": [],
        "hotter": [],
        "share": [],
        "piled": [],
        "over": [],
        "equal share": [],
    }
    for seed in seeds:
        stream = make_stream(seed)
        kw = {"duration": duration, "source": source, "start_lag": start_lag, "refresh": refresh}
        stock = run(request_placer(seed, stream), seed, **kw)
        mine = run(new_extender(seed, stream), seed, **kw)
        out["cpu"].append((mine.hottest_cpu - stock.hottest_cpu, seed))
        out["memory"].append((mine.hottest_memory - stock.hottest_memory, seed))
        hotter = max(mine.hottest_cpu, mine.hottest_memory)
        out["hotter"].append((hotter - max(stock.hottest_cpu, stock.hottest_memory), seed))
        out["share"].append((100 * (mine.largest_share - stock.largest_share), seed))
        out["piled"].append((float(mine.all_on_one - stock.all_on_one), seed))
        out["over"].append((float(mine.memory_over - stock.memory_over), seed))
        if len({(n.cpu, n.memory) for n in stream.nodes}) == 1:
            out["equal share"].append((100 * (mine.top_share - stock.top_share), seed))
    return out


def _fair_share(
    *,
    off: bool,
    room: float | None,
    room_cpu: float | None = None,
    slack: float | None = None,
    band: int | None = None,
) -> None:
    """least-used's fair-share term (``spread.fair_share``) off, or at another room level
    (memory, CPU), slack or band than its defaults."""
    from loadwise.extender import decide, fastpath
    from loadwise.extender.policies import spread

    if off:
        for module in (decide, fastpath):
            setattr(module, "fair_share", lambda scores, *_: list(scores))  # noqa: B010
    for name, value in (
        ("ROOM_PERCENT", room),
        ("ROOM_CPU_PERCENT", room_cpu),
        ("SHARE_SLACK", slack),
        ("SHARE_BAND", band),
    ):
        if value is not None:
            setattr(spread, name, value)


def _hottest_weight(weight: float) -> None:
    """least-used's hottest-node term at ``weight`` (0: off) instead of its default."""
    from loadwise.extender.policies import least_used

    kept = least_used.less_for_raising

    def at_weight(
        score: int, raised: float, _default: float = 0.0, ceiling: int = least_used.RAISED_CEILING
    ) -> int:
        return kept(score, raised, weight, ceiling)

    least_used.less_for_raising = at_weight  # both paths call it through lower_for_raising


def _raised(points: float | None, whole: bool) -> None:
    """least-used's ceiling for a node that raises the hottest beyond the others
    (``least_used.RAISED_POINTS``; 0: off) at ``points``, and with ``whole`` the raises
    taken whole, not beyond the least (``least_used.beyond_least`` off)."""
    from loadwise.extender import decide, service
    from loadwise.extender.policies import least_used

    if points is not None:
        least_used.RAISED_POINTS = points
    if whole:
        setattr(decide, "beyond_least", lambda raises, measured=None: list(raises))  # noqa: B010
        # the general path alone (the fast path takes the least off inline)
        setattr(service.Extender, "_fast_answer", lambda *_args, **_kw: None)  # noqa: B010


def _level_power(power: float) -> None:
    """least-used's hottest-node term with each resource's points at ``level_weights``'
    ``power`` (0: one currency) instead of ``HOTTEST_LEVEL_POWER``."""
    from loadwise.extender import fastpath
    from loadwise.extender.policies import least_used

    kept = least_used.level_weights

    def at_power(tops: Sequence[float], _default: float = 0.0) -> list[float]:
        return kept(tops, power)

    for module in (least_used, fastpath):
        setattr(module, "level_weights", at_power)  # noqa: B010 - not re-exported


def _overall_weight(weight: float) -> None:
    """least-used's hottest-node term with a raise of the hottest level of all resources
    counting ``weight`` more (``least_used.OVERALL_WEIGHT``; 0: the per-resource points
    alone). Both paths read it at each request."""
    from loadwise.extender.policies import least_used

    least_used.OVERALL_WEIGHT = weight


def _readings_clamped_at_capacity() -> None:
    from loadwise.extender import readings

    kept = readings._resource

    def clamped(resource: str, load: ResourceLoad) -> ResourceLoad | Any:
        out = kept(resource, load)
        if isinstance(out, ResourceLoad) and out.avg is not None and out.avg > 100.0:
            return ResourceLoad(100.0, out.std)
        return out

    readings._resource = clamped


def main(argv: list[str] | None = None) -> None:
    """Least-used against stock on drawn streams, per class of cluster: how many streams
    it leaves more than 2 points hotter (CPU, memory), more than 10 points more of a
    workload on one node (share), longer with a workload all on one node while another
    had room (piled, seconds) or longer with a node's memory demand above its capacity
    (over, seconds); the worst, the mean. The figures in
    extender/policies/least_used.py (``HOTTEST_WEIGHT``) come from here:
    ``python tests/extender/steady_sim.py 101 161`` and the same with
    ``--hottest-weight 0 --clamp-readings`` (the rules before it); those in
    extender/policies/spread.py from ``python tests/extender/steady_sim.py 3101 3131
    --classes generated`` and the same with ``--no-fair-share`` or another ``--room``,
    ``--slack`` or ``--share-band``."""
    import argparse
    import statistics

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("first", type=int)
    parser.add_argument("end", type=int, help="one past the last seed")
    parser.add_argument("--hottest-weight", type=float, help="the term's weight (0: off)")
    parser.add_argument(
        "--level-power", type=float, help="the term's level_weights power (0: one currency)"
    )
    parser.add_argument(
        "--source",
        choices=(LOAD_WATCHER, METRICS_SERVER),
        default=LOAD_WATCHER,
        help="where node readings come from (run's source)",
    )
    parser.add_argument(
        "--refresh", type=float, default=REFRESH, help="source.refresh_seconds (run's refresh)"
    )
    parser.add_argument("--steady-mix", action="store_true", help="steady-mix, run seeds 31-34")
    parser.add_argument(
        "--steady-hog", action="store_true", help="steady-hog (360 s), run seeds 31-34"
    )
    parser.add_argument(
        "--one-shot",
        nargs="+",
        choices=tuple(ONE_SHOT),
        default=[],
        help="one-shot scenarios on metrics-server's readings (the lab's), run FIRST..END:"
        " each run's pods per node and hottest node",
    )
    parser.add_argument(
        "--overall-weight",
        type=float,
        help="least_used.OVERALL_WEIGHT (0: a raise of the hottest level counts once)",
    )
    parser.add_argument(
        "--clamp-readings", action="store_true", help="uses over 100 %% read as 100"
    )
    parser.add_argument(
        "--raised-points", type=float, help="least_used.RAISED_POINTS (0: no ceiling)"
    )
    parser.add_argument(
        "--whole-raises", action="store_true", help="raises taken whole, not beyond the least"
    )
    parser.add_argument(
        "--start-lag",
        nargs=2,
        type=float,
        default=(0.0, 0.0),
        metavar=("LO", "HI"),
        help="seconds from a pod's binding to its containers' start (run's start_lag)",
    )
    parser.add_argument("--no-fair-share", action="store_true", help="the fair-share term off")
    parser.add_argument("--room", type=float, help="the fair-share term's ROOM_PERCENT")
    parser.add_argument("--room-cpu", type=float, help="the fair-share term's ROOM_CPU_PERCENT")
    parser.add_argument("--slack", type=float, help="the fair-share term's SHARE_SLACK")
    parser.add_argument("--share-band", type=int, help="the fair-share term's SHARE_BAND")
    parser.add_argument(
        "--classes",
        nargs="*",
        choices=tuple(CLASSES),
        default=["heterogeneous", "equal sizes"],
        help=f"which classes of stream: {', '.join(CLASSES)}",
    )
    args = parser.parse_args(argv)
    if args.hottest_weight is not None:
        _hottest_weight(args.hottest_weight)
    if args.level_power is not None:
        _level_power(args.level_power)
    if args.overall_weight is not None:
        _overall_weight(args.overall_weight)
    if args.clamp_readings:
        _readings_clamped_at_capacity()
    _raised(args.raised_points, args.whole_raises)
    _fair_share(
        off=args.no_fair_share,
        room=args.room,
        room_cpu=args.room_cpu,
        slack=args.slack,
        band=args.share_band,
    )
    if args.steady_mix:
        for seed in (31, 32, 33, 34):
            kw = {"source": args.source, "refresh": args.refresh}
            stock = run(request_placer(seed), seed, **kw)
            mine = run(new_extender(seed), seed, **kw)
            print(
                f"steady-mix seed {seed}: CPU {mine.hottest_cpu:.1f}"
                f" against {stock.hottest_cpu:.1f}, memory {mine.hottest_memory:.1f}"
                f" against {stock.hottest_memory:.1f},"
                f" {mine.above_80} s above 80 %",
                flush=True,
            )
    if args.steady_hog:
        for seed in (31, 32, 33, 34):
            kw = {"duration": 360.0, "source": args.source, "refresh": args.refresh}
            stock = run(request_placer(seed, STEADY_HOG), seed, **kw)
            mine = run(new_extender(seed, STEADY_HOG), seed, **kw)
            print(
                f"steady-hog seed {seed}: memory {mine.hottest_memory:.1f}"
                f" against {stock.hottest_memory:.1f}, CPU {mine.hottest_cpu:.1f}"
                f" against {stock.hottest_cpu:.1f}",
                flush=True,
            )
    seeds = range(args.first, args.end)
    for name in args.one_shot:
        stream = ONE_SHOT[name]
        for seed in seeds:
            for who, placer in (
                ("stock", request_placer(seed, stream)),
                ("least-used", new_extender(seed, stream)),
            ):
                pods = one_shot(placer, seed)
                print(
                    f"{name} seed {seed} {who:10}: hottest {hottest_of(stream, pods):5.1f} %, "
                    + ", ".join(f"{node} {n}" for node, n in pods.items()),
                    flush=True,
                )
    for name in args.classes:
        make, duration = CLASSES[name]
        lag = (args.start_lag[0], args.start_lag[1])
        for measure, rows in _worse_than_stock(
            make, seeds, duration, args.source, lag, args.refresh
        ).items():
            if not rows:
                continue
            worst, seed = max(rows)
            bar = 10.0 if "share" in measure else 0.0 if measure in ("piled", "over") else 2.0
            over = sum(d > bar for d, _ in rows)
            mean = statistics.mean(d for d, _ in rows)
            print(
                f"{name:13} {measure:6} streams {len(rows)}: more than {bar:g} above stock "
                f"{over}, worst {worst:+.1f} (seed {seed}), mean {mean:+.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
