"""Pods placed since the last load measurement: the herding protection.

Metrics lag placements by a window (load-watcher refreshes every minute,
metrics-server every 15 s). Without accounting for the pods placed meanwhile, a
burst of pods all sees the same "coolest" node and all lands on it. Like
Trimaran's PodAssignEventHandler and Koordinator's podAssignCache, the ledger
remembers each placement with its time and estimated use; a placement counts
towards a node until the measurement window has covered it.

Two ways in: ``bind`` from the extender's pod watch (what really happened), and
``assume`` from prioritize (the node the extender scored best) for when there is
no watch, or before the watch event arrives. A bind replaces an assumption.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Usage

__all__ = ["REPORT_INTERVAL_SECONDS", "Ledger", "Pending", "Placement"]

# Trimaran's metricsAgentReportingIntervalSeconds: a pod placed less than this
# before the window end is assumed not to be in the measurement yet.
REPORT_INTERVAL_SECONDS = 60.0
# Trimaran's cacheCleanupIntervalMinutes: the longest staleness a source has.
HORIZON_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class Placement:
    node: str
    usage: Usage
    tlp_cpu_millis: float
    at: float
    confirmed: bool


@dataclass(frozen=True, slots=True)
class Pending:
    usage: Usage
    tlp_cpu_millis: float
    pods: int


class Ledger:
    def __init__(self, horizon: float = HORIZON_SECONDS) -> None:
        self._placements: dict[str, Placement] = {}
        self._horizon = horizon

    def __len__(self) -> int:
        return len(self._placements)

    def assume(self, pod_key: str, node: str, usage: Usage, tlp_cpu: float, at: float) -> None:
        current = self._placements.get(pod_key)
        if current is not None and current.confirmed:
            return
        self._placements[pod_key] = Placement(node, usage, tlp_cpu, at, confirmed=False)

    def bind(self, pod_key: str, node: str, usage: Usage, tlp_cpu: float, at: float) -> None:
        current = self._placements.get(pod_key)
        if current is not None and current.confirmed and current.node == node:
            return
        if current is not None and current.node == node:
            at = min(at, current.at)  # keep the earlier time: the pod was there already
        self._placements[pod_key] = Placement(node, usage, tlp_cpu, at, confirmed=True)

    def forget(self, pod_key: str) -> None:
        self._placements.pop(pod_key, None)

    def prune(self, now: float) -> None:
        cutoff = now - self._horizon
        stale = [key for key, p in self._placements.items() if p.at < cutoff]
        for key in stale:
            del self._placements[key]

    def pending(
        self, since: float | None = None, *, unconfirmed_only: bool = False
    ) -> dict[str, Pending]:
        """Per node, the placements made after ``since`` (all when None)."""
        cpu: dict[str, float] = {}
        mem: dict[str, float] = {}
        tlp: dict[str, float] = {}
        count: dict[str, int] = {}
        for p in self._placements.values():
            if since is not None and p.at <= since:
                continue
            if unconfirmed_only and p.confirmed:
                continue
            cpu[p.node] = cpu.get(p.node, 0.0) + p.usage.cpu_millis
            mem[p.node] = mem.get(p.node, 0.0) + p.usage.memory_bytes
            tlp[p.node] = tlp.get(p.node, 0.0) + p.tlp_cpu_millis
            count[p.node] = count.get(p.node, 0) + 1
        return {
            node: Pending(Usage(cpu[node], mem[node]), tlp[node], count[node]) for node in count
        }
