"""The best any scheduler could have done on a steady run's own trace, per resource.

Both optima take the run's trace as it happened (each pod's arrival and departure, the
background changes, steady_measures.Timeline) and the measured span after the warm-up,
and optimise the figure the report gives each contender: the hottest node's utilisation
of one resource, time-averaged. Like measures.exact_optimum they ignore requests and pod
limits (a relaxation: the values bound every real scheduler from below).

* Per instant, pods free to move (`per_instant`): at each instant the least hottest-node
  utilisation any placement of the pods running then reaches; its time average bounds
  every scheduler, migrating ones included. Each instant is a small integer programme:
  y[s,n] pods of usage shape s on node n (pods of equal usage are interchangeable),
  minimise z with background_n + sum_s u_s y[s,n] <= C_n z and sum_n y[s,n] = P_s. The
  answers are cached by (pods of each shape, backgrounds): a run revisits few such states.
* Without migration (`no_migration`): each pod placed once, at its arrival, for its whole
  stay, knowing every lifetime in hindsight: binaries x[p,n] with sum_n x[p,n] = 1, and
  per stretch k of constant running set and backgrounds (the events cut time into them;
  stretches with the same running set and backgrounds are one) a z_k >= each node's
  utilisation there; minimise sum_k (seconds_k / span) z_k. The objective is the
  time-averaged hottest node, not its maximum over time: that is the figure the report
  ranks contenders on, so the gap is in the same unit; and the maximum over time is
  decided by the single worst instant (on steady-hog by the hog's own memory), which
  leaves most placements optimal and says little about the rest of the stream. It starts
  from the best of the contender's own placement, a greedy one in hindsight, and the
  placements of the other contenders of its round (`peers`: they ran the same trace, so
  the k-th pod of a workload to arrive is the same pod of the trace in each run, whatever
  its name; any placement is feasible here), so the value returned is never above the
  contender's figure nor above a peer's placement of this trace, even when the time limit
  stops the search; the solver's dual bound is reported with it, and the gap between them
  when it is not proven.
  Symmetry: nodes identical over the whole run (capacity, background, changes) are
  interchangeable, so the i-th pod (by arrival) is only offered the first i+1 of each
  such group (relabelling the group's nodes by their first pod makes any placement one
  of these).

The solver is HiGHS (highspy), a maintained open-source MIP solver with a Python API.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.placement.steady_measures import Slice, Timeline, slices
from benchmarks.placement.timeline import Stay

TIME_LIMIT = 20.0  # seconds per run and resource for the no-migration programme
HOTTER = "hotter"
"""`no_migration`'s resource for the higher of the hottest node's CPU and its memory at
each instant: one placement judged on both (the per-resource optima may each need another)."""
# the per-instant programmes are tiny; proven to this relative gap
EXACT_GAP = 1e-9


def _amount(u: Any, resource: str) -> float:
    return float(u.cpu if resource == "cpu" else u.memory)


def _capacity(tl: Timeline, resource: str) -> list[float]:
    return [_amount(n.capacity, resource) for n in tl.nodes]


def _background(tl: Timeline, g: Slice, resource: str) -> list[float]:
    if resource == "cpu":  # CPU backgrounds never change (scenario._Change refuses it)
        return [n.background.cpu for n in tl.nodes]
    return list(g.background)


@dataclass
class _Model:
    """A MIP in the column-and-row form HiGHS takes."""

    cost: list[float]
    lower: list[float]
    upper: list[float]
    integer: list[int]
    rows: list[tuple[float, float, list[int], list[float]]]

    def col(self, cost: float, lo: float, hi: float, *, integer: bool = False) -> int:
        self.cost.append(cost)
        self.lower.append(lo)
        self.upper.append(hi)
        if integer:
            self.integer.append(len(self.cost) - 1)
        return len(self.cost) - 1


@dataclass(frozen=True)
class Solved:
    status: str
    values: list[float] | None  # the best solution found, None without one
    objective: float
    bound: float  # the solver's proven lower bound


def _solve(
    m: _Model, *, time_limit: float, gap: float, start: Sequence[float] | None = None
) -> Solved:
    import highspy
    import numpy as np

    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", gap)
    h.setOptionValue("mip_abs_gap", 1e-12)
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", 0)  # the same model gives the same answer
    inf = highspy.kHighsInf
    n = len(m.cost)
    h.addCols(
        n,
        np.array(m.cost, dtype=np.float64),
        np.array(m.lower, dtype=np.float64),
        np.array([min(u, inf) for u in m.upper], dtype=np.float64),
        0,
        np.array([], dtype=np.int32),
        np.array([], dtype=np.int32),
        np.array([], dtype=np.float64),
    )
    starts: list[int] = []
    idx: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []
    for rlo, rhi, ri, rv in m.rows:
        starts.append(len(idx))
        idx += ri
        vals += rv
        lo.append(max(rlo, -inf))
        hi.append(min(rhi, inf))
    h.addRows(
        len(m.rows),
        np.array(lo, dtype=np.float64),
        np.array(hi, dtype=np.float64),
        len(idx),
        np.array(starts, dtype=np.int32),
        np.array(idx, dtype=np.int32),
        np.array(vals, dtype=np.float64),
    )
    if m.integer:
        h.changeColsIntegrality(
            len(m.integer),
            np.array(m.integer, dtype=np.int32),
            np.array([highspy.HighsVarType.kInteger] * len(m.integer), dtype=np.uint8),
        )
    if start is not None:
        h.setSolution(n, np.arange(n, dtype=np.int32), np.array(start, dtype=np.float64))
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    has = info.primal_solution_status == 2  # kSolutionStatusFeasible
    values = list(h.getSolution().col_value) if has else None
    bound = float(info.mip_dual_bound) if m.integer else float(info.objective_function_value)
    return Solved(status, values, float(info.objective_function_value), bound)


# ------------------------------------------------------------------ per instant

_INSTANT: dict[tuple[Any, ...], float] = {}


def instant(
    capacity: Sequence[float], background: Sequence[float], shapes: Mapping[float, int]
) -> float:
    """The least hottest-node utilisation over whole-pod placements of `shapes` (usage ->
    how many pods) on nodes of `capacity` holding `background`; exact (cached)."""
    if any(c <= 0 for c in capacity) or len(capacity) != len(background) or not capacity:
        raise ValueError("one capacity > 0 and one background per node, at least one node")
    sh = tuple(sorted((u, k) for u, k in shapes.items() if k > 0 and u > 0))
    key = (tuple(capacity), tuple(background), sh)
    if key in _INSTANT:
        return _INSTANT[key]
    floor = max(b / c for b, c in zip(background, capacity, strict=True))
    if not sh:
        _INSTANT[key] = floor
        return floor
    # In units of the largest node: memory in bytes put coefficients near 1e10 beside
    # tiny pods, and HiGHS answered a generated scenario's instant with "Solve error";
    # the utilisations, all this returns, do not depend on the unit.
    unit = max(capacity)
    capacity = [c / unit for c in capacity]
    background = [b / unit for b in background]
    sh = tuple((u / unit, k) for u, k in sh)
    m = _Model([], [], [], [], [])
    z = m.col(1.0, 0.0, math.inf)
    y = [[m.col(0.0, 0.0, k, integer=True) for _ in capacity] for _, k in sh]
    for j, (c, b) in enumerate(zip(capacity, background, strict=True)):
        m.rows.append((-math.inf, -b, [*(y[s][j] for s in range(len(sh))), z],
                       [*(u for u, _ in sh), -c]))  # fmt: skip
    for s, (_, k) in enumerate(sh):
        m.rows.append((k, k, list(y[s]), [1.0] * len(capacity)))
    got = _solve(m, time_limit=60, gap=EXACT_GAP)
    if got.values is None:
        raise RuntimeError(f"the per-instant programme found no placement ({got.status})")
    # the value of the integer counts, not the solver's z (exact arithmetic of the loads)
    counts = [[round(got.values[c]) for c in row] for row in y]
    value = max(
        (b + sum(counts[s][j] * sh[s][0] for s in range(len(sh)))) / c
        for j, (c, b) in enumerate(zip(capacity, background, strict=True))
    )
    _INSTANT[key] = max(value, floor)
    return _INSTANT[key]


def per_instant(tl: Timeline, resource: str, warmup: float) -> float:
    """The time average over the measured span of `instant` at every instant."""
    cap = _capacity(tl, resource)
    num = den = 0.0
    for g in slices(tl, warmup):
        shapes: dict[float, int] = {}
        for w, k in g.running().items():
            u = _amount(tl.usage[w], resource)
            shapes[u] = shapes.get(u, 0) + k
        num += g.seconds * instant(cap, _background(tl, g, resource), shapes)
        den += g.seconds
    if not den > 0:
        raise ValueError("nothing measured after the warm-up")
    return num / den


# ------------------------------------------------------------------ without migration


@dataclass(frozen=True)
class NoMigration:
    """The best placement found that never moves a pod: `value`, the time-averaged hottest
    node's utilisation (fraction), proven optimal when `proven`, else at most `gap`
    (relative) above `bound`, the solver's lower bound on the optimum."""

    resource: str
    value: float
    bound: float
    proven: bool
    status: str
    pods: int
    stretches: int
    # the best placement the search started from: "own", "greedy" or "peer" (another
    # contender's), or "solver" when the search improved on it
    start: str

    @property
    def gap(self) -> float:
        return 0.0 if self.proven else (self.value - self.bound) / max(self.value, 1e-12)

    def to_json(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "value": self.value,
            "bound": self.bound,
            "proven": self.proven,
            "status": self.status,
            "pods": self.pods,
            "stretches": self.stretches,
            "start": self.start,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> NoMigration:
        return cls(
            str(d["resource"]),
            float(d["value"]),
            float(d["bound"]),
            bool(d["proven"]),
            str(d["status"]),
            int(d["pods"]),
            int(d["stretches"]),
            str(d["start"]),
        )


def _groups(tl: Timeline) -> list[list[int]]:
    """Nodes identical over the whole run: same capacity, background and changes."""
    changes: dict[str, tuple[tuple[float, float], ...]] = {}
    for c in tl.changes:
        changes[c.node] = (*changes.get(c.node, ()), (c.at_seconds, c.memory))
    by: dict[Any, list[int]] = {}
    for i, n in enumerate(tl.nodes):
        by.setdefault((n.capacity, n.background, changes.get(n.name, ())), []).append(i)
    return list(by.values())


Stretch = tuple[tuple[int, ...], tuple[tuple[float, ...], ...]]
"""The pods running in a stretch of time (indices) and each resource's node backgrounds."""


def _hottest(
    where: Sequence[int | None],
    alive: Sequence[int],
    bgs: Sequence[Sequence[float]],
    caps: Sequence[Sequence[float]],
    usage: Sequence[Sequence[float]],
    extra: tuple[int, int] | None = None,
) -> float:
    """The hottest node's utilisation over every resource, pods `alive` placed at `where`
    (None: not yet), and pod extra[0] on node extra[1]."""
    top = 0.0
    for r, (bg, cap) in enumerate(zip(bgs, caps, strict=True)):
        load = list(bg)
        for j in alive:
            w = where[j]
            if w is not None:
                load[w] += usage[r][j]
        if extra is not None:
            load[extra[1]] += usage[r][extra[0]]
        top = max(top, max(v / c for v, c in zip(load, cap, strict=True)))
    return top


def _greedy(
    pods: Sequence[Any],
    stretch: Mapping[Stretch, float],
    caps: Sequence[Sequence[float]],
    usage: Sequence[Sequence[float]],
    pinned: Mapping[int, int] | None = None,
) -> list[int]:
    """A placement in hindsight to start the search from: pods in arrival order, each on
    the node that adds least to the time-weighted hottest node over the stretches it runs
    in, given the pods placed before it (ties to the first node); a pod of `pinned` on its
    node there."""
    where: list[int | None] = [None] * len(pods)
    mine: dict[int, list[tuple[tuple[int, ...], tuple[tuple[float, ...], ...], float]]] = {}
    for (alive, bgs), secs in stretch.items():
        for i in alive:
            mine.setdefault(i, []).append((alive, bgs, secs))
    for i in range(len(pods)):
        if pinned and i in pinned:
            where[i] = pinned[i]
            continue
        best, best_cost = 0, math.inf
        for n in range(len(caps[0])):
            cost = sum(
                secs * _hottest(where, alive, bgs, caps, usage, (i, n))
                for alive, bgs, secs in mine.get(i, [])
            )
            if cost < best_cost - 1e-12:
                best, best_cost = n, cost
        where[i] = best
    return [0 if w is None else w for w in where]


ArrivalKey = tuple[str, int]
"""A pod of a trace as every run of it knows it: its workload and how many of that
workload's pods were placed before it."""


def arrival_keys(stays: Sequence[Stay]) -> dict[str, ArrivalKey]:
    """Each pod's `ArrivalKey` in a run: its workload's pods ordered by when they were
    placed (then by name, for pods placed at the same instant)."""
    rank: dict[str, int] = {}
    out: dict[str, ArrivalKey] = {}
    for s in sorted(stays, key=lambda s: (s.start, s.pod)):
        k = rank.get(s.workload, 0)
        rank[s.workload] = k + 1
        out[s.pod] = (s.workload, k)
    return out


def placement_of(stays: Sequence[Stay]) -> dict[ArrivalKey, str]:
    """A run's placement of its trace by `ArrivalKey`, for another run of the same trace
    to start its search from (`no_migration`'s `peers`)."""
    keys = arrival_keys(stays)
    return {keys[s.pod]: s.node for s in stays}


def first_change(tl: Timeline) -> float | None:
    """When the run's background first changes after its first pod was bound (seconds into
    the stream; a change before that, steady-vary's at 0, is the state the stream starts
    in); None if never."""
    start = min((s.start for s in tl.stays), default=0.0)
    return min((c.at_seconds for c in tl.changes if c.at_seconds > start), default=None)


def no_migration(
    tl: Timeline,
    resource: str,
    warmup: float,
    *,
    time_limit: float = TIME_LIMIT,
    peers: Sequence[Mapping[ArrivalKey, str]] = (),
    unforeseen: bool = False,
) -> NoMigration:
    """The least time-averaged hottest-node utilisation of `resource` (or, for `HOTTER`, of
    the higher of CPU and memory at each instant) over the measured span when every pod
    stays where it is first placed (module docstring), starting from the best of the run's
    own placement, a greedy one in hindsight and `peers` (`placement_of` other runs of the
    same trace; a pod a peer did not place keeps the run's own node).

    `unforeseen`: the pods bound before the run's first background change stay where the run
    put them (`first_change`); the rest as above. No scheduler that cannot see a change
    coming places those pods for it, and the run's own placement of them is what it had
    when the change came: the optimum from there bounds what its later choices could do."""
    parts = list(slices(tl, warmup))
    span = sum(g.seconds for g in parts)
    if not span > 0:
        raise ValueError("nothing measured after the warm-up")
    kinds = ("cpu", "memory") if resource == HOTTER else (resource,)
    t0 = parts[0].start
    pods = sorted(
        (s for s in tl.stays if s.end > t0 and s.start < tl.end and s.end > s.start),
        key=lambda s: (s.start, s.pod),
    )
    # Each resource in units of its largest node (as `instant`): CPU in cores beside memory
    # in bytes would put coefficients ten orders apart in one programme.
    units = [max(_capacity(tl, k)) for k in kinds]
    caps = [[c / u for c in _capacity(tl, k)] for k, u in zip(kinds, units, strict=True)]
    usage = [
        [_amount(tl.usage[p.workload], k) / u for p in pods]
        for k, u in zip(kinds, units, strict=True)
    ]
    nodes = len(tl.nodes)
    node_index = {n.name: i for i, n in enumerate(tl.nodes)}
    # each stretch: the pods running in it (their stays cover it) and the backgrounds
    stretch: dict[Stretch, float] = {}
    for g in parts:
        a, b = g.start, g.start + g.seconds
        alive = tuple(i for i, s in enumerate(pods) if s.start <= a and s.end >= b)
        bgs = tuple(
            tuple(b / u for b in _background(tl, g, k)) for k, u in zip(kinds, units, strict=True)
        )
        key = (alive, bgs)
        stretch[key] = stretch.get(key, 0.0) + g.seconds
    m = _Model([], [], [], [], [])
    own = [node_index[s.node] for s in pods]
    before = first_change(tl) if unforeseen else None
    pinned = {i: own[i] for i, s in enumerate(pods) if before is not None and s.start < before}
    allowed: list[set[int]] = []
    for i in range(len(pods)):
        ok: set[int] = set()
        if i in pinned:
            ok.add(pinned[i])
        elif pinned:
            # pinned pods tell identical nodes apart: the symmetry rule no longer holds
            ok.update(range(nodes))
        else:
            for group in _groups(tl):
                ok.update(group[: i + 1])
        allowed.append(ok)
    x = [
        {n: m.col(0.0, 0.0, 1.0, integer=True) for n in range(nodes) if n in allowed[i]}
        for i in range(len(pods))
    ]
    for i in range(len(pods)):
        m.rows.append((1.0, 1.0, list(x[i].values()), [1.0] * len(x[i])))
    zs: list[tuple[int, tuple[int, ...], tuple[tuple[float, ...], ...]]] = []
    floors = 0.0  # the objective at every z on its floor: a bound before the solver's
    for (alive, bgs), secs in stretch.items():
        # No placement beats the best with pods free to move at that instant, resource by
        # resource: a valid bound on z that the relaxation alone (pods split) does not give.
        floor = 0.0
        for r, bg in enumerate(bgs):
            shapes: dict[float, int] = {}
            for i in alive:
                shapes[usage[r][i]] = shapes.get(usage[r][i], 0) + 1
            floor = max(floor, instant(caps[r], bg, shapes) * (1 - 1e-9))
        z = m.col(secs / span, floor, math.inf)
        floors += secs / span * floor
        zs.append((z, alive, bgs))
        for r, bg in enumerate(bgs):
            for n, c in enumerate(caps[r]):
                ids = [x[i][n] for i in alive if n in x[i]]
                us = [usage[r][i] for i in alive if n in x[i]]
                m.rows.append((-math.inf, -bg[n], [*ids, z], [*us, -c]))

    def objective(where: Sequence[int]) -> float:
        total = sum(
            secs * _hottest(where, alive, bgs, caps, usage)
            for (alive, bgs), secs in stretch.items()
        )
        return total / span

    own_value, origin = objective(own), "own"
    keys = arrival_keys(tl.stays)
    candidates = [("greedy", _greedy(pods, stretch, caps, usage, pinned))]
    for peer in peers:
        mapped = [node_index.get(peer.get(keys[s.pod], ""), own[i]) for i, s in enumerate(pods)]
        candidates.append(("peer", mapped))
    for name, where in candidates:
        where = [pinned.get(i, n) for i, n in enumerate(where)]
        if (v := objective(where)) < own_value - 1e-12:
            own, own_value, origin = where, v, name
    # The run's placement as the start, relabelled within each group of identical nodes
    # so that it respects the symmetry rule (the order of first use).
    relabel: dict[int, int] = {n: n for n in range(nodes)}
    for group in [] if pinned else _groups(tl):
        used = [n for n in dict.fromkeys(own) if n in group]
        relabel.update(zip(used, group[: len(used)], strict=True))
    start_where = [relabel[n] for n in own]
    start = [0.0] * len(m.cost)
    for i, n in enumerate(start_where):
        start[x[i][n]] = 1.0
    for z, alive, bgs in zs:
        start[z] = _hottest(start_where, alive, bgs, caps, usage)
    got = _solve(m, time_limit=time_limit, gap=1e-6, start=start)
    value, status = own_value, got.status
    if got.values is not None:
        where = [next(n for n, c in x[i].items() if got.values[c] > 0.5) for i in range(len(pods))]
        value = min(value, objective(where))
    proven = status == "Optimal"
    # a solver stopped before its first bound (a loaded machine, a short limit) reports
    # -inf; the per-instant floors of the stretches bound the optimum all the same
    bound = min(max(got.bound, floors), value)
    if proven:
        bound = value
    if value < own_value - 1e-12:
        origin = "solver"
    return NoMigration(resource, value, bound, proven, status, len(pods), len(stretch), origin)
