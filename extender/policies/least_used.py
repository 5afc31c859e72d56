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

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..estimate import PodFacts, demand_after, peak_percent
from ..model import NodeState
from .base import MAX_SCORE, NodeScore
from .spread import SPREAD_BAND, spread_score

__all__ = [
    "HOTTEST_FLOOR",
    "HOTTEST_LEVEL_POWER",
    "HOTTEST_WEIGHT",
    "NO_DATA",
    "OVERALL_WEIGHT",
    "RAISED_CEILING",
    "RAISED_GAP",
    "RAISED_POINTS",
    "RESOURCES",
    "LeastUsed",
    "beyond_least",
    "held",
    "hottest_raises",
    "least_used",
    "level_weights",
    "overall_level",
    "full_by_guess",
    "less_for_raising",
    "lower_for_raising",
    "raised_ceiling",
    "raised_note",
    "unavoidable",
]

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


HOTTEST_WEIGHT = 2.0
"""Points of score a node loses per percentage point by which placing the pod there
raises the hottest candidate's use, summed over CPU and memory (``less_for_raising``).

The mean of free shares trades one resource for the other: a node with free memory
outscored one with free CPU in a cluster where CPU was the hot resource, and least-used's
hottest node ran hotter than the request-counting scheduler's. In the simulator
(tests/extender/steady_sim.py, 900 s streams, the hottest node's mean after 120 s,
least-used minus that scheduler; 240 drawn streams, ``heterogeneous`` and equal-size
nodes, seeds 101-160 and 301-360), streams more than 2 points hotter: on CPU 12 without
the term, 1 with it at 2 (het-145, +7.2), on memory 23 and 9 (worst +5.6); on CPU 1.9-3.0
points cooler on average per set of 60. On 120 streams drawn after (seeds 401-460): CPU 6
before, 4 after (worst +8.6), memory 14 and 2 (docs/contracts.md has the table;
``python tests/extender/steady_sim.py FIRST END --hottest-weight W``). At 3, memory was
better (4 of 240) but one steady-mix run kept a node at 85 % for two minutes (76.2 % against
stock's 73.8 % over the run); at 1, 3 CPU and 3 memory streams of heterogeneous 101-160
alone. It needs readings over capacity kept as read (``readings.SATURATED``): clamped to
100, a node at 159 % whose big pod left looked nearly idle, and took the next one."""
HOTTEST_FLOOR = 10
"""The penalty never takes a score below min(score, 10): a node the pod fits on stays
above every node it would take over capacity (those score below 0, ``least_used``)."""


HOTTEST_LEVEL_POWER = 2.0
"""A resource's raise counts (its hottest / the hottest of all resources) ** this
(``level_weights``). Lab, one-shot scenarios, 5 rounds (docs/history/oneshot-5fc1985-p2/): hog
79.9 % with 2 of 30 pods beside the hog at power 0, 77.4 % with 1 at 2, 75.0 % with none
at 4 (the last pod's scores then tie and the ledger's order decides); burst 68.9, 67.2,
67.2. Simulator (tests/extender/steady_sim.py): at 3 and above a stream of nodes run over
capacity (seeds 201-260) goes from 2.1 points hotter than stock at 0, 2.8 at 2, to 10.6,
and at 4 the hottest CPU's p99 from 12.6 to 45.6 points above stock's; on 30 streams per
class (heterogeneous, equal sizes, generated, beside a memory hog: seeds 101-130) 0 and 2
differ by at most 2 streams more than 2 points hotter, and beside a memory hog the worst
CPU stream goes from +7.3 to +1.1 (``python -c "from tests.extender import steady_sim as s;
s.main(['101', '131', '--classes', 'hogged', '--level-power', '0'])"``)."""


