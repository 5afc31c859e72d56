"""Build the per-node state the policies score, from what the extender holds.

The interesting part is the node with no fresh measurement. Three cases:

- The snapshot is fresh but does not name the node (it just joined). Trimaran
  scores it 0, so a new node is every pod's last choice and stays empty. Here
  its load is *estimated*: the idlest measured node's use as a floor (a fresh
  node runs at least the same system daemons), plus the estimated use of the
  pods known to run on it.
- The snapshot is stale (older than ``stale_after_seconds``) but still usable
  (not older than ``max_stale_seconds``): every node keeps its *last known*
  measurement plus every placement since that reading (the ledger keeps them
  for longer than the usable age). A node at 95 % stays at 95 % or more; it is
  never read as idle because its source stopped answering. Marked ``estimated``.
- No usable snapshot (never measured, or older than ``max_stale_seconds``): the
  load is *unknown* (no figures at all). The filter does not reject on unknown
  data and the policies score it lowest, as they score every node without data
  (0 for least-used and Trimaran's policies alike), so a measured node is always
  preferred and among unmeasured nodes the scheduler's own scores decide. Reading
  unknown as 0 % would make the node the best choice of all.

A node whose reading the source's check refused (``readings``: not finite, negative,
over capacity) is *unknown* the same way, alone: the other nodes keep their figures.
It is not estimated from the idlest node either, which would read a broken exporter
as a quiet node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from .ledger import Ledger, Pending
from .model import LoadSnapshot, NodeInfo, NodeLoad, NodeState, ResourceLoad, Usage

__all__ = ["ClusterFacts", "build_states"]


class ClusterFacts(msgspec.Struct, frozen=True):
    """What the pod watch knows per node: running pods and their estimated use."""

    pod_counts: Mapping[str, int]
    pod_usage: Mapping[str, Usage]
    pod_tlp_cpu: Mapping[str, float]


_EMPTY = Pending()
_NO_LOAD = NodeLoad()


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
    usable: bool | None = None,
) -> list[NodeState]:
    """One NodeState per name, in order. ``fresh`` says whether ``snapshot`` is
    within ``stale_after_seconds``; ``usable`` (default: ``fresh``) whether it is
    within ``max_stale_seconds``, i.e. may still be read as the last known
    measurement. Without a usable snapshot every node's load is unknown."""
    if usable is None:
        usable = fresh
    if snapshot is None or not usable:
        return _unknown(names, infos, ledger, cluster)
    measured = snapshot.nodes
    since = snapshot.window_end - snapshot.settle_seconds
    recent = ledger.recent(since)
    unconfirmed = ledger.unconfirmed() if cluster is not None else None
    everything = ledger.everything() if cluster is None else None
    # Only a node the snapshot lacks reads the floor; a prioritize answer's Event asks
    # for its one winner, so it is not worked out over every reading per request.
    floor: tuple[float, float] | None = None
    stale = not fresh
    refused = snapshot.invalid

    states: list[NodeState] = []
    for name in names:
        info = infos.get(name)
        pod_count = cluster.pod_counts.get(name, 0) if cluster is not None else None
        if name in refused:
            placed = (unconfirmed if cluster is not None else everything) or {}
            states.append(_unknown_state(name, info, placed.get(name, _EMPTY), pod_count))
            continue
        load = measured.get(name)
        if load is not None and (load.cpu.avg is not None or load.memory.avg is not None):
            # Measured (maybe a while ago): the reading plus every placement since.
            pending = recent.get(name, _EMPTY)
            states.append(
                NodeState(
                    name=name,
                    info=info,
                    load=load,
                    estimated=stale,
                    pending=pending,  # running totals, read like a Usage
                    pending_tlp_cpu_millis=pending.tlp_cpu_millis,
                    pending_pods=pending.pods,
                    pod_count=pod_count,
                    pending_request=pending.request,
                )
            )
            continue
        # Not in the snapshot (a new node): estimate from the pods known to be there.
        if cluster is not None:
            usage = cluster.pod_usage.get(name, Usage())
            tlp = cluster.pod_tlp_cpu.get(name, 0.0)
            extra = (unconfirmed or {}).get(name, _EMPTY)
        else:
            usage, tlp = Usage(), 0.0
            extra = (everything or {}).get(name, _EMPTY)
        usage = usage + extra.usage
        tlp += extra.tlp_cpu_millis
        if floor is None:
            floor = _floor(snapshot)
        floor_cpu, floor_mem = floor
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


def _unknown(
    names: Iterable[str],
    infos: Mapping[str, NodeInfo],
    ledger: Ledger,
    cluster: ClusterFacts | None,
) -> list[NodeState]:
    """No usable measurement: no load figures (not zero). The pods placed are kept
    as counts, for a policy that scores by pod count and for the tie-break."""
    extra = ledger.unconfirmed() if cluster is not None else ledger.everything()
    return [
        _unknown_state(
            name,
            infos.get(name),
            extra.get(name, _EMPTY),
            cluster.pod_counts.get(name, 0) if cluster is not None else None,
        )
        for name in names
    ]


def _unknown_state(
    name: str, info: NodeInfo | None, extra: Pending, pod_count: int | None
) -> NodeState:
    return NodeState(
        name=name,
        info=info,
        load=_NO_LOAD,
        estimated=True,
        pending=Usage(),
        pending_tlp_cpu_millis=0.0,
        pending_pods=extra.pods,
        pod_count=pod_count,
    )
