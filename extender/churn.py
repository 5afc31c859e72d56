"""The part of a node's reported standard deviation its own pods' comings and goings make.

A source that averages over a window (load-watcher over Prometheus: each node's mean and
standard deviation over 15 minutes) reports the deviation of the node's whole use. Where
pods come and go, much of it is theirs: a pod of 2 cores on a 4-core node, there for half
the window, adds 25 points of deviation by itself. The scores and the filter read the
deviation as how far the node's use swings beyond what the extender knows of
(``estimate.peak_percent``), and the pods are what it knows best: the ones placed since
the reading's window began count on their own (``inflight``), so their swing was counted
twice. In the placement benchmark's steady-vary (two nodes whose memory swings by a
standard deviation of 25 %, two whose memory holds, pods of 6 % coming and going), the
steady nodes read deviations of 11-19 % and took fewer pods than they could; in the
generated gen-3116-1 the filter rejected both of a workload's other nodes as over their
thresholds at the mean plus a deviation made by another workload's 2-core pods, and its
three replicas stayed on one node for 220 s (docs/history/placement-c31703b/placement.md).

The use of the pods that started or ended within the window, summed over time, is a step
function P(t) the extender knows exactly (each pod's placement and departure times and
its measured use); its variance over the window is worked out exactly, cross terms
included (a pod replaced on the same node by one alike leaves P unchanged), and taken off
the reported variance: what is left is the deviation of the rest, the node's own use and
that of pods whose comings the extender did not see, assumed independent of P. Never
below 0: where the pods explain it all, the node holds steady.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

import msgspec

from .model import LoadSnapshot, NodeInfo, NodeLoad, ResourceLoad

__all__ = ["Stay", "pods_variance", "without_churn"]

Stay = tuple[float, float, float, float]
"""One pod on one node: (from, until (inf: still there), CPU millicores, memory bytes)."""


def pods_variance(stays: Iterable[Stay], start: float, end: float) -> tuple[float, float]:
    """The variance over [``start``, ``end``] of the summed use of ``stays`` (CPU in
    millicores squared, memory in bytes squared). A pod there throughout adds a constant,
    which changes no variance, so it is left out; so is one outside the span."""
    span = end - start
    if not span > 0:
        return 0.0, 0.0
    events: list[tuple[float, float, float]] = []
    for since, until, cpu, memory in stays:
        a, b = max(since, start), min(until, end)
        if b <= a or (a <= start and b >= end):
            continue
        events.append((a, cpu, memory))
        events.append((b, -cpu, -memory))
    if not events:
        return 0.0, 0.0
    events.sort(key=lambda e: e[0])
    at, cpu, memory = start, 0.0, 0.0
    sum_c = sq_c = sum_m = sq_m = 0.0
    for t, dc, dm in events:
        dt = t - at
        sum_c += cpu * dt
        sq_c += cpu * cpu * dt
        sum_m += memory * dt
        sq_m += memory * memory * dt
        at, cpu, memory = t, cpu + dc, memory + dm
    # after the last event every partial pod has ended or runs on with the level it left
    dt = end - at
    sum_c += cpu * dt
    sq_c += cpu * cpu * dt
    sum_m += memory * dt
    sq_m += memory * memory * dt
    mean_c, mean_m = sum_c / span, sum_m / span
    return max(0.0, sq_c / span - mean_c * mean_c), max(0.0, sq_m / span - mean_m * mean_m)


def _less(load: ResourceLoad, variance: float, capacity: float) -> ResourceLoad:
    """``load`` with ``variance`` (of a use in the resource's units, on a node of
    ``capacity``) taken off its standard deviation; ``load`` itself when nothing changes."""
    if not load.std or variance <= 0.0 or capacity <= 0:
        return load
    share = variance * (100.0 / capacity) ** 2  # in percent of capacity, squared
    return ResourceLoad(load.avg, math.sqrt(max(0.0, load.std * load.std - share)))


def without_churn(
    snapshot: LoadSnapshot,
    stays: Mapping[str, list[Stay]],
    size_of: Callable[[str], NodeInfo | None],
    since_of: Callable[[str], float | None],
) -> LoadSnapshot:
    """``snapshot`` with each node's standard deviations less what ``stays`` (per node, its
    pods that started or ended in the window) explain over the reading's window, its last
    ``settle_seconds`` (from the node's creation, ``since_of``, where later: its mean and
    deviation cover no more). ``snapshot`` itself when no figure changes (no deviations,
    no such pods, or nodes of unknown size)."""
    end = snapshot.window_end
    nodes: dict[str, NodeLoad] | None = None
    for name, its in stays.items():
        load = snapshot.nodes.get(name)
        info = size_of(name)
        if load is None or info is None or not (load.cpu.std or load.memory.std):
            continue
        created = since_of(name)
        start = end - snapshot.settle_seconds
        if created is not None and created > start:
            start = created
        var_cpu, var_memory = pods_variance(its, start, end)
        cpu = _less(load.cpu, var_cpu, info.cpu_capacity_millis)
        memory = _less(load.memory, var_memory, info.memory_capacity_bytes)
        if cpu is load.cpu and memory is load.memory:
            continue
        if nodes is None:
            nodes = dict(snapshot.nodes)
        nodes[name] = NodeLoad(cpu, memory)
    return snapshot if nodes is None else msgspec.structs.replace(snapshot, nodes=nodes)
