"""Weighted least-used on *actual* usage.

Per resource, the share of the node still free after the measured use, the pods
placed since the measurement and the incoming pod (Koordinator's
loadAwareSchedulingScorer, integer arithmetic included); then the weighted mean.
``{memory: 1}`` alone scores by memory really in use, so a node whose memory is
mostly taken by processes no pod requests scores low however few requests it has;
``{pods: 1}`` alone scores by free pod slots (pods running over the node's pod
capacity), as a scheduler that spreads by pod count does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..estimate import PodFacts, demand_after
from ..model import NodeState
from .base import MAX_SCORE, NodeScore
from .spread import SPREAD_BAND, spread_score

__all__ = ["NO_DATA", "RESOURCES", "LeastUsed", "least_used"]

RESOURCES = ("cpu", "memory", "pods")
NO_DATA = -MAX_SCORE - 1
"""A node without usable data: below every measured node, even one over capacity."""


def least_used(allocatable: float, used: float) -> int:
    """One resource's score: the share of ``allocatable`` still free after ``used``,
    rounded down (Koordinator's leastUsedScore within capacity); 0 of no size.

    Over capacity the share goes below 0, down to -100 at twice the capacity, where
    Koordinator's scores 0. At 0 a node 50 % over scored as one just full, and the mean
    with a free resource decided between them: a node at 150 % CPU and 20 % memory
    outscored one at 110 % and 30 %. In the simulator's overloaded streams (more use than
    CPU, tests/extender/steady_sim.py) least-used's hottest node then ran 184 % where
    stock's ran 118 % (het-144), and 65 points above stock's on CPU was the worst of 60
    streams; ordered by how far over, the worst was 2.7 points (test_steady_sim.py). Every
    node over capacity still maps to priority 0 (``to_extender_priority``); the order
    picks the winner among them and keeps a fuller node below an emptier one."""
    if allocatable <= 0:
        return 0
    return max(-MAX_SCORE, int((allocatable - used) * MAX_SCORE // allocatable))


@dataclass(frozen=True)
class LeastUsed:
    weights: Mapping[str, float] = field(default_factory=lambda: {"cpu": 1, "memory": 1})
    dominant_weight: float = 0.0
    """Koordinator's dominantResourceWeight: the weight of the *worst* resource's
    score, so a node short of one resource (a memory hog) scores low even when
    the others are free."""
    name: str = "least-used"
    spread_weight: float = 0.0
    """How strongly a node's share of the pod's workload lowers its score
    (``spread.spread_score``; 0: not at all)."""
    spread_band: int = SPREAD_BAND
    """Points of the best score within which nodes holding fewer of the pod's controller's
    pods are preferred (``spread.near_best``, applied over all the nodes' scores; 0: off)."""

    def _resource(
        self, resource: str, pod: PodFacts, node: NodeState, explain: bool
    ) -> tuple[int, str] | None:
        info = node.info
        if resource == "pods":
            if info is None or not info.pods_allocatable or node.pod_count is None:
                return None
            used = node.pod_count + node.pending_pods + 1
            text = f"pods {used}/{info.pods_allocatable}" if explain else ""
            return least_used(info.pods_allocatable, used), text
        demand = demand_after(resource, pod, node)
        if demand is None:
            return None
        score = least_used(demand.allocatable, demand.used)
        return score, f"{resource} {demand.percent:.0f}%" if explain else ""

    def combine(self, cpu: int | None, memory: int | None, pods: int | None) -> int | None:
        """The node's score from its per-resource ``least_used`` scores (None: no
        data for that resource): the weighted mean over the resources that have a
        weight and data, with the worst of them counted again at the dominant
        weight; None when no resource counts. The one formula every path uses.

        A node the pod would take over capacity on some resource scores that resource's
        score alone (below 0), whatever is free of the others, so it ranks below every
        node the pod fits on: over capacity is throttling or OOM kills, not a little less
        room. In the mean, free memory made up for it: a pod counted at 2.2 cores on an
        idle 2-core node (CPU -18, memory 90: 36, or 18 with the worst counted again at
        dominantResourceWeight 1) outscored a busy 8-core node it fitted on at 98 % (15,
        or 10). In tests/extender/steady_sim.py's heterogeneous(241), pods of 2.2
        cores kept going to a 2-core node, which ran at 125 % for the whole stream,
        least-used's hottest node 17.6 points above stock's; with this rule 9.1 below."""
        total = weights = 0.0
        worst = MAX_SCORE
        w = self.weights
        for part, weight in (
            (cpu, w.get("cpu", 0)),
            (memory, w.get("memory", 0)),
            (pods, w.get("pods", 0)),
        ):
            if part is None or not weight:
                continue
            total += part * weight
            weights += weight
            worst = part if part < worst else worst
        if not weights:
            return None
        if worst < 0:
            return worst
        if self.dominant_weight:
            total += worst * self.dominant_weight
            weights += self.dominant_weight
        return int(total // weights)

    def score(self, pod: PodFacts, node: NodeState, explain: bool = True) -> NodeScore:
        parts: dict[str, int] = {}
        texts: list[str] = []
        for resource in RESOURCES:
            if not self.weights.get(resource, 0):
                continue
            result = self._resource(resource, pod, node, explain)
            if result is not None:
                parts[resource], text = result
                texts.append(text)
        score = self.combine(parts.get("cpu"), parts.get("memory"), parts.get("pods"))
        if score is None:
            # Lowest, as TargetLoadPacking and LoadVariationRiskBalancing score a node without
            # data: a node whose reading was refused (or went stale) is never preferred to a
            # measured one. Scored neutral (50), such a node beat every busier measured node:
            # in the steady-hog scenario the hog's own node, its reading refused as above
            # capacity, drew 11 pods (docs/placement.md). Among nodes all without data the
            # scores stay equal, so the ledger's tie-break still spreads a burst.
            return NodeScore(NO_DATA, "no usable load data; scored lowest")
        spread = bool(node.same_owner and self.spread_weight)
        if spread:
            score = spread_score(score, node.same_owner, node.owner_pods, self.spread_weight)
        if not explain:
            return NodeScore(score, "")
        why = ", ".join(texts) + " after placement"
        if spread:
            why += f"; {node.same_owner} of its workload's {node.owner_pods} pods here"
        if node.estimated:
            why += " (estimated, no fresh metrics)"
        return NodeScore(score, why)