OVERALL_WEIGHT = 1.0
"""How much more a point counts by which the placement raises the hottest level of all
the resources, the higher of CPU and memory on the hottest node, summed with the
per-resource points (``overall_level``): once at 1 above its resource's own, doubled.

The per-resource points, even at ``level_weights``, weigh a raise of a resource cooler
than the hottest against one of the hottest itself, and the least-used mean decided
between two nodes a point apart: in the one-shot hog scenario (a node at 75 % memory nobody
requested, 30 pods in a burst) the 29th pod would raise the other nodes' CPU from 62 to
66.25 % (2.9 points at the level weight) and the hog's memory from 75 to 77.2 (2.2), and
went beside the hog, in every lab run (77.4 %, docs/history/oneshot-ec6a6d4/) and every
simulator run (``python tests/extender/steady_sim.py 1 11 --one-shot hog --classes``).
The placement benchmark's measure, and an operator's, is the hottest node whatever the
resource: no placement should raise it while another leaves it where it is. At 1 the hog's
node gets none of the 30 in every simulator run (75.0 %, the exact optimum), at 0.5 and 2
too. On 30 streams per class (metrics-server's readings, seeds 101-130: ``python
tests/extender/steady_sim.py 101 131 --source metrics-server --start-lag 1 3 --classes
heterogeneous "equal sizes" hogged generated --overall-weight W``), the hotter of CPU and
memory of the hottest node against stock, mean per class, at 0 / 0.5 / 1 / 2: -12.6 /
-13.2 / -13.2 / -13.6 points (heterogeneous), -10.3 / -11.3 / -11.4 / -11.9 (equal sizes),
-15.2 / -16.2 / -17.1 / -17.8 (beside a memory hog), -13.5 / -14.1 / -14.0 / -14.1
(generated); streams more than 2 points above stock on it 2, 0, 0, 0. The price is a
resource apart: streams more than 2 points above stock on CPU 4, 2, 4, 8 (beside a hog,
where CPU is the cooler resource: 0, 1, 2, 3), on memory 3, 5, 4, 4; and the spread: streams
whose largest share of a workload on one node is more than 10 points above stock's 14, 18,
18, 19, all on nodes of different sizes (on equal nodes 1 at every weight). On 60 overloaded
streams (``201 261 --classes heterogeneous``, load-watcher's readings) the hotter -16.8,
-17.0, -17.4, -17.4; shares 12, 15, 19, 16. The one-shot strong-weak stays the best
placement in 9 of 10 runs (8 at 2); steady-mix's CPU 70.8 % and steady-hog's memory 69.7
(run seeds 31-34) at 0, 70.6 and 69.9 at 1. On streams drawn after the weight was chosen
(``801 831``, the same command, 0 against 1): the hotter -14.7 / -15.8, -8.4 / -8.8, -14.4
/ -16.1, -14.4 / -15.4 per class, none more than 2 points above stock at either; CPU 2 and
3 streams, memory 6 and 5; shares 21 and 21 (on equal nodes 4 and 5: equal sizes 810,
+10.5 against +8.0)."""


def level_weights(tops: Sequence[float], power: float = HOTTEST_LEVEL_POWER) -> list[float]:
    """Per resource, how much a point of raise counts, from each resource's hottest use
    before placement (``tops``, percent): (top / the highest top) ** ``power``, 1 for the
    hottest resource, all 1 when nothing is in use.

    Summed unweighted, the points of CPU and memory were one currency, and the term chose
    the memory hog's node: in the one-shot hog scenario (a node at 77 % memory nobody
    requested, 30 pods in a burst), late in the burst a pod on either other node raised
    the hottest CPU, at 66 %, by 4.2 points and on the hog's node the hottest memory by
    2.2, so 2 of 30 pods went beside the hog in every run (79.9 %, docs/history/oneshot-cf91784/;
    75.0 % with none there without the term)."""
    highest = max(tops, default=0.0)
    if highest <= 0.0 or not power:
        return [1.0 for _ in tops]
    return [(max(top, 0.0) / highest) ** power for top in tops]


def hottest_raises(
    uses: Sequence[tuple[tuple[float, float] | None, ...]], overall: float | None = None
) -> list[float]:
    """Per node, by how many percentage points placing the pod there raises the hottest
    node's use among ``uses``, summed over the resources at ``level_weights``, plus
    ``overall`` (``OVERALL_WEIGHT`` when None) times what it raises the hottest level of
    all the resources (``overall_level``).

    ``uses``: per node, per resource (CPU, memory), its use after placement and before it
    (percent of allocatable), or None without data. The hottest before placement is taken
    over every node with data for that resource; a node raises it by what its use after
    placement exceeds it (0 when it stays below)."""
    count = max((len(u) for u in uses), default=0)
    tops = [max((v[1] for u in uses if (v := u[r]) is not None), default=0.0) for r in range(count)]
    weights = level_weights(tops)
    level = max(tops, default=0.0)
    raises: list[float] = []
    for node in uses:
        total = 0.0
        highest = level
        for r, use in enumerate(node):
            if use is not None and use[0] > tops[r]:
                total += (use[0] - tops[r]) * weights[r]
                highest = max(highest, use[0])
        raises.append(overall_level(total, highest - level, overall))
    return raises


