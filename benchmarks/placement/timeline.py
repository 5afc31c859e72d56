"""A steady run's placement over time, from the scenario's ground truth: pure functions.

Between two events (a pod bound, a pod going, a node's background changed) every node's
load is constant: its background plus the declared usage of the pods on it, over its
capacity, as in measures.node_loads. The measures integrate that step function over the
stream's span. Above 100 % is demand over capacity: kwok reports whatever usage the pods
declare, so a node "at 120 %" has pods that would want 1.2 times what it has, where a real
node would throttle CPU or kill for memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from benchmarks.placement.measures import HOT_THRESHOLD
from benchmarks.placement.scenario import Change, Node, Resources

OVER_CAPACITY = 1.0


@dataclass(frozen=True)
class Stay:
    """A pod on a node from `start` to `end`, in seconds into the stream (the clock of the
    span and of the changes' `at_seconds`)."""

    pod: str
    workload: str
    node: str
    start: float
    end: float


@dataclass(frozen=True)
class OverTime:
    """The stream's figures. `hottest` is at each instant the highest utilisation of any
    node in either resource; its mean is over the span, its peak the highest it reached."""

    seconds: float
    mean_hottest: float
    peak_hottest: float
    over_80_seconds: float  # some node above 80 % (either resource)
    over_capacity_seconds: float  # some node's demand above its capacity
    mean_pods_on_hot: float  # pods on nodes while they count as hot, averaged over the span
    peak_share: float | None  # most of one workload's replicas on one node, at any instant


@dataclass(frozen=True)
class Segment:
    """A stretch of the stream over which nothing changed."""

    start: float
    seconds: float
    hottest: float  # the highest utilisation of any node, either resource
    pods_on_hot: int
    share: float | None  # most of one workload's replicas on one node


def segments(
    nodes: Sequence[Node],
    stays: Sequence[Stay],
    usage: Mapping[str, Resources],
    replicas: Mapping[str, int],
    span: tuple[float, float],
    changes: Sequence[Change] = (),
) -> Iterator[Segment]:
    """The step function of `stays` (pods' time on nodes, `usage` per workload) over
    `span`, one segment per stretch of positive length; a stay outside the span counts
    only for its part inside."""
    start, end = span
    if not end > start:
        raise ValueError(f"empty span {span}")
    by_name = {n.name: n for n in nodes}
    for s in stays:
        if s.node not in by_name:
            raise ValueError(f"pod {s.pod} is on {s.node!r}, not a node of the scenario")
    cpu = {n.name: n.background.cpu for n in nodes}
    background = {n.name: n.background.memory for n in nodes}
    pod_memory = dict.fromkeys(by_name, 0.0)
    # (time, +1 arrives / -1 goes / 0 change). Every event of one instant is applied before
    # the stretch after it is measured, so a replacement bound as its predecessor goes
    # never counts beside it.
    events: list[tuple[float, int, Stay | Change]] = []
    for s in stays:
        if s.end > start and s.start < end and s.end > s.start:
            events.append((max(s.start, start), 1, s))
            events.append((s.end, -1, s))
    events += [(max(c.at_seconds, start), 0, c) for c in changes if c.at_seconds < end]
    events.sort(key=lambda e: e[0])
    per: Counter[tuple[str, str]] = Counter()
    pods_on: Counter[str] = Counter()
    hot = {n.name for n in nodes if n.hot}
    i, t = 0, start
    while t < end:
        while i < len(events) and events[i][0] <= t:
            _, sign, what = events[i]
            i += 1
            if isinstance(what, Change):
                background[what.node] = what.memory
                if what.hot is not None:
                    (hot.add if what.hot else hot.discard)(what.node)
                continue
            u = usage[what.workload]
            cpu[what.node] += sign * u.cpu
            pod_memory[what.node] += sign * u.memory
            pods_on[what.node] += sign
            per[(what.workload, what.node)] += sign
        nxt = min(events[i][0], end) if i < len(events) else end
        if nxt > t:
            shares = [k / replicas[w] for (w, _), k in per.items() if k > 0 and replicas.get(w)]
            yield Segment(
                t,
                nxt - t,
                max(
                    max(
                        cpu[n.name] / n.capacity.cpu,
                        (background[n.name] + pod_memory[n.name]) / n.capacity.memory,
                    )
                    for n in nodes
                ),
                sum(pods_on[n] for n in hot),
                max(shares, default=None),
            )
        t = nxt


def over_time(parts: Sequence[Segment]) -> OverTime:
    """The measures of a stream's `segments` (all of them, in order)."""
    if not parts:
        raise ValueError("no segments: an empty span")
    mean = peak = over80 = over100 = hot_pods = 0.0
    share: float | None = None
    for g in parts:
        mean += g.hottest * g.seconds
        peak = max(peak, g.hottest)
        over80 += g.seconds if g.hottest > HOT_THRESHOLD else 0.0
        over100 += g.seconds if g.hottest > OVER_CAPACITY else 0.0
        hot_pods += g.seconds * g.pods_on_hot
        if g.share is not None:
            share = max(share or 0.0, g.share)
    total = parts[-1].start + parts[-1].seconds - parts[0].start
    return OverTime(
        seconds=total,
        mean_hottest=mean / total,
        peak_hottest=peak,
        over_80_seconds=over80,
        over_capacity_seconds=over100,
        mean_pods_on_hot=hot_pods / total,
        peak_share=share,
    )
