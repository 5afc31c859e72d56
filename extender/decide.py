"""Filter and prioritize over a list of node states. Pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from .estimate import PodFacts, demand_after, go_round
from .model import NodeState
from .policies.base import MAX_SCORE, PRIORITY_OF, NodeScore, Policy, to_extender_priority

__all__ = [
    "DEFAULT_THRESHOLDS",
    "FilterOutcome",
    "Ranked",
    "best",
    "filter_nodes",
    "prioritize",
    "to_priorities",
]

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


def to_priorities(names: Sequence[str], scores: Sequence[int]) -> tuple[list[int], int | None]:
    """Map 0..100 scores to the extender's 0..10, and name the winner (its index).

    Rounding 0..100 to 0..10 hides differences under five points, and then the
    node the extender counts the pod on (herding protection, see ``ledger``) may
    not be the one the scheduler picks among equals. So the best node by the
    fine score keeps a strict one-step lead over nodes that rounded into its step
    with a lower fine score; truly equal nodes stay equal. The winner is the
    highest fine score, then the first name.
    """
    if not scores:
        return [], None
    top_score = max(scores)
    win = min((i for i, s in enumerate(scores) if s == top_score), key=names.__getitem__)
    table = PRIORITY_OF
    priorities = [table[s] if 0 <= s <= MAX_SCORE else to_extender_priority(s) for s in scores]
    top = priorities[win]
    rivals = [
        i
        for i, (p, s) in enumerate(zip(priorities, scores, strict=True))
        if p == top and s < top_score
    ]
    if rivals and top == 0:
        priorities[win] = 1
    elif rivals:
        for i in rivals:
            priorities[i] -= 1
    return priorities, win


def prioritize(
    pod: PodFacts, nodes: Sequence[NodeState], policy: Policy, *, explain: bool = False
) -> list[Ranked]:
    """Score every node, map to 0..10 (see :func:`to_priorities`); the winner's
    ``detail`` carries its reason, for its Event."""
    details = [policy.score(pod, node, explain) for node in nodes]
    names = [n.name for n in nodes]
    priorities, win = to_priorities(names, [d.score for d in details])
    if win is not None and not explain:
        details[win] = policy.score(pod, nodes[win], True)
    return [Ranked(n, p, d) for n, p, d in zip(names, priorities, details, strict=True)]


def best(ranked: Sequence[Ranked]) -> Ranked | None:
    """The winner by the extender's own view: highest 0..100 score, then name."""
    if not ranked:
        return None
    return min(ranked, key=lambda r: (-r.detail.score, r.node))
