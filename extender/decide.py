"""Filter and prioritize over a list of node states. Pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
from msgspec.structs import replace

from .estimate import PodFacts, demand_after, go_round
from .model import NodeState
from .policies import NodeScore, Policy, to_extender_priority

__all__ = ["DEFAULT_THRESHOLDS", "FilterOutcome", "Ranked", "filter_nodes", "prioritize"]

DEFAULT_THRESHOLDS: Mapping[str, float] = {"cpu": 90.0, "memory": 90.0}


class FilterOutcome(msgspec.Struct, frozen=True):
    passed: list[str]
    failed: dict[str, str]


def filter_nodes(
    pod: PodFacts, nodes: Sequence[NodeState], thresholds: Mapping[str, float]
) -> FilterOutcome:
    """Reject a node when its estimated use after placing the pod exceeds a
    threshold (Koordinator's rule: rounded percent > threshold)."""
    passed: list[str] = []
    failed: dict[str, str] = {}
    for node in nodes:
        reasons = []
        for resource, threshold in thresholds.items():
            demand = demand_after(resource, pod, node)
            if demand is None or not demand.allocatable:
                continue
            rounded = go_round(demand.percent)
            if rounded > threshold:
                est = ", estimated" if node.estimated else ""
                reasons.append(f"{resource} {rounded}% > {threshold:g}% threshold{est}")
        if reasons:
            failed[node.name] = "; ".join(reasons)
        else:
            passed.append(node.name)
    return FilterOutcome(passed, failed)


class Ranked(msgspec.Struct, frozen=True):
    node: str
    priority: int
    """0..10, what the extender answers."""
    detail: NodeScore


def prioritize(
    pod: PodFacts, nodes: Sequence[NodeState], policy: Policy, *, explain: bool = False
) -> list[Ranked]:
    """Score every node and map to 0..10.

    Rounding 0..100 to 0..10 hides differences under five points, and then the
    node the extender counts the pod on (herding protection, see ``ledger``) may
    not be the one the scheduler picks among equals. So the best node by the
    fine score keeps a strict one-step lead over nodes that rounded into its step
    with a lower fine score; truly equal nodes stay equal.
    """
    rank = getattr(policy, "rank", None)
    if rank is not None and not explain:
        scores = rank(pod, nodes)
        ranked = [
            Ranked(n.name, to_extender_priority(s), NodeScore(s, ""))
            for n, s in zip(nodes, scores, strict=True)
        ]
    else:
        ranked = []
        for node in nodes:
            detail = policy.score(pod, node, explain)
            ranked.append(Ranked(node.name, to_extender_priority(detail.score), detail))
    top = best(ranked)
    if top is None:
        return ranked
    if not explain:  # the winner's reason, for its Event
        index = ranked.index(top)
        top = replace(top, detail=policy.score(pod, nodes[index], True))
        ranked[index] = top
    rivals = [
        i
        for i, r in enumerate(ranked)
        if r.node != top.node and r.priority == top.priority and r.detail.score < top.detail.score
    ]
    if rivals and top.priority == 0:
        ranked = [replace(r, priority=1) if r.node == top.node else r for r in ranked]
    elif rivals:
        for i in rivals:
            ranked[i] = replace(ranked[i], priority=ranked[i].priority - 1)
    return ranked


def best(ranked: Sequence[Ranked]) -> Ranked | None:
    """The winner by the extender's own view: highest 0..100 score, then name."""
    if not ranked:
        return None
    return min(ranked, key=lambda r: (-r.detail.score, r.node))
