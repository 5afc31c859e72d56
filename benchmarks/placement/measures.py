"""What a placement is worth, from the scenario's ground truth: pure functions.

Utilisation is computed from what the scenario *declares* (a node's background usage plus
the actual usage of the pods bound to it, over its capacity), not read back from
metrics-server: the lab's metrics are the input the contenders decide on, the ground truth
is what the decision did. Capacity, not allocatable, as load-watcher reports percentages
(paypal/load-watcher pkg/watcher/internal/metricsprovider/k8s.go).

The offline lower bound on the maximum utilisation (`lower_bound`), per resource:

* Water-filling. Let node i have capacity C_i > 0 and background B_i, and let the pods'
  total usage be U. In any assignment node i receives x_i >= 0 with sum x_i = U. If the
  assignment's maximum utilisation is M, then (B_i + x_i) / C_i <= M for every i, so
  x_i <= max(0, M C_i - B_i), and U = sum x_i <= f(M) := sum_i max(0, M C_i - B_i).
  f is continuous and non-decreasing, and strictly increasing wherever f > 0; L is the
  least level with f(L) = U. If M < L then f(M) < U when U > 0 (and when U = 0 the claim
  M >= L = min_i B_i/C_i is trivial), a contradiction; so M >= L.
* Background: every node keeps its background, so M >= max_i B_i / C_i.
* Indivisible pods: pod p must be on some node, where utilisation is at least
  (B_i + u_p) / C_i, so M >= max_p min_i (B_i + u_p) / C_i.

Each is a relaxation of the real problem (splittable pods, no request or pod-count limit),
so their maximum is a lower bound on what any scheduler can reach; over both resources,
the larger of the two bounds bounds the maximum over both.

The exact optimum (`exact_optimum`) of the same objective, max over nodes and both
resources, with whole pods (still no request or pod-count limit, so it too bounds every
scheduler from below, and never lies below the bound):

* Feasibility of a level M is exact and monotone in M. Pods of identical usage
  ("shapes") are interchangeable, so an assignment is how many pods of each shape each node
  gets. With one shape, node i takes at most k_i(M) = min_r floor((M C_ir - B_ir) / u_r)
  pods, and M is feasible iff every background fits and sum_i k_i(M) >= P. With shapes
  1..s, a dynamic programme over the nodes keeps, for each count of shapes 1..s-1 placed
  so far, the most pods of shape s the nodes so far can also take; M is feasible iff the
  full counts of shapes 1..s-1 leave room for all P_s. Its states are the product of
  (P_t + 1) over shapes 1..s-1; instances whose work (nodes x states^2) exceeds a limit
  are refused (None) rather than run for hours, and the bound stands alone there.
* The optimum is the least feasible M. Bisection between the lower bound and the value of
  putting every pod on one node brackets it in (lo, hi] with lo infeasible; the witness
  assignment found at hi is returned with its own maximum, computed from its integer
  counts. Floors take a tolerance of 1e-9 of capacity against rounding, so the value
  returned is within about 1e-9 of the optimum (1e-7 percentage points).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.placement.scenario import Node, Resources

HOT_THRESHOLD = 0.80  # the report's "nodes above 80 %"


@dataclass(frozen=True)
class NodeLoad:
    """One node after placement: its ground-truth usage and the pods it got."""

    name: str
    capacity: Resources
    used: Resources
    pods: int
    hot: bool

    @property
    def cpu(self) -> float:
        """CPU utilisation, a fraction of capacity."""
        return self.used.cpu / self.capacity.cpu

    @property
    def memory(self) -> float:
        return self.used.memory / self.capacity.memory

    @property
    def peak(self) -> float:
        return max(self.cpu, self.memory)


def node_loads(
    nodes: Sequence[Node], usage: Mapping[str, Resources], bindings: Mapping[str, str]
) -> list[NodeLoad]:
    """Per node: background + the actual usage of the pods bound there (`bindings`: pod ->
    node). A pod bound to a node the scenario does not name is an error in the run."""
    by_name = {n.name: n for n in nodes}
    cpu = {n.name: n.background.cpu for n in nodes}
    mem = {n.name: n.background.memory for n in nodes}
    count: Counter[str] = Counter()
    for pod, node in bindings.items():
        if node not in by_name:
            raise ValueError(f"pod {pod} is bound to {node!r}, not a node of the scenario")
        u = usage[pod]
        cpu[node] += u.cpu
        mem[node] += u.memory
        count[node] += 1
    return [
        NodeLoad(n.name, n.capacity, Resources(cpu[n.name], mem[n.name]), count[n.name], n.hot)
        for n in nodes
    ]


@dataclass(frozen=True)
class Summary:
    max_cpu: float
    max_memory: float
    std_cpu: float
    std_memory: float
    over_80: int
    pods_on_hot: int
    hottest: str  # the node with the highest utilisation of either resource

    @property
    def max_util(self) -> float:
        return max(self.max_cpu, self.max_memory)


def summarise(loads: Sequence[NodeLoad]) -> Summary:
    """Max and population standard deviation of utilisation per resource over the nodes,
    the nodes above 80 % in either resource, and the pods on nodes marked hot."""
    if not loads:
        raise ValueError("no nodes to summarise")
    hottest = max(loads, key=lambda n: (n.peak, n.name))
    return Summary(
        max_cpu=max(n.cpu for n in loads),
        max_memory=max(n.memory for n in loads),
        std_cpu=statistics.pstdev(n.cpu for n in loads),
        std_memory=statistics.pstdev(n.memory for n in loads),
        over_80=sum(1 for n in loads if n.peak > HOT_THRESHOLD),
        pods_on_hot=sum(n.pods for n in loads if n.hot),
        hottest=hottest.name,
    )


def water_level(capacity: Sequence[float], background: Sequence[float], total: float) -> float:
    """The least L with sum_i max(0, L*C_i - B_i) = total (all C_i > 0, total >= 0)."""
    if len(capacity) != len(background) or not capacity:
        raise ValueError("one capacity and one background per node, at least one node")
    if any(c <= 0 for c in capacity) or total < 0:
        raise ValueError("capacities must be > 0 and the total >= 0")
    # Nodes start filling at their own level B_i/C_i; add them in that order.
    order = sorted(zip(capacity, background, strict=True), key=lambda cb: cb[1] / cb[0])
    sum_c = sum_b = 0.0
    for k, (c, b) in enumerate(order):
        sum_c += c
        sum_b += b
        level = (total + sum_b) / sum_c
        nxt = order[k + 1][1] / order[k + 1][0] if k + 1 < len(order) else math.inf
        if level <= nxt:
            return level
    raise AssertionError("unreachable: the last node's next level is infinite")


@dataclass(frozen=True)
class Bound:
    cpu: float
    memory: float

    @property
    def overall(self) -> float:
        return max(self.cpu, self.memory)


def _bound(caps: list[float], bgs: list[float], pods: list[float]) -> float:
    fill = water_level(caps, bgs, sum(pods))
    background = max(b / c for c, b in zip(caps, bgs, strict=True))
    single = max(
        (min((b + u) / c for c, b in zip(caps, bgs, strict=True)) for u in pods), default=0
    )
    return max(fill, background, single)


def lower_bound(nodes: Sequence[Node], usage: Iterable[Resources]) -> Bound:
    """A proven lower bound on the maximum utilisation any placement of the pods reaches
    (the module's docstring has the proof)."""
    pods = list(usage)
    return Bound(
        cpu=_bound(
            [n.capacity.cpu for n in nodes],
            [n.background.cpu for n in nodes],
            [p.cpu for p in pods],
        ),
        memory=_bound(
            [n.capacity.memory for n in nodes],
            [n.background.memory for n in nodes],
            [p.memory for p in pods],
        ),
    )


# Feasibility checks may cost up to this many (node, state, addition) steps each; with one
# shape a check is one step per node. 2e6 steps of this pure Python take about a second.
OPTIMUM_WORK = 2_000_000
_TOL = 1e-9  # of capacity: loads this far above the level still count as at it


@dataclass(frozen=True)
class Optimum:
    """The least max(CPU, memory) utilisation over nodes any whole-pod placement reaches,
    with one placement that reaches it."""

    value: float
    max_cpu: float  # of that placement
    max_memory: float
    shapes: tuple[Resources, ...]  # the pods' distinct usages
    counts: tuple[tuple[int, ...], ...]  # per node, pods of each shape


def _shapes(usage: Iterable[Resources]) -> tuple[tuple[Resources, ...], tuple[int, ...]]:
    c = Counter(usage)
    shapes = tuple(sorted(c, key=lambda r: (r.cpu, r.memory)))
    return shapes, tuple(c[x] for x in shapes)


def _node_max(
    node: Node, shapes: Sequence[Resources], counts: Sequence[int]
) -> tuple[float, float]:
    cpu = node.background.cpu + sum(k * x.cpu for k, x in zip(counts, shapes, strict=True))
    mem = node.background.memory + sum(k * x.memory for k, x in zip(counts, shapes, strict=True))
    return cpu / node.capacity.cpu, mem / node.capacity.memory


def _room(node: Node, level: float, used: Resources, shape: Resources) -> int | None:
    """How many pods of `shape` still fit under `level` beside `used`; None when even
    `used` does not (a large number stands for "no limit": a shape using nothing)."""
    most = 1 << 62
    for cap, have, u in (
        (node.capacity.cpu, node.background.cpu + used.cpu, shape.cpu),
        (node.capacity.memory, node.background.memory + used.memory, shape.memory),
    ):
        left = level * cap - have + _TOL * cap
        if left < 0:
            return None
        if u > 0:
            most = min(most, math.floor(left / u))
    return most


State = tuple[int, ...]


def _feasible(
    nodes: Sequence[Node], shapes: Sequence[Resources], totals: Sequence[int], level: float
) -> list[tuple[int, ...]] | None:
    """Per node, pods of each shape, all loads under `level`; None when no placement is."""
    *first, last = shapes
    *need, need_last = totals
    # layer[s] = (most pods of the last shape so far, previous state, addition, last's count)
    layers: list[dict[State, tuple[int, State, State, int]]] = []
    frontier: dict[State, int] = {tuple(0 for _ in first): 0}
    for node in nodes:
        layer: dict[State, tuple[int, State, State, int]] = {}
        for state, have in frontier.items():
            for add in itertools.product(
                *(range(n - s + 1) for n, s in zip(need, state, strict=True))
            ):
                used = Resources(
                    sum(a * x.cpu for a, x in zip(add, first, strict=True)),
                    sum(a * x.memory for a, x in zip(add, first, strict=True)),
                )
                room = _room(node, level, used, last)
                if room is None:
                    continue
                take = min(room, need_last - have)
                nxt = tuple(s + a for s, a in zip(state, add, strict=True))
                if nxt not in layer or layer[nxt][0] < have + take:
                    layer[nxt] = (have + take, state, add, take)
        if not layer:
            return None  # a background above the level
        layers.append(layer)
        frontier = {k: v[0] for k, v in layer.items()}
    goal = tuple(need)
    if frontier.get(goal, -1) < need_last:
        return None
    out: list[tuple[int, ...]] = []
    state = goal
    for layer in reversed(layers):
        _, prev, add, take = layer[state]
        out.append((*add, take))
        state = prev
    return out[::-1]


def optimum_work(nodes: Sequence[Node], usage: Iterable[Resources]) -> int:
    """Steps one feasibility check of `exact_optimum` may take: nodes x states^2."""
    _, totals = _shapes(usage)
    states = math.prod(n + 1 for n in totals[:-1])
    return len(nodes) * states * states


def exact_optimum(
    nodes: Sequence[Node], usage: Iterable[Resources], *, work: int = OPTIMUM_WORK
) -> Optimum | None:
    """The least maximum utilisation over nodes and both resources that any placement of
    these whole pods reaches (the module's docstring has the method and why it is exact);
    None when a feasibility check would cost more than `work` steps."""
    pods = list(usage)
    if not nodes:
        raise ValueError("no nodes")
    if optimum_work(nodes, pods) > work:
        return None
    shapes, totals = _shapes(pods)
    if not shapes:
        shapes, totals = (Resources(0, 0),), (0,)

    def value(counts: Sequence[Sequence[int]]) -> tuple[float, float]:
        per = [_node_max(n, shapes, c) for n, c in zip(nodes, counts, strict=True)]
        return max(c for c, _ in per), max(m for _, m in per)

    # All pods on the first node: a placement, so its maximum is feasible.
    hi = max(value([totals, *([0] * len(shapes) for _ in nodes[1:])]))
    lo = lower_bound(nodes, pods).overall * (1 - 1e-12)
    best = _feasible(nodes, shapes, totals, hi)
    assert best is not None, "every pod on one node is a placement"
    if (low := _feasible(nodes, shapes, totals, lo)) is not None:
        best, hi = low, lo
    else:
        while hi - lo > 1e-12 * max(1.0, hi):
            mid = (lo + hi) / 2
            got = _feasible(nodes, shapes, totals, mid)
            if got is None:
                lo = mid
            else:
                best, hi = got, mid
    if len(nodes) <= SPREAD_NODES:
        best = _spread(nodes, shapes, best)
    cpu, mem = value(best)
    return Optimum(max(cpu, mem), cpu, mem, shapes, tuple(tuple(c) for c in best))


# Up to this many nodes the optimum's placement is evened out for showing (each pass of
# _spread is nodes^2 x shapes steps); beyond, the report does not list it anyway.
SPREAD_NODES = 20


def _spread(
    nodes: Sequence[Node], shapes: Sequence[Resources], counts: Sequence[Sequence[int]]
) -> list[tuple[int, ...]]:
    """The same pods evened out: move one pod from a node to another wherever the
    receiver ends below the giver's peak before the move. The maximum never rises (the
    giver falls, the receiver stays below the old peak), so an optimal placement stays
    optimal; it only reads better (the dynamic programme fills the first nodes up to the
    level, e.g. 19 and 11 pods on two equal nodes). Each move lowers the nodes' peaks
    sorted in decreasing order, lexicographically, so it ends."""
    cur = [list(c) for c in counts]

    def peak(i: int) -> float:
        return max(_node_max(nodes[i], shapes, cur[i]))

    peaks = [peak(i) for i in range(len(nodes))]
    moved = True
    while moved:
        moved = False
        for x in sorted(range(len(nodes)), key=lambda i: -peaks[i]):
            for t in (t for t in range(len(shapes)) if cur[x][t]):
                best_y, best_peak = -1, peaks[x]
                for y in range(len(nodes)):
                    if y == x:
                        continue
                    cur[y][t] += 1
                    p = peak(y)
                    cur[y][t] -= 1
                    if p < best_peak - 1e-12:
                        best_y, best_peak = y, p
                if best_y >= 0:
                    cur[x][t] -= 1
                    cur[best_y][t] += 1
                    peaks[x], peaks[best_y] = peak(x), best_peak
                    moved = True
                    break
            if moved:
                break
    return [tuple(c) for c in cur]


def largest_share(
    bindings: Mapping[str, str], owner: Mapping[str, str], replicas: Mapping[str, int]
) -> float | None:
    """The largest part of one workload's replicas bound to a single node (pod -> node in
    `bindings`, pod -> workload in `owner`): what losing that node takes from the workload,
    1/n when its replicas are spread evenly over n nodes, 1.0 when all share one. Packing
    by load can trade this away, so it stands beside the utilisation. None without pods."""
    per: Counter[tuple[str, str]] = Counter()
    for pod, node in bindings.items():
        w = owner.get(pod)
        if w is not None and replicas.get(w):
            per[(w, node)] += 1
    if not per:
        return None
    return max(n / replicas[w] for (w, _), n in per.items())


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..100]: the smallest value with at least q % of
    the values at or below it. No interpolation: every figure reported was observed."""
    if not values:
        raise ValueError("no values")
    if not 0 < q <= 100:
        raise ValueError(f"q must be in (0, 100], got {q}")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass(frozen=True)
class Timing:
    bound: int
    throughput: float  # pods bound per second, first creation to last binding
    create_rate: float  # pods created per second, first to last creation
    p50: float  # creation -> binding latency, seconds
    p99: float


def timing(
    created: Mapping[str, float], bound: Mapping[str, float], started: float | None = None
) -> Timing | None:
    """Throughput and creation->binding latency from client-side timestamps (seconds on one
    clock). Pods never bound are left out (the report counts them); None when none bound.

    Backlog mode (`started`: when the scheduler was launched, every pod created before):
    throughput is the drain rate, the pods bound after the first over the time from the
    first binding to the last (the scheduler's start-up left out), and the latencies are
    from `started` to each binding (how long a pod of the backlog waited for the
    scheduler)."""
    mine = [p for p in bound if p in created]
    if not mine:
        return None
    start = min(created.values())
    cspan = max(created.values()) - start
    create_rate = len(created) / cspan if cspan > 0 else math.inf
    if started is not None:
        times = sorted(bound[p] for p in mine)
        lat = [t - started for t in times]
        span = times[-1] - times[0]
        return Timing(
            bound=len(mine),
            throughput=(len(mine) - 1) / span if span > 0 else math.inf,
            create_rate=create_rate,
            p50=percentile(lat, 50),
            p99=percentile(lat, 99),
        )
    lat = [bound[p] - created[p] for p in mine]
    span = max(bound[p] for p in mine) - start
    return Timing(
        bound=len(lat),
        throughput=len(lat) / span if span > 0 else math.inf,
        create_rate=create_rate,
        p50=percentile(lat, 50),
        p99=percentile(lat, 99),
    )


@dataclass(frozen=True)
class Decisions:
    """The scheduler's own pace, from its metrics (runner.DecisionWatch)."""

    rate: float | None  # pods decided per second, first sampled decision to the last
    algorithm: float  # mean scheduling-algorithm seconds per pod (extenders included)
    cpu: float | None = None  # CPU seconds per pod, the scheduler and its extender together
    extender_cpu: float | None = None  # of which the extender's process


def decisions(
    first: Sequence[float] | None,
    decided_at: float | None,
    target: int,
    algorithm_seconds: float | None,
    algorithm_pods: int | None,
    cpu_seconds: float | None = None,
    extender_cpu_seconds: float | None = None,
) -> Decisions | None:
    """None when the run has no algorithm figures (results from before they were
    recorded). The rate counts the pods decided after the first sample that saw one, over
    the time to the sample that saw the last (samples 0.2 s apart: the scheduler's
    start-up is left out as the drain leaves it out); `cpu_seconds`, the processes' CPU
    over the same samples, is shared among the same pods, and so is `extender_cpu_seconds`,
    the extender's part of it."""
    if not algorithm_pods or algorithm_seconds is None:
        return None
    rate = cpu = extender = None
    if first is not None and decided_at is not None and decided_at > first[0]:
        rate = (target - first[1]) / (decided_at - first[0])
        if target > first[1]:
            pods = target - first[1]
            cpu = None if cpu_seconds is None else cpu_seconds / pods
            extender = None if extender_cpu_seconds is None else extender_cpu_seconds / pods
    return Decisions(rate, algorithm_seconds / algorithm_pods, cpu, extender)


def replacements(
    evictions: Sequence[Mapping[str, Any]],
    workload: Mapping[str, str],
    created: Mapping[str, float],
    replicas: Mapping[str, int],
) -> dict[str, Mapping[str, Any]]:
    """Which pod replaced which evicted one: replacement pod -> its eviction ({"pod",
    "node", "at"}).

    A ReplicaSet of `replicas[w]` pods that lost k pods created k more; those are the k
    pods of the workload created last. Each eviction, in order, is paired with the first
    of them created after it (the ReplicaSet creates a replacement once it sees the pod
    go). An eviction while the workload was still being scaled up can pair with a pod the
    scale-up created; the count of replacements is exact either way."""
    by_workload: dict[str, list[str]] = {}
    for pod, w in workload.items():
        if pod in created:
            by_workload.setdefault(w, []).append(pod)
    spare: dict[str, list[str]] = {}
    for w, pods in by_workload.items():
        pods.sort(key=lambda p: created[p])
        extra = max(0, len(pods) - replicas.get(w, len(pods)))
        spare[w] = pods[len(pods) - extra :] if extra else []
    out: dict[str, Mapping[str, Any]] = {}
    for ev in sorted(evictions, key=lambda e: float(e["at"])):
        w = workload.get(str(ev["pod"]), "")
        for pod in spare.get(w, []):
            if pod not in out and created[pod] >= float(ev["at"]):
                out[pod] = ev
                break
    return out


def moved_back(pairs: Mapping[str, Mapping[str, Any]], placed: Mapping[str, str]) -> int:
    """Replacements first bound to the node their evicted pod was evicted from."""
    return sum(1 for pod, ev in pairs.items() if placed.get(pod) == ev["node"])
