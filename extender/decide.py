"""Filter and prioritize over a list of node states. Pure functions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

import msgspec

from .estimate import PodFacts, demand_after, go_round
from .model import NodeInfo, NodeState
from .policies.base import MAX_SCORE, PRIORITY_OF, NodeScore, Policy, to_extender_priority
from .policies.least_used import (
    LeastUsed,
    beyond_least,
    full_by_guess,
    hottest_raises,
    lower_for_raising,
    raised_note,
)
from .policies.spread import fair_share, near_best, passed_note, rooms

__all__ = [
    "DEFAULT_THRESHOLDS",
    "FilterOutcome",
    "Over",
    "Ranked",
    "best",
    "conclude_filter",
    "filter_nodes",
    "node_thresholds",
    "over_excess",
    "over_reason",
    "prioritize",
    "scorer",
    "to_priorities",
]

DEFAULT_THRESHOLDS: Mapping[str, float] = {"cpu": 90.0, "memory": 90.0}


def node_thresholds(info: NodeInfo | None, default: Mapping[str, float]) -> Mapping[str, float]:
    """The thresholds the filter applies to one node: ``default`` (the config's), each
    replaced by the node's own where it has one (``NodeInfo.cpu_threshold``, from its
    annotation or label). ``default`` itself when the node has none of its own."""
    if info is None or (info.cpu_threshold is None and info.memory_threshold is None):
        return default
    own = dict(default)
    if info.cpu_threshold is not None:
        own["cpu"] = info.cpu_threshold
    if info.memory_threshold is not None:
        own["memory"] = info.memory_threshold
    return own


class FilterOutcome(msgspec.Struct, frozen=True):
    passed: list[str]
    """The nodes to answer, in the candidates' order."""
    failed: dict[str, str]
    """Rejected node -> why."""
    let_through: dict[str, str] = msgspec.field(default_factory=dict)
    """Nodes over a threshold that pass all the same (node -> why they are over): every
    one for an exempt pod, the least loaded (and those within the band) when every
    candidate was over."""
    thresholds: dict[str, dict[str, float]] = msgspec.field(default_factory=dict)
    """Candidate -> the thresholds applied, for those whose differ from the default."""
    all_over: bool = False
    """Every candidate was over a threshold, so the least loaded were let through."""


def filter_nodes(
    pod: PodFacts,
    nodes: Sequence[NodeState],
    thresholds: Mapping[str, float],
    *,
    exempt: bool = False,
    sigmas: float = 0.0,
    band: float = 0.0,
) -> FilterOutcome:
    """Reject a node when its use after placing the pod exceeds its threshold
    (Koordinator's rule: rounded percent > threshold; the node's own or ``thresholds``,
    see :func:`node_thresholds`). The pods the measurement cannot show yet, this one
    included, count at ``estimate.filter_usage``: CPU at the request, memory at the
    estimate the scores use (its docstring says why). The measured use counts ``sigmas``
    standard deviations above its mean where the source reports one
    (``estimate.peak_percent``): a filter on the node's peaks, not its average.

    Load alone never leaves a pod nowhere to go: with ``exempt`` (a pod that must run
    where the scheduler puts it, see ``exemptions``) no node is rejected, and when every
    candidate is over, the ones least over their threshold (the largest excess of their
    resources, in rounded percentage points; all that share it, and all within ``band``
    points of it) pass. Kube-scheduler would otherwise keep the pod Pending until the load
    falls, and skip preemption for it (the rejections are unresolvable). Those nodes are
    in ``let_through``.

    ``band`` (the policy's spreading band, ``policies.spread.SPREAD_BAND`` for least-used,
    0 for the others): with the least over alone, the filter leaves one node and
    kube-scheduler binds there without calling prioritize, so neither the spreading term
    nor the hottest-node term ever sees the choice, and on a busy cluster every pod goes
    to whichever node is least over. In the placement benchmark's generated cluster
    gen-3116 (a mini PC beside two Pis, read from Prometheus with a deviation over a
    15-minute window) 30 of 46 pods were placed by the filter alone, and a three-replica
    workload had all its pods on one Pi for 220 s while the other Pi used 63 % of its CPU
    and 26 % of its memory: that Pi was 4 points further over at its mean + 1 deviation.
    Nodes a band apart differ by a pod or two (``SPREAD_BAND``'s docstring); which of them
    takes the pod is prioritize's to decide."""
    passed: list[str] = []
    failed: dict[str, str] = {}
    excess: dict[str, float] = {}
    own: dict[str, dict[str, float]] = {}
    for node in nodes:
        limits = node_thresholds(node.info, thresholds)
        if limits is not thresholds and limits != thresholds:
            own[node.name] = dict(limits)
        marks = []
        for resource, threshold in limits.items():
            demand = demand_after(resource, pod, node, filtering=True, sigmas=sigmas)
            if demand is None or not demand.allocatable:
                continue
            rounded = go_round(demand.percent)
            if rounded > threshold:
                marks.append((resource, rounded, threshold))
        if marks:
            failed[node.name] = over_reason(marks, estimated=node.estimated)
            excess[node.name] = over_excess(marks)
        else:
            passed.append(node.name)
    return conclude_filter(
        [n.name for n in nodes], passed, failed, excess, own, exempt=exempt, band=band
    )


