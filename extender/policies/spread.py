"""Keep one workload's replicas apart without overriding load.

kube-scheduler spreads a workload by default (PodTopologySpread's default constraints,
``kubernetes.io/hostname`` maxSkew 3 and zone maxSkew 5, ScheduleAnyway), but at the
extender's weight 10 load scores outweigh those few points, and least-used alone piled
replicas up: in the placement benchmark's steady-mix the largest share of one workload's
running pods on one node averaged 33-36 % against stock's 26-29 %, so a node's loss took
more replicas.

Two terms:

- ``near_best`` (least-used, always): among the nodes whose load score is within
  ``SPREAD_BAND`` points of the best, the ones holding more of the pod's controller's pods
  than the fewest of them score lower, ``SPREAD_BAND`` points for each pod more, never
  below the band's floor. A node outside the band is never lowered and never passed by
  one that is, so load decides every choice by more than the band: a node short of memory
  (a memory hog: 6 GiB of 8 used by something no pod requests, least-used's score some 60
  points below the cool nodes') is never chosen for spreading's sake, however many
  replicas the others hold. Among near-equals, where the winner was the node with the
  fewest pods placed lately, it is now the one with the fewest replicas. And a node holding
  every pod of the set comes just below the best other node with data (a score above 0):
  the second replica goes elsewhere whatever the band, onto the best other node, which the
  filter has kept under its thresholds. That much overrides load, once per set: in the
  simulator's het-22 (2-, 4- and 8-core nodes) a two-replica set had both pods on the 8-core
  node while others had room for 262 of 480 s.
- ``spread_score`` (``estimator.spread_weight``, 0 by default): the score times
  (1 - weight x the node's share of the workload). It can override load: at weight 1 it
  halved the score of a cool node holding half the replicas, and the lab's end-to-end test
  saw pods sent onto the memory hog.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["SPREAD_BAND", "near_best", "spread_factor", "spread_score"]

SPREAD_BAND = 5
"""Points of the 0..100 score. One 250m pod on a 4-core node moves least-used's CPU part by
6 and its mean of CPU and memory by about 3: nodes within 5 points differ by a pod or two."""


def near_best(scores: Sequence[int], same: Sequence[int], band: int = SPREAD_BAND) -> list[int]:
    """``scores`` with the spreading term (see the module docstring): ``same[i]`` is how many
    of the pod's controller's pods node ``i`` holds. A new list either way."""
    out = list(scores)
    if band <= 0 or not scores or not any(same):
        return out
    floor = max(scores) - band
    near = [i for i, s in enumerate(scores) if s >= floor]
    fewest = min(same[i] for i in near)
    for i in near:
        extra = same[i] - fewest
        if extra > 0:
            # never below the band's floor, nor below 0 from above it (a node over
            # capacity, least_used below 0, stays where it is)
            out[i] = max(floor, min(scores[i], 0), scores[i] - band * extra)
    holders = [i for i, n in enumerate(same) if n > 0]
    if len(holders) == 1:
        # every pod of the set on one node: it comes just below the best other node that
        # has data and room (a node over capacity or unmeasured scores 0 or below)
        only = holders[0]
        others = [s for i, s in enumerate(out) if i != only and s > 0]
        if others and out[only] >= max(others):
            out[only] = max(others) - 1
    return out


def spread_factor(same_owner: int, owner_pods: int, weight: float) -> float:
    """1 - weight x (``same_owner`` / ``owner_pods``), within [0, 1]; 1 without pods
    of the workload anywhere or with weight 0."""
    if owner_pods <= 0 or same_owner <= 0 or weight <= 0:
        return 1.0
    share = min(1.0, same_owner / owner_pods)
    return max(0.0, 1.0 - weight * share)


def spread_score(score: int, same_owner: int, owner_pods: int, weight: float) -> int:
    """``score`` times ``spread_factor``, rounded down; a score at or below 0 as it is."""
    factor = spread_factor(same_owner, owner_pods, weight)
    # a score below 0 (over capacity) times a factor would rise towards 0
    return score if factor >= 1.0 or score <= 0 else int(score * factor)
