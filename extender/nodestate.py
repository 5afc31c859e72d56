"""Build the per-node state the policies score, from what the extender holds.

The interesting part is the node with no fresh measurement (it just joined, or
the source's data went stale). Trimaran scores it 0, so a node that has just
joined, with no metrics yet, is every pod's last choice and stays empty. Here
its load is *estimated*: the idlest measured node's use as a floor (a fresh
node runs at least the same system daemons), plus the estimated use of the pods
known to run on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from .ledger import REPORT_INTERVAL_SECONDS, Ledger, Pending
from .model import LoadSnapshot, NodeInfo, NodeLoad, NodeState, ResourceLoad, Usage

__all__ = ["ClusterFacts", "build_states"]


class ClusterFacts(msgspec.Struct, frozen=True):
    """What the pod watch knows per node: running pods and their estimated use."""

    pod_counts: Mapping[str, int]
    pod_usage: Mapping[str, Usage]
    pod_tlp_cpu: Mapping[str, float]


_EMPTY = Pending()


def _floor(snapshot: LoadSnapshot | None) -> tuple[float, float]:
    if snapshot is None:
        return 0.0, 0.0
    cpus = [n.cpu.avg for n in snapshot.nodes.values() if n.cpu.avg is not None]
    mems = [n.memory.avg for n in snapshot.nodes.values() if n.memory.avg is not None]
    return (min(cpus) if cpus else 0.0, min(mems) if mems else 0.0)


def build_states(
    names: Iterable[str],
    infos: Mapping[str, NodeInfo],
    snapshot: LoadSnapshot | None,
    *,
    fresh: bool,
    ledger: Ledger,
    cluster: ClusterFacts | None,
) -> list[NodeState]:
    """One NodeState per name, in order. ``fresh`` says whether ``snapshot`` may be
    trusted; a stale snapshot is treated as no measurement at all (unknown, not zero)."""
    measured = snapshot.nodes if (snapshot is not None and fresh) else {}
    since = snapshot.window_end - REPORT_INTERVAL_SECONDS if measured and snapshot else None
    recent = ledger.recent(since) if since is not None else ledger.everything()
    unconfirmed = ledger.unconfirmed() if cluster is not None else None
    everything = ledger.everything() if cluster is None else None
    floor_cpu, floor_mem = _floor(snapshot if measured else None)

    states: list[NodeState] = []
    for name in names:
        info = infos.get(name)
        pod_count = cluster.pod_counts.get(name, 0) if cluster is not None else None
        load = measured.get(name)
        if load is not None and (load.cpu.avg is not None or load.memory.avg is not None):
            pending = recent.get(name, _EMPTY)
            states.append(
                NodeState(
                    name=name,
                    info=info,
                    load=load,
                    pending=pending,  # running totals, read like a Usage
                    pending_tlp_cpu_millis=pending.tlp_cpu_millis,
                    pending_pods=pending.pods,
                    pod_count=pod_count,
                )
            )
            continue
        # No fresh measurement: estimate from the pods known to be there.
        if cluster is not None:
            usage = cluster.pod_usage.get(name, Usage())
            tlp = cluster.pod_tlp_cpu.get(name, 0.0)
            extra = (unconfirmed or {}).get(name, _EMPTY)
        else:
            usage, tlp = Usage(), 0.0
            extra = (everything or {}).get(name, _EMPTY)
        usage = usage + extra.usage
        tlp += extra.tlp_cpu_millis
        if info is not None and info.cpu_capacity_millis and info.memory_capacity_bytes:
            cpu_pct = floor_cpu + 100 * usage.cpu_millis / info.cpu_capacity_millis
            mem_pct = floor_mem + 100 * usage.memory_bytes / info.memory_capacity_bytes
        else:
            cpu_pct, mem_pct = floor_cpu, floor_mem
        states.append(
            NodeState(
                name=name,
                info=info,
                load=NodeLoad(ResourceLoad(cpu_pct, 0.0), ResourceLoad(mem_pct, 0.0)),
                estimated=True,
                pending=Usage(),
                pending_tlp_cpu_millis=0.0,
                pending_pods=extra.pods,
                pod_count=pod_count,
            )
        )
    return states
