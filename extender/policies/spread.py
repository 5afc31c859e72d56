"""Keep one workload's replicas apart: a score reduced by the workload's share of a node.

kube-scheduler spreads a workload by default (PodTopologySpread's default constraints,
``kubernetes.io/hostname`` maxSkew 3 and zone maxSkew 5, ScheduleAnyway), but at the
extender's weight 10 load scores outweigh those few points, and least-used alone piled
replicas up: in the placement benchmark's steady-mix the largest share of one workload's
running pods on one node averaged 33 % against stock's 26 %, so a node's loss took more
replicas. Multiplying by (1 - weight x share) keeps the ranking by load among nodes
holding equal shares (on equal nodes, at an even spread, every node loses the same
fraction), turns a node already holding more of the workload down in proportion, and
leaves a bigger node room to take more: its higher free share outweighs a larger share.
"""

from __future__ import annotations

__all__ = ["spread_factor", "spread_score"]


def spread_factor(same_owner: int, owner_pods: int, weight: float) -> float:
    """1 - weight x (``same_owner`` / ``owner_pods``), within [0, 1]; 1 without pods
    of the workload anywhere or with weight 0."""
    if owner_pods <= 0 or same_owner <= 0 or weight <= 0:
        return 1.0
    share = min(1.0, same_owner / owner_pods)
    return max(0.0, 1.0 - weight * share)


def spread_score(score: int, same_owner: int, owner_pods: int, weight: float) -> int:
    """``score`` (0..100) times ``spread_factor``, rounded down."""
    factor = spread_factor(same_owner, owner_pods, weight)
    return score if factor >= 1.0 else int(score * factor)