Over = tuple[str, int, float]
"""A resource over its threshold: (resource, rounded percent after placement, threshold)."""


def over_reason(marks: Sequence[Over], *, estimated: bool) -> str:
    """Why a node is rejected, as the Event and the answer's FailedNodes say it."""
    est = ", estimated" if estimated else ""
    return "; ".join(f"{r} {rounded}% > {t:g}% threshold{est}" for r, rounded, t in marks)


def over_excess(marks: Sequence[Over]) -> float:
    """How far the node is over: its worst resource's excess, in rounded points."""
    return max(rounded - t for _, rounded, t in marks)


def conclude_filter(
    names: Sequence[str],
    passed: list[str],
    failed: dict[str, str],
    excess: Mapping[str, float],
    own: dict[str, dict[str, float]],
    *,
    exempt: bool,
    band: float = 0.0,
) -> FilterOutcome:
    """The filter's answer from each candidate's verdict (``names``: every candidate,
    in order; ``passed`` those under their thresholds, in the same order): the "no dead
    end" rules of :func:`filter_nodes`. Shared with the fast path (``fastpath``), so the
    two cannot drift apart."""
    if not failed or (passed and not exempt):
        return FilterOutcome(passed, failed, thresholds=own)
    if exempt:
        chosen = set(failed)
    else:
        least = min(excess.values())
        chosen = {name for name, over in excess.items() if over <= least + band}
    let_through = {name: failed.pop(name) for name in list(failed) if name in chosen}
    keep = set(passed) | chosen
    return FilterOutcome(
        [n for n in names if n in keep],
        failed,
        let_through,
        own,
        all_over=not passed and not exempt,
    )


class Ranked(msgspec.Struct, frozen=True):
    node: str
    priority: int
    """0..10, what the extender answers."""
    detail: NodeScore


def to_priorities(
    names: Sequence[str], scores: Sequence[int], pending: Callable[[str], float] | None = None
) -> tuple[list[int], int | None]:
    """Map 0..100 scores to the extender's 0..10, and name the winner (its index).

    kube-scheduler breaks exact ties of the total score at random (selectHost in
    pkg/scheduler/schedule_one.go). The extender counts the pod on one node (the
    herding protection, see ``ledger``), so a tie at the top would make that
    count a guess: in a burst without a pod watch the guesses drift from where
    the pods really went, and the burst herds. So the top is never a tie: the
    winner is the highest fine score, then the fewest pods placed recently
    (``pending(name)``: the ledger's count, which also spreads a burst over nodes
    whose score a pod does not move, e.g. when their sizes are unknown), then the
    first name; every other node in the winner's 0..10 step drops one step (at step 0
    the winner rises to 1 instead). With otherwise equal scheduler scores the
    scheduler then picks the winner, which is where the ledger counts the pod.
    """
    if not scores:
        return [], None
    top_score = max(scores)
    tied = [i for i, s in enumerate(scores) if s == top_score]
    if len(tied) == 1:
        win = tied[0]
    elif pending is None:
        win = min(tied, key=names.__getitem__)
    else:
        count = pending  # bound for the lambda (mypy does not narrow into it)
        win = min(tied, key=lambda i: (count(names[i]), names[i]))
    table = PRIORITY_OF
    priorities = [table[s] if 0 <= s <= MAX_SCORE else to_extender_priority(s) for s in scores]
    top = priorities[win]
    rivals = [i for i, p in enumerate(priorities) if p == top and i != win]
    if rivals and top == 0:
        priorities[win] = 1
    elif rivals:
        for i in rivals:
            priorities[i] -= 1
    return priorities, win