def overall_level(raised: float, above: float, weight: float | None = None) -> float:
    """A node's raise (``hottest_raises``): ``raised``, the per-resource points at
    ``level_weights``, and ``weight`` (``OVERALL_WEIGHT`` when None) times ``above``, how
    far its use after placement goes above the hottest level of every resource before it.
    The one expression both paths take, so equal to the bit."""
    if above <= 0.0:
        return raised
    return raised + above * (OVERALL_WEIGHT if weight is None else weight)


def beyond_least(raises: Sequence[float], measured: Sequence[bool] | None = None) -> list[float]:
    """Each of ``raises`` (``hottest_raises``) less the least of them among the nodes
    ``measured`` (all when None): the raise no candidate avoids lowers none of them. When
    every node lifts the hottest CPU a little (nodes of one size, near one another), taken
    whole it lowered them all alike, and with ``RAISED_POINTS``' ceiling on whole raises a
    generated stream of the simulator put 33 points more of a workload on one node than
    stock did (the figures and commands are in ``RAISED_POINTS``)."""
    pool = [r for r, m in zip(raises, measured or [True] * len(raises), strict=True) if m]
    least = unavoidable([r for r in pool if r > 0.0], len(pool))
    if least <= 0.0:
        return list(raises)
    return [max(0.0, r - least) for r in raises]


def unavoidable(raised: Collection[float], candidates: int) -> float:
    """The raise no candidate avoids: the least of ``raised`` (the candidates' raises above
    0) when all ``candidates`` raise the hottest node, else 0. The one rule both paths take
    off (``beyond_least`` here, the fast path over its raised nodes alone)."""
    return min(raised) if raised and len(raised) == candidates else 0.0


RAISED_POINTS = 3.0
"""A node whose placement raises the hottest node by this many points or more beyond what
another candidate would (``beyond_least``) scores at most ``RAISED_CEILING``.

Lowered by ``HOTTEST_WEIGHT`` alone such a node stayed a priority step or two below the
best, and kube-scheduler's own scores, which count requests and the workload's spread,
gave it back: in the placement benchmark's steady-hog, once a reading showed the hog (6
GiB of sh-004's 8 from 60 s to 240 s), its node held few pods, so few requests and few of
the set, and took more, each raising the hottest memory by 6.25 points (its "pods on hot,
mean", 2.3 at eddd121: docs/history/placement-eddd121/placement.md). In the simulator, on
metrics-server readings (``python tests/extender/steady_sim.py 101 131 --source
metrics-server --classes heterogeneous "equal sizes" hogged generated --steady-mix
--steady-hog``, against the same with
``--raised-points 0 --whole-raises``, the rule before): steady-hog's hottest memory 72.7 %
before, 70.9 after (run seeds 31-34), steady-mix's CPU 71.7 and 71.6; the hotter of CPU
and memory below stock's by 12.1, 11.5, 13.9 and 10.2 points on average per class before,
12.6, 12.0, 14.9 and 11.6 after; generated streams more than 2 points above stock 1 and
0; streams of equal nodes whose largest share of a workload on one node is more than 10
points above stock's as many as before per class. Raises taken whole (``--whole-raises``)
with the ceiling: a generated stream's share 33 points above stock's; beyond the least
without the ceiling (``--raised-points 0``): steady-hog 72.5. At 2 points, 2 streams of
equal nodes more than 10 points above stock's share (none at 3); at 4, steady-mix 72.0.
On seeds drawn after (501-530: ``501 531``, the same commands): the class means 13.7,
11.9, 14.6, 14.8 before and 15.3, 12.4, 15.1, 14.9 after; heterogeneous streams more than
2 above stock 1 (het-513, +22.0) and none, generated 1 and 1 (+3.0); equal-node streams
more than 10 points of share above stock 2, 2, 2 and 1, 3, 2 (equal sizes, hogged,
generated). On load-watcher's readings (``--source load-watcher``) the means 0.5-1.1
points lower too, the shares 1, 4, 2 and 3, 4, 2 (equal sizes: +16.7 at worst, against
+12.5): the price, where a spreading choice raises the hottest node. In the
lab at 57b15ca (docs/placement.md, 5 runs): steady-hog's hottest memory 73.8 % (71.6-74.1)
against 76.4 at eddd121, pods beside the hog 1.9 averaged over the stream against 2.3;
steady-mix's CPU 71.3 against 71.0, within each other's ranges."""
RAISED_CEILING = 20
"""The score such a node keeps at most: priority 2 of 10 (``to_extender_priority``), and
``RAISED_GAP`` below the best of the rest (``raised_ceiling``). At 25 (priority 3)
steady-hog's gain was gone in the simulator (72.5 %); at 15 (priority 2 too) and 10 one
stream of equal nodes more than 10 points of share above stock's, and steady-hog 70.9 and
70.3."""


