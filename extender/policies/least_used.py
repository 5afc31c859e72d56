"""Weighted least-used on *actual* usage.

Per resource, the share of the node still free after the measured use, the pods
placed since the measurement and the incoming pod (Koordinator's
loadAwareSchedulingScorer, integer arithmetic included); then the weighted mean.
``{memory: 1}`` alone is seed 000's MemRealUsage; ``{pods: 1}`` alone is seed 001's
PodCapacityOfNode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..estimate import PodFacts, demand_after
from ..model import NodeState
from .base import MAX_SCORE, NodeScore

__all__ = ["LeastUsed", "RESOURCES"]

RESOURCES = ("cpu", "memory", "pods")


def _least_used(capacity: float, used: float) -> int:
    if capacity <= 0:
        return 0
    if used > capacity:
        return 0
    return int((capacity - used) * MAX_SCORE // capacity)


@dataclass(frozen=True)
class LeastUsed:
    weights: Mapping[str, float] = field(default_factory=lambda: {"cpu": 1, "memory": 1})
    dominant_weight: float = 0.0
    """Koordinator's dominantResourceWeight: the weight of the *worst* resource's
    score, so a node short of one resource (a memory hog) scores low even when
    the others are free."""
    name: str = "least-used"

    def _resource(
        self, resource: str, pod: PodFacts, node: NodeState, explain: bool
    ) -> tuple[int, str] | None:
        info = node.info
        if resource == "pods":
            if info is None or not info.pods_allocatable or node.pod_count is None:
                return None
            used = node.pod_count + node.pending_pods + 1
            text = f"pods {used}/{info.pods_allocatable}" if explain else ""
            return _least_used(info.pods_allocatable, used), text
        demand = demand_after(resource, pod, node)
        if demand is None:
            return None
        score = _least_used(demand.allocatable, demand.used)
        return score, f"{resource} {demand.percent:.0f}%" if explain else ""

    def rank(self, pod: PodFacts, nodes: Sequence[NodeState]) -> list[int]:
        """``score(...).score`` for many nodes at once, in one tight loop: this is
        the request path for every node of every pod. Kept equal to ``score`` by
        a randomized test (tests/extender/test_policies.py)."""
        w = self.weights
        wc, wm, wp = w.get("cpu", 0), w.get("memory", 0), w.get("pods", 0)
        dw = self.dominant_weight
        pod_cpu, pod_mem = pod.usage.cpu_millis, pod.usage.memory_bytes
        out = []
        for node in nodes:
            total = weights = 0.0
            worst = MAX_SCORE
            info = node.info
            if wc and (avg := node.load.cpu.avg) is not None:
                if info is None:
                    cap, used = 100.0, avg
                else:
                    cap = info.cpu_allocatable_millis
                    used = avg * info.cpu_capacity_millis / 100 + node.pending.cpu_millis + pod_cpu
                part = 0 if cap <= 0 or used > cap else int((cap - used) * MAX_SCORE // cap)
                total, weights, worst = total + part * wc, weights + wc, min(worst, part)
            if wm and (avg := node.load.memory.avg) is not None:
                if info is None:
                    cap, used = 100.0, avg
                else:
                    cap = info.memory_allocatable_bytes
                    used = (
                        avg * info.memory_capacity_bytes / 100 + node.pending.memory_bytes + pod_mem
                    )
                part = 0 if cap <= 0 or used > cap else int((cap - used) * MAX_SCORE // cap)
                total, weights, worst = total + part * wm, weights + wm, min(worst, part)
            if wp and info is not None and info.pods_allocatable and node.pod_count is not None:
                cap = info.pods_allocatable
                used = node.pod_count + node.pending_pods + 1
                part = 0 if used > cap else int((cap - used) * MAX_SCORE // cap)
                total, weights, worst = total + part * wp, weights + wp, min(worst, part)
            if weights and dw:
                total, weights = total + worst * dw, weights + dw
            out.append(int(total // weights) if weights else MAX_SCORE // 2)
        return out

    def score(self, pod: PodFacts, node: NodeState, explain: bool = True) -> NodeScore:
        total = 0.0
        weight_sum = 0.0
        worst = MAX_SCORE
        parts: list[str] = []
        for resource in RESOURCES:
            weight = self.weights.get(resource, 0)
            if not weight:
                continue
            result = self._resource(resource, pod, node, explain)
            if result is None:
                continue
            score, text = result
            total += score * weight
            weight_sum += weight
            worst = min(worst, score)
            parts.append(text)
        if not weight_sum:
            return NodeScore(MAX_SCORE // 2, "no usable load data; neutral")
        if self.dominant_weight:
            total += worst * self.dominant_weight
            weight_sum += self.dominant_weight
        if not explain:
            return NodeScore(int(total // weight_sum), "")
        why = ", ".join(parts) + " after placement"
        if node.estimated:
            why += " (estimated, no fresh metrics)"
        return NodeScore(int(total // weight_sum), why)