def _without(
    use: tuple[tuple[float, float] | None, ...], soft: frozenset[str]
) -> tuple[tuple[float, float] | None, ...]:
    """A node's ``LeastUsed.uses`` without the ``soft`` resources (``full_by_guess``): the
    hottest-node term leaves them out."""
    pairs = zip(("cpu", "memory"), use, strict=True)
    return tuple(None if name in soft else u for name, u in pairs)


def scorer(
    policy: Policy, soft: frozenset[str]
) -> Callable[[PodFacts, NodeState, bool], NodeScore]:
    """``policy.score``, with the resources ``least_used.full_by_guess`` found counted at 0
    when there are any (only least-used's scores take them). The one choice the general
    path and the fast path's Event make."""
    if soft and isinstance(policy, LeastUsed):
        return partial(policy.score, soft=soft)
    return policy.score


def prioritize(
    pod: PodFacts, nodes: Sequence[NodeState], policy: Policy, *, explain: bool = False
) -> list[Ranked]:
    """Score every node, map to 0..10 (see :func:`to_priorities`); the winner's
    ``detail`` carries its reason, for its Event."""
    uses = [policy.uses(pod, n) for n in nodes] if isinstance(policy, LeastUsed) else []
    soft: frozenset[str] = frozenset()
    if pod.guessed and uses and isinstance(policy, LeastUsed):
        soft = full_by_guess(uses, pod.guessed, lambda i: policy.read_within(nodes[i]))
    score = scorer(policy, soft)
    details = [score(pod, node, explain) for node in nodes]
    names = [n.name for n in nodes]
    pending = {n.name: n.pending_pods for n in nodes}
    scores = [d.score for d in details]
    raised: dict[int, str] = {}  # the nodes the hottest-node term lowered, and why
    passed: list[int] = []  # the nodes the fair-share term lowered
    loads = list(scores)  # before the hottest-node term: what the fair-share band weighs
    if isinstance(policy, LeastUsed) and policy.hottest_weight:
        weighed = [_without(use, soft) for use in uses] if soft else uses
        raises = beyond_least(hottest_raises(weighed), [any(u) for u in weighed])
        changed = lower_for_raising(
            scores, {i: by for i, by in enumerate(raises) if by > 0.0}, policy.hottest_weight
        )
        for i, lowered in sorted(changed.items()):
            raised[i] = raised_note(raises[i])
            details[i] = NodeScore(lowered, details[i].why + raised[i])
            scores[i] = lowered
    band: int = getattr(policy, "spread_band", 0)
    if band:  # the spreading term among the near-best (policies.spread.near_best)
        same = [n.same_owner for n in nodes]
        # whether each node has room for the pod, for both spreading terms; neither acts
        # unless the pod's set has pods on some candidate
        room = (
            rooms(
                [
                    (use[0][0] if use[0] else None, use[1][0] if use[1] else None)
                    if n.info
                    else (None, None)
                    for n, use in zip(nodes, uses, strict=True)
                ]
            )
            if uses and any(same)
            else None
        )
        spread = near_best(scores, same, band, max((n.owner_pods for n in nodes), default=0), room)
        details = [
            d if s == d.score else NodeScore(s, f"{d.why}; spread: {n.same_owner} of its set here")
            for d, s, n in zip(details, spread, nodes, strict=True)
        ]
        scores = spread
        if room is not None:
            # and beyond the band, a node over its share of the set (spread.fair_share)
            fair = fair_share(
                scores,
                same,
                [n.info.cpu_allocatable_millis if n.info else 0 for n in nodes],
                [n.info.memory_allocatable_bytes if n.info else 0 for n in nodes],
                room,
                loads,
            )
            passed = [i for i, (a, b) in enumerate(zip(scores, fair, strict=True)) if a != b]
            details = [
                d
                if s == d.score
                else NodeScore(s, f"{d.why}; over its share of the set: {n.same_owner} here")
                for d, s, n in zip(details, fair, nodes, strict=True)
            ]
            scores = fair
    priorities, win = to_priorities(names, scores, pending.__getitem__)
    if win is not None and not explain:
        why = score(pod, nodes[win], True).why + raised.get(win, "")
        details[win] = NodeScore(scores[win], why)
    if win is not None and passed:
        note = passed_note([names[i] for i in passed], [nodes[i].same_owner for i in passed])
        details[win] = NodeScore(details[win].score, details[win].why + note)
    return [Ranked(n, p, d) for n, p, d in zip(names, priorities, details, strict=True)]


def best(ranked: Sequence[Ranked]) -> Ranked | None:
    """The winner (see :func:`to_priorities`): the one node at the top 0..10 priority."""
    if not ranked:
        return None
    return max(ranked, key=lambda r: r.priority)