RAISED_GAP = 40
"""Points of score such a node keeps below the best of the nodes the ceiling does not hold
(``raised_ceiling``): four priority steps, 400 of kube-scheduler's points at the extender's
weight of 10, as many as NodeResourcesFit (weight 1, 0-100), NodeResourcesBalancedAllocation
(1, 0-100) and PodTopologySpread (2, 0-100) can give one node over another together.

``RAISED_CEILING`` alone is a gap that narrows as the cluster fills: with the best node at
44 (priority 4) a node at the ceiling was two steps below it, and in the placement
benchmark's steady-hog, in each of 5 runs at 54659f3, kube-scheduler bound one pod (two in
one run) onto the hog's node at 81 % memory against the extender's favourite at 69 %: that
node held few requests and few of the set, so its own plugins scored it more than 200
points higher (docs/history/placement-54659f3/placement/prediction.md). At 25eed7c, in none of
5 runs (docs/placement/prediction.md)."""


def raised_ceiling(others: Iterable[int]) -> int:
    """The score a node whose placement raises the hottest by ``RAISED_POINTS`` or more
    beyond the least keeps at most: ``RAISED_CEILING``, and ``RAISED_GAP`` below the best
    of ``others`` (the other nodes' scores after ``less_for_raising``), never below 1, so
    it stays above every node the pod would take over capacity (those score 0 or less)."""
    top = max(others, default=None)
    if top is None:
        return RAISED_CEILING
    return max(1, min(RAISED_CEILING, top - RAISED_GAP))


def held(raised: float) -> bool:
    """Whether a node raising the hottest by ``raised`` beyond the least is held at the
    ceiling (``RAISED_POINTS``; 0: never)."""
    return bool(RAISED_POINTS) and raised >= RAISED_POINTS


def less_for_raising(
    score: int, raised: float, weight: float = HOTTEST_WEIGHT, ceiling: int = RAISED_CEILING
) -> int:
    """``score`` less ``weight`` points per point ``raised`` (``hottest_raises`` beyond the
    least, ``beyond_least``), never below min(score, ``HOTTEST_FLOOR``), and at most
    ``ceiling`` (``raised_ceiling``) from ``RAISED_POINTS`` on; a score at or below 0 (over
    capacity, no data) stays as it is."""
    if raised <= 0.0 or score <= 0 or not weight:
        return score
    lowered = max(min(score, HOTTEST_FLOOR), int(score - weight * raised))
    if held(raised):
        return min(lowered, ceiling)
    return lowered


def lower_for_raising(
    scores: Sequence[int], raises: Mapping[int, float], weight: float = HOTTEST_WEIGHT
) -> dict[int, int]:
    """``less_for_raising`` over one request's nodes: position -> lowered score for each
    of ``raises`` (position -> points beyond the least) it changes. The nodes held at the
    ceiling are lowered last, ``RAISED_GAP`` below the best of the rest as lowered. The
    one implementation both the general path and the fast path take."""
    lowered: dict[int, int] = {}
    ceilinged = {k for k, by in raises.items() if held(by)}
    for k, by in raises.items():
        if k not in ceilinged:
            score = less_for_raising(scores[k], by, weight)
            if score != scores[k]:
                lowered[k] = score
    if ceilinged:
        ceiling = raised_ceiling(
            lowered.get(k, s) for k, s in enumerate(scores) if k not in ceilinged
        )
        for k in ceilinged:
            score = less_for_raising(scores[k], raises[k], weight, ceiling)
            if score != scores[k]:
                lowered[k] = score
    return lowered


