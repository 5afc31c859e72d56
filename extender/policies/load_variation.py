"""Trimaran LoadVariationRiskBalancing: prefer nodes whose mean plus variation is low.

Current scheduler-plugins code (pkg/trimaran/loadvariationriskbalancing/analysis.go),
not the older KEP formula: per resource ``risk = (mu + margin * sigma^(1/sensitivity)) / 2``
and ``score = (1 - risk) * 100`` with mu the mean use plus the pod's request and sigma
the standard deviation, both as fractions of allocatable; the node's score is the
worse of CPU and memory when both are measured.

Addition: pods placed since the measurement count into mu (herding protection);
Trimaran ignores them here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..estimate import PodFacts, go_round
from ..model import NodeState, ResourceLoad
from .base import NodeScore

__all__ = ["LoadVariationRiskBalancing", "compute_score"]


def _clamp(x: float, low: float, high: float) -> float:
    return max(low, min(high, x))


def compute_score(
    capacity: float,
    request: float,
    used_avg: float,
    used_std: float,
    margin: float = 1.0,
    sensitivity: float = 1.0,
) -> float:
    """One resource's score, 0..100 (float), exactly as Trimaran's computeScore."""
    if capacity <= 0:
        return 0.0
    request = max(request, 0.0)
    used_avg = _clamp(used_avg, 0.0, capacity)
    used_std = _clamp(used_std, 0.0, capacity)
    mu = _clamp((used_avg + request) / capacity, 0.0, 1.0)
    sigma = _clamp(used_std / capacity, 0.0, 1.0)
    if sensitivity >= 0:
        exponent = math.inf if sensitivity == 0 else 1 / sensitivity
        sigma = sigma**exponent if sigma > 0 else 0.0
    sigma = _clamp(sigma * margin, 0.0, 1.0)
    risk = (mu + sigma) / 2
    return (1 - risk) * 100


@dataclass(frozen=True)
class LoadVariationRiskBalancing:
    safe_variance_margin: float = 1.0
    safe_variance_sensitivity: float = 1.0
    name: str = "load-variation-risk-balancing"

    def _one(self, load: ResourceLoad, capacity: float, request: float, pending: float) -> float:
        # pods gone since the reading (``ledger``) may take off more than it held
        avg = max((load.avg or 0.0) * capacity / 100 + pending, 0.0)
        std = (load.std or 0.0) * capacity / 100
        return compute_score(
            capacity, request, avg, std, self.safe_variance_margin, self.safe_variance_sensitivity
        )

    def score(self, pod: PodFacts, node: NodeState, explain: bool = True) -> NodeScore:
        info = node.info
        mib = 1024 * 1024
        cpu_cap = info.cpu_allocatable_millis if info else 100.0
        mem_cap = info.memory_allocatable_bytes / mib if info else 100.0
        cpu_req = pod.cpu_request_millis if info else 0.0
        mem_req = pod.memory_request_bytes / mib if info else 0.0
        scores: list[float] = []
        parts: list[str] = []
        if node.load.cpu.avg is not None:
            pending = node.pending.cpu_millis if info else 0.0
            scores.append(self._one(node.load.cpu, cpu_cap, cpu_req, pending))
            if explain:
                parts.append(f"cpu mean {node.load.cpu.avg:.0f}% sd {node.load.cpu.std or 0:.0f}%")
        if node.load.memory.avg is not None:
            pending = node.pending.memory_bytes / mib if info else 0.0
            scores.append(self._one(node.load.memory, mem_cap, mem_req, pending))
            if explain:
                parts.append(
                    f"memory mean {node.load.memory.avg:.0f}% sd {node.load.memory.std or 0:.0f}%"
                )
        if not scores:
            return NodeScore(0, "no load data")
        total = min(scores) if len(scores) == 2 else scores[0]
        why = ", ".join(parts)
        if node.estimated:
            why += " (estimated, no fresh metrics)"
        return NodeScore(go_round(total), why)