def full_by_guess(
    uses: Sequence[tuple[tuple[float, float] | None, ...]],
    guessed: Collection[str],
    read_within: Callable[[int], tuple[bool, bool]],
) -> frozenset[str]:
    """The resources the scores count at 0 for this pod (``LeastUsed.combine``'s
    ``soft``): those of CPU and memory whose figure for the pod is the request rule's
    (``guessed``: ``estimate.PodFacts.guessed``) and that every node with data for them
    would be over capacity on with it (``uses``: ``LeastUsed.uses`` per node) while its
    reading alone is within its allocatable (``read_within``: node position ->
    ``LeastUsed.read_within``, asked only once every node is over): over only by the pods
    counted since the reading and the pod. A node read
    over capacity (150 % CPU) is over by what was measured, and keeps the ranking.

    Over capacity on a resource a node scores that resource alone, below every node the
    pod fits on; when it fits on none, the nodes rank by how far over each would be, and
    ``hottest_raises`` spreads that. On a guess that is far off, the guess alone decides.
    In the placement benchmark's strong-weak (48 pods of 100m / 128 MiB requested, 500m /
    512 MiB limits, 200m / 400 MiB used; an 8-core node and four 2-core ones), the request
    rule counts 425m a pod, the stream's CPU is more than the cluster's by that figure from
    the ~30th pod on, and least-used gave each node the same share of the guessed
    overload: 26 pods to the 8-core node, 6 to two 2-core ones, whose memory then ran at
    83.6 %, stock's figure (docs/history/oneshot-ec6a6d4/). Counted at 0 in the mean
    (``LeastUsed.combine``) and left out of the hottest-node term, the guessed CPU says
    nothing among nodes it puts over, and memory, which the request rule puts near the
    pods' use, decides: 28, 5, 5, 5, 5, the best placement (76.2 %), in 9 of 10 runs of
    tests/extender/steady_sim.py (``--one-shot strong-weak``, seeds 1-10; 3 of 10 without
    the rule, 9 of 10 with CPU counted as far over as it is). In the lab (run 3081 at
    4f64382, docs/history/oneshot-554370a), counted as far over as it is, the 8-core node at
    150 % CPU and 68 % memory scored 4 against 13 for 2-core nodes at 121 % and 69 % at the
    43rd pod, both priority 0 or 1, and kube-scheduler's own scores decided. A measured figure keeps
    the ranking: taken for every pod, guessed or not, the rule made one of the simulator's
    heterogeneous streams (seeds 101-160) 20.6 points hotter on CPU than stock, where the
    ranking keeps them within 13, and beside a memory hog (seed 702) CPU ran at 169 %
    (test_steady_sim.py)."""
    out: set[str] = set()
    for r, resource in enumerate(("cpu", "memory")):
        if resource not in guessed:
            continue
        afters = [(i, v[0]) for i, u in enumerate(uses) if len(u) > r and (v := u[r]) is not None]
        if not afters or any(after <= 100.0 for _, after in afters):
            continue
        if all(read_within(i)[r] for i, _ in afters):
            out.add(resource)
    return frozenset(out)


def raised_note(by: float) -> str:
    """What a score lowered by ``less_for_raising`` adds to the node's reason."""
    return f"; raises the hottest node {by:.0f} points more than another node would"


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
    hottest_weight: float = HOTTEST_WEIGHT
    """Points lost per point the placement raises the hottest candidate (``HOTTEST_WEIGHT``;
    0: off). Applied over all the nodes' scores, before the spreading band."""
    peak_sigmas: float = 0.0
    """A node's measured use counts its mean plus this many standard deviations where the
    source reports one (``estimate.peak_percent``; the composition root passes
    ``estimator.peak_sigmas``, ``estimate.PEAK_SIGMAS`` by default)."""

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
        demand = demand_after(resource, pod, node, sigmas=self.peak_sigmas)
        if demand is None:
            return None
        score = least_used(demand.allocatable, demand.used)
        if not explain:
            return score, ""
        std = (node.load.cpu if resource == "cpu" else node.load.memory).std
        peak = f" (at mean + {self.peak_sigmas:g} sd)" if self.peak_sigmas and std else ""
        return score, f"{resource} {demand.percent:.0f}%{peak}"

    def uses(self, pod: PodFacts, node: NodeState) -> tuple[tuple[float, float] | None, ...]:
        """The node's CPU and memory use after placing ``pod`` and before (percent of
        allocatable), for ``hottest_raises``; None for a resource without a weight or
        data, or on a node of unknown size."""
        if node.info is None:
            return (None, None)
        out: list[tuple[float, float] | None] = []
        for resource, own in (("cpu", pod.usage.cpu_millis), ("memory", pod.usage.memory_bytes)):
            demand = None
            if self.weights.get(resource):
                demand = demand_after(resource, pod, node, sigmas=self.peak_sigmas)
            if demand is None or not demand.allocatable:
                out.append(None)
            else:
                out.append((demand.percent, 100 * (demand.used - own) / demand.allocatable))
        return tuple(out)

    def read_within(self, node: NodeState) -> tuple[bool, bool]:
        """Per resource (CPU, memory): whether the node's reading alone, before the pods
        counted since, is within its allocatable (``full_by_guess``); the same expression
        ``estimate.demand_after`` starts from. True without a reading or a size (such a
        node has no use for ``uses`` either)."""
        info = node.info
        if info is None:
            return (True, True)
        out: list[bool] = []
        for load, capacity, allocatable in (
            (node.load.cpu, info.cpu_capacity_millis, info.cpu_allocatable_millis),
            (node.load.memory, info.memory_capacity_bytes, info.memory_allocatable_bytes),
        ):
            measured = peak_percent(load, self.peak_sigmas)
            out.append(measured is None or measured * capacity / 100 <= allocatable)
        return (out[0], out[1])

    def combine(
        self,
        cpu: int | None,
        memory: int | None,
        pods: int | None,
        soft: Collection[str] = (),
    ) -> int | None:
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
        least-used's hottest node 17.6 points above stock's; with this rule 9.1 below.

        A resource in ``soft`` (``full_by_guess``: every node over capacity on it by the
        request rule's guess) counts in the mean at 0, Koordinator's leastUsedScore over
        capacity, and never as the worst: the other resources decide. When every resource
        counted is soft, the mean of their scores as they are (below 0) orders the nodes."""
        total = raw = weights = 0.0
        worst: int | None = None
        w = self.weights
        for name, part in (("cpu", cpu), ("memory", memory), ("pods", pods)):
            weight = w.get(name, 0)
            if part is None or not weight:
                continue
            weights += weight
            if soft:
                raw += part * weight
                if name in soft:  # over capacity (below 0) on every node: counted at 0
                    continue
            total += part * weight
            if worst is None or part < worst:
                worst = part
        if not weights:
            return None
        if worst is None:  # every resource counted is soft
            return int(raw // weights)
        if worst < 0:
            return worst
        if self.dominant_weight:
            total += worst * self.dominant_weight
            weights += self.dominant_weight
        return int(total // weights)

    def score(
        self, pod: PodFacts, node: NodeState, explain: bool = True, soft: Collection[str] = ()
    ) -> NodeScore:
        """The node's score for ``pod``; ``soft``: the resources ``full_by_guess`` found."""
        parts: dict[str, int] = {}
        texts: list[str] = []
        for resource in RESOURCES:
            if not self.weights.get(resource, 0):
                continue
            result = self._resource(resource, pod, node, explain)
            if result is not None:
                parts[resource], text = result
                texts.append(text)
        cpu, memory, pods = parts.get("cpu"), parts.get("memory"), parts.get("pods")
        score = self.combine(cpu, memory, pods, soft) if soft else self.combine(cpu, memory, pods)
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
        if soft:
            why += f"; {' and '.join(sorted(soft))} over capacity on every node by the request rule"
        if spread:
            why += f"; {node.same_owner} of its workload's {node.owner_pods} pods here"
        if node.estimated:
            why += " (estimated, no fresh metrics)"
        return NodeScore(score, why)
