"""least-used for a whole request at the cost of what changed since the last one.

Within one load snapshot a node's measured use in absolute units and its
allocatable do not change from pod to pod; only the pods placed since (the
ledger's pending totals) and the incoming pod do. So per snapshot a *table*
keeps every node's bases as arrays, indexed by position, and each node's
``{"Host":"name","Score":N}`` answer for N in 0..10; per pod shape (cpu and
memory estimate: a burst of one Deployment's pods shares it) a *view* keeps
every node's score and use after placement, re-scoring only the nodes whose
pending totals changed; it also keeps, per top step, every node's answer piece
for its current score (the piece ``decide.to_priorities`` gives it when the top
is in that step). A request maps its node names to positions, gathers their
scores (for the top and the winner) and their pieces, sets the winner's piece and
joins the body, all with C-level list operations. kube-scheduler's node list differs from one
request to the next (pkg/scheduler/schedule_one.go findNodesThatPassFilters:
nodes are listed as parallel filter checks finish, from a start that rotates,
and at most numFeasibleNodesToFind of them), so the table is keyed by node;
the last list's positions are kept only as a shortcut for the same list again.

The filter reads the same table: per pod figure (its request, as the filter counts
it) and default thresholds a *filter view* keeps every node's verdict (over a
threshold or not), re-judging only the nodes whose pending request totals changed;
a request gathers its nodes' verdicts, and the reasons of those over, with C calls
(``LeastUsedFastPath.filter``).

It covers the common case (fresh metrics and a known size for every node,
cpu/memory weights); anything else returns None and the caller takes the
general path. Equality with the general path is tested
(tests/extender/test_fastpath.py, tests/extender/test_fastpath_filter.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import compress, filterfalse, islice, repeat
from operator import attrgetter, eq, getitem, gt, itemgetter, le, not_
from typing import Any

import msgspec

from .decide import (
    FilterOutcome,
    Over,
    conclude_filter,
    node_thresholds,
    over_excess,
    over_reason,
    to_priorities,
)
from .estimate import PodFacts, go_round, peak_percent, used_after
from .ledger import NodeTotals, Pending
from .model import LoadSnapshot, NodeInfo, NodeLoad
from .policies import MAX_SCORE, LeastUsed, Policy
from .policies.base import PRIORITY_OF
from .policies.least_used import (
    least_used,
    level_weights,
    lower_for_raising,
    overall_level,
    unavoidable,
)
from .policies.spread import (
    capacity_weight,
    fair_share,
    near_best,
    passed_note,
    rooms,
    sole_holder,
    spread_score,
    within_least_share,
)

__all__ = ["FastAnswer", "LeastUsedFastPath"]

_VIEWS = 8  # pod shapes kept per snapshot
_CPU = attrgetter("cpu_millis")
_MEMORY = attrgetter("memory_bytes")
_PODS = attrgetter("pods")
_NOTHING = Pending()  # no pods pending on a node the ledger does not name
_SCORE_BYTES = [str(p).encode() + b"}" for p in range(11)]

Figures = Callable[[int], tuple[int | None, int | None]]


@dataclass(frozen=True, slots=True)
class FastAnswer:
    """One request's result, in the request's node order."""

    fine: Sequence[int]
    """Every node's score: 0..100, below 0 over capacity (``least_used``)."""
    win: int | None
    body: bytes
    """The JSON answer, ``[{"Host":..,"Score":..},..]``, ready to send."""
    figures: Figures | None = None
    """With ``figures=True``: request position -> [cpu, memory] percent of
    allocatable after placement, from the very sums that were scored (None: no data)."""
    win_raised: float = 0.0
    """Points by which the winner raises the hottest node beyond the least any node would
    (``least_used.beyond_least``), when that lowered its score."""
    passed: str = ""
    """The winner's note on the nodes the fair-share term lowered (``spread.passed_note``),
    or empty."""
    soft: frozenset[str] = frozenset()
    """The resources over capacity on every node only by the request rule's guess
    (``least_used.full_by_guess``), which the scores count at 0, for the winner's reason."""

    @property
    def priorities(self) -> list[int]:
        """Every node's 0..10 answer, as in ``body``. Worked out on demand: only the
        Event recorder reads them, and the body is joined without them."""
        if self.win is None:
            return []
        held = [s if s > 0 else 0 for s in self.fine]  # the tables index 0..100
        return _stepped(held, self.win, PRIORITY_OF[held[self.win]])


def _scorer(
    policy: LeastUsed, soft: frozenset[str] = frozenset()
) -> Callable[[int, float, int, float], int]:
    """One node's 0..100 score from (cpu allocatable, cpu used, memory allocatable,
    memory used): ``least_used`` per resource and ``LeastUsed.combine`` (``soft``: as
    ``least_used.full_by_guess`` found), the same functions the general path calls, so the
    two cannot drift apart."""
    combine = partial(policy.combine, soft=soft) if soft else policy.combine
    cpu = bool(policy.weights.get("cpu", 0))
    memory = bool(policy.weights.get("memory", 0))

    def score(ac: int, cu: float, am: int, mu: float) -> int:
        result = combine(
            least_used(ac, cu) if cpu else None, least_used(am, mu) if memory else None, None
        )
        assert result is not None  # a weighted resource has data (checked in _Table.add)
        return result

    return score


def _step_tables() -> list[list[int]]:
    """``tables[p][s]``: the priority ``decide.to_priorities`` gives a node scoring ``s``
    when the winner's step is ``p``: its 0..10 step, one lower in the winner's step
    (every node there but the winner drops one; the winner is set after)."""
    return [
        [q - 1 if q == p and p > 0 else q for q in PRIORITY_OF] for p in range(MAX_SCORE // 10 + 1)
    ]


_STEP_TABLES = _step_tables()


def _winner(
    names: Sequence[str],
    scores: Sequence[int],
    top: int,
    counts: Callable[[list[str]], list[float]] | None,
    pending_on: Container[str] | None = None,
) -> int:
    """The index ``decide.to_priorities`` names the winner: the highest score, then
    the fewest pending pods (``counts`` maps names to them), then the first name.
    Only the tied nodes are looked at, each with C-level calls. ``pending_on``, if given,
    holds every node with a pending pod, and maybe others (``counts`` gives the nodes it
    lacks 0)."""
    find = scores.index
    win = find(top)
    tied = [win]
    # A few ties: index() resumes its C scan after each one, so the scores are
    # scanned once (1,000 scores, 90 ties: 12 us, against 30 us for a compress()
    # pass). Past an eighth of the nodes, the rest are found by one compress() pass.
    few = len(scores) >> 3
    try:
        while len(tied) <= few:
            tied.append(find(top, tied[-1] + 1))
    except ValueError:  # no more
        pass
    else:
        rest = tied[-1] + 1
        tied += compress(range(rest, len(scores)), map(eq, islice(scores, rest, None), repeat(top)))
    if len(tied) == 1:
        return win
    tied_names = list(map(names.__getitem__, tied))
    if pending_on is not None:
        # Any tied node with nothing pending has the fewest (0): the first of the least
        # name among those wins, found with C-level passes. On equal nodes (500 alike in a
        # 2,000-pod backlog) most are tied and most idle; the counts and tuples below were
        # 7.6 % of the extender's main-thread samples there (perf, python3.12 -X perf).
        idle = list(filterfalse(pending_on.__contains__, tied_names))
        if idle:
            first = min(idle)
            if counts is not None:
                # a node the ledger holds only departures for has no pending pod either
                listed = list(filter(pending_on.__contains__, tied_names))
                zero = [n for n, c in zip(listed, counts(listed), strict=True) if c <= 0]
                if zero:
                    first = min(first, min(zero))
            return tied[tied_names.index(first)]
    # min over tuples: the same order as to_priorities' key, then the first index
    if counts is None:
        return min(zip(tied_names, tied, strict=True))[1]
    return min(zip(counts(tied_names), tied_names, tied, strict=True))[2]


def _stepped(scores: Sequence[int], win: int, step: int) -> list[int]:
    """Every node's 0..10 answer when ``win`` (at 0..10 step ``step``) wins."""
    priorities = list(map(_STEP_TABLES[step].__getitem__, scores))
    priorities[win] = _winner_step(step, len(scores))
    return priorities


def _winner_step(step: int, nodes: int) -> int:
    # at step 0 nobody can drop: the winner rises to 1 over its rivals instead
    return step if step > 0 or nodes == 1 else 1


def _priorities(
    names: list[str], scores: list[int], pending: Callable[[str], float] | None = None
) -> tuple[list[int], int | None]:
    """``decide.to_priorities(names, scores, pending)`` with C-level list operations
    for 0..100 scores: one table look-up per node, then the winner (highest score,
    then fewest pending pods, then name) keeps its step. Equality is tested."""
    if not scores:
        return [], None
    top = max(scores)
    if top > MAX_SCORE or min(scores) < 0:
        return to_priorities(names, scores, pending)
    counts = None if pending is None else (lambda tied: list(map(pending, tied)))
    win = _winner(names, scores, top, counts)
    return _stepped(scores, win, PRIORITY_OF[top]), win


class _Synced:
    """Per-node figures for one pod shape over a table, kept in step with the ledger's
    pending totals (``sync``). Subclasses say which totals they read (``_CPU_OF``,
    ``_MEM_OF``: the estimate the scores count, or the request the filter counts) and
    what a node's new totals change (``rescore``)."""

    __slots__ = ("applied", "cpu_used", "mem_used", "origin", "pc", "pm", "seen")

    _CPU_OF: Callable[[Pending], float] = _CPU
    _MEM_OF: Callable[[Pending], float] = _MEMORY

    def __init__(self, pc: float, pm: float) -> None:
        self.pc, self.pm = pc, pm
        self.cpu_used: list[float] = []
        self.mem_used: list[float] = []
        self.applied: dict[str, tuple[float, float]] = {}
        self.origin: NodeTotals | None = None  # the totals sync read last, and how far
        self.seen = 0

    def rescore(self, table: _Table, i: int, cpu_pending: float, mem_pending: float) -> None:
        raise NotImplementedError

    def sync(self, table: _Table, recent: Mapping[str, Pending]) -> None:
        """Re-score the nodes whose pending totals changed.

        The ledger's totals (``NodeTotals``, updated in place) log the nodes they change;
        a view that read the same object before re-scores only the nodes logged since
        (between two requests, one or two). Anything else (another object: the window
        moved back, or a plain mapping; or the log forgot that far) is found by comparing
        every node's totals with the ones applied."""
        origin = self.origin
        changed = origin.since(self.seen) if origin is not None and recent is origin else None
        if changed is None:
            self._compare(table, recent)
        elif changed:
            self._apply(table, list(dict.fromkeys(changed)), recent)
        if isinstance(recent, NodeTotals):
            self.origin, self.seen = recent, recent.seen()
        else:
            self.origin = None

    def _apply(self, table: _Table, names: list[str], recent: Mapping[str, Pending]) -> None:
        index, applied = table.index, self.applied
        for name in names:
            i = index.get(name)
            if i is None:
                continue
            p = recent.get(name)
            if p is None:  # nothing pending there any more
                if applied.pop(name, None) is not None:
                    self.rescore(table, i, 0.0, 0.0)
                continue
            c, m = self._CPU_OF(p), self._MEM_OF(p)
            applied[name] = (c, m)
            self.rescore(table, i, c, m)

    def _compare(self, table: _Table, recent: Mapping[str, Pending]) -> None:
        index, applied = table.index, self.applied
        changed: list[str] = []
        matched = 0
        for name, p in recent.items():
            if name not in index:
                continue
            matched += 1
            old = applied.get(name)
            if old is None or old[0] != self._CPU_OF(p) or old[1] != self._MEM_OF(p):
                changed.append(name)
        self._apply(table, changed, recent)
        if matched != len(applied):
            # some node's placements left the window (or the ledger forgot them)
            for name in [n for n in applied if n not in recent]:
                del applied[name]
                self.rescore(table, index[name], 0.0, 0.0)

    def rebase(self, table: _Table, i: int) -> None:
        """Node ``i``'s size changed: score it again with what is pending on it."""
        c, m = self.applied.get(table.names[i], (0.0, 0.0))
        self.rescore(table, i, c, m)


def _percents(allocatable: int, used: float, own: float) -> tuple[float, float]:
    """A node's use with the pod (``used``) and without it (less ``own``), in percent of
    ``allocatable``, as ``LeastUsed.uses`` works them out; 0.0 where that is 0."""
    if not allocatable:
        return 0.0, 0.0
    return 100 * used / allocatable, 100 * (used - own) / allocatable


class _View(_Synced):
    """Every table node's score for one pod shape, with the pending totals in it."""

    __slots__ = (
        "cpu_after",
        "cpu_before",
        "mem_after",
        "mem_before",
        "over",
        "parts",
        "scores",
        "soft",
    )

    def __init__(self, table: _Table, pc: float, pm: float) -> None:
        super().__init__(pc, pm)
        # Per node, its use with the pod and without, in percent of allocatable (0.0 where
        # that is 0), for the hottest-node term: ``LeastUsed.uses``' expressions, kept as the
        # scores are, so a request gathers them instead of working out 4 x 1,000 of them
        # (0.4 of 0.6 ms a request at 1,000 nodes, cProfile).
        self.cpu_after: list[float] = []
        self.cpu_before: list[float] = []
        self.mem_after: list[float] = []
        self.mem_before: list[float] = []
        self.scores: list[int] = []
        """0..100: a node over capacity (``least_used`` below 0) is held at 0 here."""
        self.over: dict[int, int] = {}
        """The nodes ``least_used`` scores below 0 (over capacity), with that score."""
        self.parts: dict[int, list[bytes]] = {}
        """Per top step: every node's answer piece for its score (``parts_for``)."""
        self.soft: dict[frozenset[str], tuple[Callable[[int, float, int, float], int], list[int]]]
        self.soft = {}
        """Per set of resources counted at 0 (``least_used.full_by_guess``): the scorer and
        every node's score with it (``soft_scores``), kept as ``scores`` are."""
        self.grow(table)

    def grow(self, table: _Table) -> None:
        """Score the table's nodes added since (no pending yet: the next sync
        compares everything, since the ledger may already hold some for them)."""
        start, pc, pm = len(self.scores), self.pc, self.pm
        # the same sums, in the same order, as estimate.demand_after (pending 0.0)
        cpu = [used_after(b, 0.0, pc) for b in table.cpu_base[start:]]
        mem = [used_after(b, 0.0, pm) for b in table.mem_base[start:]]
        raw = list(map(table.score, table.cpu_alloc[start:], cpu, table.mem_alloc[start:], mem))
        if raw and max(raw) > MAX_SCORE:
            raise ValueError("least-used scored above 100")  # _priorities relies on it
        self.over.update((start + k, r) for k, r in enumerate(raw) if r < 0)
        scores = [r if r > 0 else 0 for r in raw]
        self.scores.extend(scores)
        for step, parts in self.parts.items():
            parts.extend(
                map(getitem, table.pieces[start:], map(_STEP_TABLES[step].__getitem__, scores))
            )
        self.cpu_used.extend(cpu)
        self.mem_used.extend(mem)
        for score, soft in self.soft.values():
            soft.extend(map(score, table.cpu_alloc[start:], cpu, table.mem_alloc[start:], mem))
        for after, before, allocs, used, own in (
            (self.cpu_after, self.cpu_before, table.cpu_alloc[start:], cpu, pc),
            (self.mem_after, self.mem_before, table.mem_alloc[start:], mem, pm),
        ):
            pairs = [_percents(a, u, own) for a, u in zip(allocs, used, strict=True)]
            after.extend(p[0] for p in pairs)
            before.extend(p[1] for p in pairs)
        self.origin = None

    def rescore(self, table: _Table, i: int, cpu_pending: float, mem_pending: float) -> None:
        cu = self.cpu_used[i] = used_after(table.cpu_base[i], cpu_pending, self.pc)
        mu = self.mem_used[i] = used_after(table.mem_base[i], mem_pending, self.pm)
        self.cpu_after[i], self.cpu_before[i] = _percents(table.cpu_alloc[i], cu, self.pc)
        self.mem_after[i], self.mem_before[i] = _percents(table.mem_alloc[i], mu, self.pm)
        score = table.score(table.cpu_alloc[i], cu, table.mem_alloc[i], mu)
        if score > MAX_SCORE:
            raise ValueError(f"least-used scored {score}")  # _priorities relies on 0..100
        if score < 0:
            self.over[i] = score
            score = 0
        else:
            self.over.pop(i, None)
        self.scores[i] = score
        for step, parts in self.parts.items():
            parts[i] = table.pieces[i][_STEP_TABLES[step][score]]
        for soft_score, soft in self.soft.values():
            soft[i] = soft_score(table.cpu_alloc[i], cu, table.mem_alloc[i], mu)

    def soft_scores(self, table: _Table, soft: frozenset[str]) -> list[int]:
        """Every table node's score with ``soft`` counted at 0 (``LeastUsed.combine``'s
        ``soft``), below 0 as it is: worked out once per view and set, then kept up to date
        as ``scores`` are. Worked out per request, a burst that filled 1,000 nodes took 2.7
        ms a request where 1.7 had been (in-process, every node over on guessed CPU)."""
        got = self.soft.get(soft)
        if got is None:
            score = _scorer(table.policy, soft)
            got = self.soft[soft] = (
                score,
                list(map(score, table.cpu_alloc, self.cpu_used, table.mem_alloc, self.mem_used)),
            )
        return got[1]

    def parts_for(self, table: _Table, step: int) -> list[bytes]:
        """Every table node's answer piece when the top score is in ``step``: what
        ``_stepped`` gives it, but the winner's (set per request). Kept up to date as
        scores change, so a request gathers its body in one pass."""
        parts = self.parts.get(step)
        if parts is None:
            look = _STEP_TABLES[step].__getitem__
            parts = self.parts[step] = list(map(getitem, table.pieces, map(look, self.scores)))
        return parts


_REQUEST_CPU = attrgetter("request_cpu_millis")
_REQUEST_MEMORY = attrgetter("request_memory_bytes")
_NO_MARKS: list[Over] = []


class _FilterView(_Synced):
    """Every table node's filter verdict for one pod's figure and the default thresholds:
    ``over`` is True where a resource's rounded use after placement is over the node's
    threshold (``decide.filter_nodes``, before its "no dead end" rules). The pending pods
    count at the filter's figure (the ledger's request totals, ``estimate.filter_usage``)."""

    __slots__ = ("default", "excess", "limits", "over", "own", "owners", "why")

    _CPU_OF = _REQUEST_CPU
    _MEM_OF = _REQUEST_MEMORY

    def __init__(self, table: _Table, pc: float, pm: float, default: Mapping[str, float]) -> None:
        super().__init__(pc, pm)
        self.default = default
        self.limits: list[Mapping[str, float]] = []
        self.own: list[dict[str, float] | None] = []
        """Per node: its thresholds when they differ from the default, else None."""
        self.owners = 0  # how many of ``own`` are not None: 0 spares a request the scan
        self.over: list[bool] = []
        # per node over a threshold: its reason and excess (decide.over_reason and
        # over_excess), kept so a request gathers them without formatting any
        self.why: list[str] = []
        self.excess: list[float] = []
        self.grow(table)

    def _limits(self, info: NodeInfo) -> tuple[Mapping[str, float], dict[str, float] | None]:
        limits = node_thresholds(info, self.default)
        differs = limits is not self.default and limits != self.default
        return limits, dict(limits) if differs else None

    def grow(self, table: _Table) -> None:
        start, pc, pm = len(self.over), self.pc, self.pm
        for limits, own in map(self._limits, table.infos[start:]):
            self.limits.append(limits)
            self.own.append(own)
            self.owners += own is not None
        # the same sums, in the same order, as estimate.demand_after (pending 0.0)
        self.cpu_used.extend(used_after(b, 0.0, pc) for b in table.cpu_base[start:])
        self.mem_used.extend(used_after(b, 0.0, pm) for b in table.mem_base[start:])
        for i in range(start, len(table.names)):
            self.over.append(False)
            self.why.append("")
            self.excess.append(0.0)
            self._judge(table, i)
        self.origin = None

    def rescore(self, table: _Table, i: int, cpu_pending: float, mem_pending: float) -> None:
        self.cpu_used[i] = used_after(table.cpu_base[i], cpu_pending, self.pc)
        self.mem_used[i] = used_after(table.mem_base[i], mem_pending, self.pm)
        self._judge(table, i)

    def _judge(self, table: _Table, i: int) -> None:
        marks = self.marks(table, i)
        self.over[i] = bool(marks)
        if marks:  # fresh readings only: never "estimated" (see LeastUsedFastPath.filter)
            self.why[i] = over_reason(marks, estimated=False)
            self.excess[i] = over_excess(marks)

    def rebase(self, table: _Table, i: int) -> None:
        self.owners -= self.own[i] is not None
        self.limits[i], self.own[i] = self._limits(table.infos[i])
        self.owners += self.own[i] is not None
        super().rebase(table, i)

    def marks(self, table: _Table, i: int) -> list[Over]:
        """Node ``i``'s resources over its thresholds, as ``decide.filter_nodes`` finds
        them from ``estimate.demand_after``: a resource without a reading or with no
        allocatable is skipped; anything but cpu reads as memory, as there."""
        marks = _NO_MARKS
        for resource, threshold in self.limits[i].items():
            if resource == "cpu":
                known, used, alloc = table.cpu_known[i], self.cpu_used[i], table.cpu_alloc[i]
            else:
                known, used, alloc = table.mem_known[i], self.mem_used[i], table.mem_alloc[i]
            if not known or not alloc:
                continue
            rounded = go_round(100 * used / alloc)
            if rounded > threshold:
                marks = [*marks, (resource, rounded, threshold)]
        return marks


class _Table:
    """Per snapshot: every node's bases, as arrays indexed by position."""

    __slots__ = (
        "cpu_alloc",
        "cpu_base",
        "cpu_known",
        "index",
        "infos",
        "mem_alloc",
        "mem_base",
        "mem_known",
        "names",
        "pieces",
        "policy",
        "score",
        "sigmas",
        "snapshot",
        "version",
        "filters",
        "views",
        "wc",
        "wm",
    )

    def __init__(self, snapshot: LoadSnapshot, policy: LeastUsed) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.score = _scorer(policy)
        self.wc, self.wm = policy.weights.get("cpu", 0), policy.weights.get("memory", 0)
        self.sigmas = policy.peak_sigmas
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.infos: list[NodeInfo] = []
        self.cpu_base: list[float] = []
        self.mem_base: list[float] = []
        self.cpu_alloc: list[int] = []
        self.mem_alloc: list[int] = []
        self.cpu_known: list[bool] = []
        self.mem_known: list[bool] = []
        self.pieces: list[list[bytes]] = []
        self.views: dict[tuple[float, float], _View] = {}
        self.filters: dict[tuple[float, float, tuple[tuple[str, float], ...]], _FilterView] = {}
        self.version = 0  # bumped whenever a node is added or resized

    def _load(self, name: str) -> NodeLoad | None:
        load = self.snapshot.nodes.get(name)
        if load is None or (self.wc and load.cpu.avg is None):
            return None
        return None if self.wm and load.memory.avg is None else load

    def add(self, names: Sequence[str], infos: Mapping[str, NodeInfo]) -> bool:
        """Add the nodes of ``names`` not in the table yet; False when one has no
        size or no fresh measurement (the general path's case)."""
        new: list[tuple[str, NodeInfo, NodeLoad]] = []
        for name in dict.fromkeys(n for n in names if n not in self.index):
            info, load = infos.get(name), self._load(name)
            if info is None or load is None:
                return False
            new.append((name, info, load))
        for name, info, load in new:
            self.index[name] = len(self.names)
            self.names.append(name)
            self.infos.append(info)
            self.cpu_known.append(load.cpu.avg is not None)
            self.mem_known.append(load.memory.avg is not None)
            self.cpu_base.append(0.0)
            self.mem_base.append(0.0)
            self.cpu_alloc.append(0)
            self.mem_alloc.append(0)
            self._size(len(self.names) - 1, info, load)
            # the node's answer for every score 0..10: a body is a join of look-ups
            host = b'{"Host":' + msgspec.json.encode(name) + b',"Score":'
            self.pieces.append([host + score for score in _SCORE_BYTES])
        for view in self.views.values():
            view.grow(self)
        for verdicts in self.filters.values():
            verdicts.grow(self)
        return True

    def _size(self, i: int, info: NodeInfo, load: NodeLoad) -> None:
        self.version += 1
        self.infos[i] = info
        # (a resource without a reading has a base of 0 and is never read: cpu_known)
        cpu = peak_percent(load.cpu, self.sigmas) or 0.0
        memory = peak_percent(load.memory, self.sigmas) or 0.0
        self.cpu_base[i] = cpu * info.cpu_capacity_millis / 100
        self.mem_base[i] = memory * info.memory_capacity_bytes / 100
        self.cpu_alloc[i] = info.cpu_allocatable_millis
        self.mem_alloc[i] = info.memory_allocatable_bytes

    def resize(self, i: int, info: NodeInfo) -> None:
        load = self.snapshot.nodes[self.names[i]]
        self._size(i, info, load)
        for view in self.views.values():
            view.rebase(self, i)
        for verdicts in self.filters.values():
            verdicts.rebase(self, i)

    def view(self, pc: float, pm: float) -> _View:
        key = (pc, pm)
        view = self.views.get(key)
        if view is None:
            if len(self.views) >= _VIEWS:
                del self.views[next(iter(self.views))]
            view = self.views[key] = _View(self, pc, pm)
        return view

    def filter_view(self, pc: float, pm: float, default: Mapping[str, float]) -> _FilterView:
        key = (pc, pm, tuple(default.items()))
        verdicts = self.filters.get(key)
        if verdicts is None:
            if len(self.filters) >= _VIEWS:
                del self.filters[next(iter(self.filters))]
            verdicts = self.filters[key] = _FilterView(self, pc, pm, default)
        return verdicts


def _gather(keys: Sequence[Any]) -> Callable[[Any], tuple[Any, ...]]:
    """``lambda seq: tuple(seq[k] for k in keys)`` in C: ``operator.itemgetter``,
    about twice as fast as ``map(seq.__getitem__, keys)`` (1,000 list items: 10 us
    against 19 us; 1,000 dict keys: 11 us against 20 us). Given one key,
    itemgetter returns the item itself, hence the other cases."""
    if len(keys) > 1:
        return itemgetter(*keys)
    if keys:
        key = keys[0]
        return lambda seq: (seq[key],)
    return lambda seq: ()


class _Positions:
    """A request's node list mapped onto the table (kept for the next request:
    the scheduler often sends the same list again)."""

    __slots__ = (
        "_alloc",
        "_alloc_version",
        "_where",
        "get",
        "get_infos",
        "held",
        "names",
        "positions",
        "table",
        "version",
    )

    def __init__(self, table: _Table, names: list[str], positions: list[int]) -> None:
        self.table = table
        self.held: tuple[NodeInfo, ...] = ()
        self.version = -1  # of the table when ``held`` was gathered
        self.names = names
        self.positions = positions
        self.get = _gather(positions)
        """Table-indexed list -> the request's items, in its order."""
        # looked up by the table's own name strings: their hashes are cached
        self.get_infos = _gather(list(map(table.names.__getitem__, positions)))
        self._where: dict[int, int] | None = None
        self._alloc: tuple[Sequence[int], Sequence[int], int, int] = ((), (), 0, 0)
        self._alloc_version = -1

    def allocatable(self) -> tuple[Sequence[int], Sequence[int], int, int]:
        """The request's nodes' CPU and memory allocatable, and the sum of each, kept until
        the table's sizes change (its ``version``): gathered and summed once per change of
        sizes, not once per request."""
        if self._alloc_version != self.table.version:
            cpu, mem = self.get(self.table.cpu_alloc), self.get(self.table.mem_alloc)
            self._alloc = (cpu, mem, sum(cpu), sum(mem))
            self._alloc_version = self.table.version
        return self._alloc

    def among(self, indices: Iterable[int]) -> list[int]:
        """The request's positions (its order) of those of the table's ``indices`` it names."""
        if self._where is None:
            self._where = dict(zip(self.positions, range(len(self.positions)), strict=True))
        where = self._where
        return [where[i] for i in indices if i in where]


def _less_for_raising(
    table: _Table,
    view: _View,
    known: _Positions,
    scores: Sequence[int],
    weight: float,
    soft: frozenset[str] = frozenset(),
) -> tuple[dict[int, int], dict[int, float]] | None:
    """``decide.prioritize``'s hottest-node term (``least_used.hottest_raises``, beyond the
    least: ``least_used.beyond_least``) over the request's nodes, the ``soft`` resources
    left out: the positions whose score it lowers, with the lowered score and by how much
    each raised the hottest beyond the least; None when a weighed resource has an
    allocatable of 0 (the general path leaves it out).
    The percentages are the general path's expressions (``LeastUsed.uses``), so equal to
    the bit; the per-node work is C-level maps but for the few nodes above the top."""
    measured: list[tuple[Sequence[float], float]] = []  # per weighed resource: after, top
    for name, w, after_all, before_all, alloc_all in (
        ("cpu", table.wc, view.cpu_after, view.cpu_before, table.cpu_alloc),
        ("memory", table.wm, view.mem_after, view.mem_before, table.mem_alloc),
    ):
        if not w:
            continue
        if 0 in known.get(alloc_all):
            return None
        if name in soft:
            continue
        measured.append((known.get(after_all), max(known.get(before_all), default=0.0)))
    raised: dict[int, float] = {}
    weights = level_weights([top for _, top in measured])
    level = max((top for _, top in measured), default=0.0)
    highest: dict[int, float] = {}  # the nodes going above ``level``: their highest use
    for (after, top), weight_r in zip(measured, weights, strict=True):
        for k in compress(range(len(after)), map(gt, after, repeat(top))):
            raised[k] = raised.get(k, 0.0) + (after[k] - top) * weight_r
            if after[k] > level:
                highest[k] = max(highest.get(k, level), after[k])
    for k, high in highest.items():
        raised[k] = overall_level(raised[k], high - level)
    least = unavoidable(raised.values(), len(scores))
    if least:  # every node raises it: only beyond the least counts
        raised = {k: v - least for k, v in raised.items() if v > least}
    lowered = lower_for_raising(scores, raised, weight)
    return lowered, {k: raised[k] for k in lowered}


def _full_by_guess(
    table: _Table, view: _View, known: _Positions, guessed: Collection[str], count: int
) -> frozenset[str] | None:
    """``least_used.full_by_guess`` over the request's ``count`` nodes, from the view's
    percentages (``LeastUsed.uses``' expressions); None when a weighed resource has an
    allocatable of 0 (the general path leaves such a node out)."""
    if len(view.over) < count or len(known.among(view.over)) < count:
        return frozenset()  # some node fits the pod on every resource
    out: set[str] = set()
    for name, w, after, base, alloc in (
        ("cpu", table.wc, view.cpu_after, table.cpu_base, table.cpu_alloc),
        ("memory", table.wm, view.mem_after, table.mem_base, table.mem_alloc),
    ):
        if not w or name not in guessed:
            continue
        allocs = known.get(alloc)
        if 0 in allocs:
            return None
        # over with the pod, and the reading alone within (``LeastUsed.read_within``)
        if min(known.get(after)) > 100.0 and all(map(le, known.get(base), allocs)):
            out.add(name)
    return frozenset(out)


def _maybe_over_share(
    table: _Table, view: _View, known: _Positions, scores: Sequence[int], same: Sequence[int]
) -> bool:
    """Whether ``spread.fair_share`` may lower a node for this request: False only when no
    node at the top holds some of the set, or each that does has room and stays within the
    least share it can have (``spread.within_least_share``). A Deployment's burst over
    1,000 nodes, each already holding a few of it, took 1.6 ms a request where 0.85 had been
    with the term worked out on every node (benchmarks/prioritize.py)."""
    top = max(scores)
    tops = [k for k in compress(range(len(scores)), map(eq, scores, repeat(top))) if same[k]]
    if not tops:
        return False
    cpu, mem, cpu_all, mem_all = known.allocatable()
    total = sum(same) + 1
    if not cpu_all or not mem_all:
        return True
    for k in tops:
        i = known.positions[k]
        # (a node without room has no part: its least share is the slack alone)
        after = (
            view.cpu_after[i] if table.wc else None,
            view.mem_after[i] if table.wm else None,
        )
        roomy = cpu[k] and mem[k] and rooms([after])[0]
        weight = capacity_weight(cpu[k], mem[k], cpu_all, mem_all) if roomy else 0.0
        if not within_least_share(same[k], total, weight):
            return True
    return False


def _rooms(table: _Table, view: _View, known: _Positions) -> list[bool]:
    """Per request node, whether it has room for the pod (``spread.rooms``) on the figures
    ``LeastUsed.uses`` gives the general path: each weighed resource's use with the pod
    (every node here has a reading of each, ``_Table._load``; none where the allocatable
    is 0, as there)."""
    cpu, mem = (
        [a if w and c else None for a, c in zip(known.get(after), known.get(alloc), strict=True)]
        for w, after, alloc in (
            (table.wc, view.cpu_after, table.cpu_alloc),
            (table.wm, view.mem_after, table.mem_alloc),
        )
    )
    return rooms(list(zip(cpu, mem, strict=True)))


def _percent(used: float, allocatable: int, known: bool) -> int | None:
    # estimate.Demand.percent, rounded as the filter rounds it (go_round)
    if not known:
        return None
    return go_round(100 * used / allocatable if allocatable else 100.0)


class LeastUsedFastPath:
    def __init__(self, policy: LeastUsed) -> None:
        self.policy = policy
        self._table: _Table | None = None
        self._last: _Positions | None = None

    @classmethod
    def for_policy(cls, policy: Policy) -> LeastUsedFastPath | None:
        """A fast path for ``policy`` when it is least-used without a pods weight."""
        if isinstance(policy, LeastUsed) and not policy.weights.get("pods"):
            return cls(policy)
        return None

    def _positions(
        self, names: Sequence[str], infos: Mapping[str, NodeInfo], snapshot: LoadSnapshot
    ) -> _Positions | None:
        table = self._table
        if table is None or table.snapshot.nodes is not snapshot.nodes:
            table = self._table = _Table(snapshot, self.policy)
            self._last = None
        elif table.snapshot is not snapshot:
            # A new snapshot of the same readings (the load file source stamps its
            # one parsed reading with the file's mtime on every refresh, once a
            # second): the table holds only what ``nodes`` says, so it stands.
            # Rebuilding it costs ~3.4 ms at 1,000 nodes.
            table.snapshot = snapshot
        last = self._last
        if last is not None and last.names == names:
            known = last  # the same list as last time (C compare): keep its positions
        else:
            try:
                where = list(_gather(names)(table.index))
            except KeyError:  # a node the table does not hold yet
                if not table.add(names, infos):
                    return None
                where = list(_gather(names)(table.index))
            known = self._last = _Positions(table, list(names), where)
        # The sizes the caller knows now against the table's (C loops, identity first).
        try:
            found = known.get_infos(infos)
        except KeyError:
            return None  # a node of unknown size: the general path's case
        if known.version != table.version:
            known.held = known.get(table.infos)
            known.version = table.version
        if found != known.held:
            for info, old, i in zip(found, known.held, known.positions, strict=True):
                if info != old:
                    table.resize(i, info)
            known.held = known.get(table.infos)
            known.version = table.version
        return known

    def answer(
        self,
        pod: PodFacts,
        names: Sequence[str],
        infos: Mapping[str, NodeInfo],
        snapshot: LoadSnapshot,
        recent: Mapping[str, Pending],
        *,
        figures: bool = False,
        spread: Mapping[str, int] | None = None,
    ) -> FastAnswer | None:
        """The answer for ``names``, or None when a node lacks a size or fresh data
        (the general path handles it). ``spread``: per node, the pods of the pod's
        controller there (``NodeState.same_owner``), for the policy's spreading term."""
        known = self._positions(names, infos, snapshot)
        if known is None:
            return None
        table, positions = known.table, known.positions
        view = table.view(pod.usage.cpu_millis, pod.usage.memory_bytes)
        view.sync(table, recent)
        scores: Sequence[int] = known.get(view.scores)
        if not scores:
            return FastAnswer(scores, None, b"[]", (lambda k: (None, None)) if figures else None)
        spread_weight = self.policy.spread_weight
        crowded: list[int] = []
        soft: frozenset[str] = frozenset()
        if pod.guessed and view.over:
            found = _full_by_guess(table, view, known, pod.guessed, len(scores))
            if found is None:
                return None
            soft = found
        if soft:
            # every node over capacity on a guessed resource: each node's own score with it
            # counted at 0 (``least_used.full_by_guess``), as the general path scores it;
            # every piece follows from it
            scores = list(known.get(view.soft_scores(table, soft)))
            crowded = list(range(len(scores)))
        if spread and spread_weight:
            # the few nodes holding the controller's pods score lower (``LeastUsed.score``)
            total = sum(spread.values())
            where = {name: k for k, name in enumerate(known.names) if name in spread}
            if where:
                scores = list(scores)
                for name, k in where.items():
                    scores[k] = spread_score(scores[k], spread[name], total, spread_weight)
                crowded = list(where.values())
        # before the hottest-node term: what the fair-share band weighs (``decide.prioritize``;
        # a node over capacity is 0 here and below 0 there, and has no room in either)
        loads = scores
        weight = self.policy.hottest_weight
        raised: dict[int, float] = {}
        if weight:
            got = _less_for_raising(table, view, known, scores, weight, soft)
            if got is None:
                return None  # a node of no size for a weighed resource: the general path's
            lowered, raised = got
            if lowered:
                scores = list(scores)
                for k, score in lowered.items():
                    scores[k] = score
                crowded = sorted({*crowded, *lowered})
        band = self.policy.spread_band
        passed = ""
        over = known.among(view.over) if view.over and not soft else []
        if over and max(scores) <= band:
            # The view holds a node over capacity at 0; its own score is below 0
            # (``least_used``). With the best within the spreading band of 0, how far over
            # each is can change the band's set and the winner, so they score as the
            # general path scores them. Every node over is this case: once the pods the
            # ledger counts fill every node (a burst larger than the cluster, before a
            # reading shows them), the general path's Python scoring ran 6.6x slower per
            # request (docs/benchmarks.md).
            scores = list(scores)
            for k in over:
                scores[k] = view.over[positions[k]]
        if spread and band:
            # then among the near-best, as ``decide.prioritize`` (``spread.near_best``)
            same = [spread.get(name, 0) for name in known.names]
            total = sum(spread.values())
            # the rooms are worked out at most once a request, for whichever term needs them
            room = _rooms(table, view, known) if sole_holder(same, total) is not None else None
            spreaded = near_best(scores, same, band, total, room)
            moved = [k for k, (a, b) in enumerate(zip(scores, spreaded, strict=True)) if a != b]
            if moved:
                scores = spreaded
                crowded = sorted({*crowded, *moved})
            if _maybe_over_share(table, view, known, scores, same):
                # a node at the top may be over its share of the set (``decide.prioritize``,
                # ``spread.fair_share``): judged on the same figures
                cpu_alloc, mem_alloc, _, _ = known.allocatable()
                if room is None:
                    room = _rooms(table, view, known)
                fair = fair_share(scores, same, cpu_alloc, mem_alloc, room, loads)
                moved = [k for k, (a, b) in enumerate(zip(scores, fair, strict=True)) if a != b]
                if moved:
                    scores = fair
                    crowded = sorted({*crowded, *moved})
                    passed = passed_note([known.names[k] for k in moved], [same[k] for k in moved])

        def counts(tied: list[str]) -> list[float]:
            # the tie-break reads the same ledger counts the scores did (to_priorities)
            return list(map(_PODS, map(recent.get, tied, repeat(_NOTHING))))

        top = max(scores)  # below 0 only when every node is over capacity
        # the ledger's totals drop a node with no entries, so every busy one is in it
        busy = recent if isinstance(recent, NodeTotals) else None
        win = _winner(known.names, scores, top, counts, busy)
        step = PRIORITY_OF[max(top, 0)]  # every score at or below 0 answers 0
        parts = list(known.get(view.parts_for(table, step)))
        stepped = _STEP_TABLES[step]
        for k in crowded:  # their pieces for the lowered score
            parts[k] = table.pieces[positions[k]][stepped[max(scores[k], 0)]]
        parts[win] = table.pieces[positions[win]][_winner_step(step, len(scores))]
        body = b"[" + b",".join(parts) + b"]"
        look: Figures | None = None
        if figures:
            # copies: the view and the table change with later requests
            cpu = known.get(view.cpu_used)
            mem = known.get(view.mem_used)
            cpu_alloc = known.get(table.cpu_alloc)
            mem_alloc = known.get(table.mem_alloc)
            flags = table.cpu_known, table.mem_known  # fixed per node and snapshot

            def look(k: int) -> tuple[int | None, int | None]:
                i = positions[k]
                return (
                    _percent(cpu[k], cpu_alloc[k], flags[0][i]),
                    _percent(mem[k], mem_alloc[k], flags[1][i]),
                )

        if over:  # their own scores, for the Event, as the general path gives them
            scores = list(scores)
            for k in over:
                scores[k] = view.over[positions[k]]
        return FastAnswer(scores, win, body, look, raised.get(win, 0.0), passed, soft)

    def filter(
        self,
        pod: PodFacts,
        names: Sequence[str],
        infos: Mapping[str, NodeInfo],
        snapshot: LoadSnapshot,
        recent: Mapping[str, Pending],
        thresholds: Mapping[str, float],
        *,
        exempt: bool,
    ) -> FilterOutcome | None:
        """``decide.filter_nodes`` over fresh measurements, or None when a node lacks a
        size or fresh data (the general path handles it: a node the snapshot does not
        hold is estimated there, one of unknown size is read in percent of capacity,
        rare cases not worth a second copy of those rules). ``recent``: the ledger's
        placements since the snapshot's window, as the general path reads them."""
        known = self._positions(names, infos, snapshot)
        if known is None:
            return None
        table, listed = known.table, known.names
        own_use = pod.load.request if pod.load is not None else pod.usage  # demand_after's
        verdicts = table.filter_view(own_use.cpu_millis, own_use.memory_bytes, thresholds)
        verdicts.sync(table, recent)
        own: dict[str, dict[str, float]] = {}
        if verdicts.owners:  # some node of the table has thresholds of its own
            for name, limits in zip(listed, known.get(verdicts.own), strict=True):
                if limits is not None:
                    own[name] = dict(limits)
        over: tuple[bool, ...] = known.get(verdicts.over)
        if True not in over:  # the usual case: one C scan, no per-node work
            return FilterOutcome(list(listed), {}, thresholds=own)
        rejected = list(compress(listed, over))
        failed = dict(zip(rejected, compress(known.get(verdicts.why), over), strict=True))
        excess = dict(zip(rejected, compress(known.get(verdicts.excess), over), strict=True))
        passed = list(compress(listed, map(not_, over)))
        return conclude_filter(
            listed, passed, failed, excess, own, exempt=exempt, band=self.policy.spread_band
        )

    def scores(
        self,
        pod: PodFacts,
        names: Sequence[str],
        infos: Mapping[str, NodeInfo],
        snapshot: LoadSnapshot,
        recent: Mapping[str, Pending],
    ) -> list[int] | None:
        """Every node's 0..100 score (for tests and callers that map them themselves)."""
        answer = self.answer(pod, names, infos, snapshot, recent)
        return None if answer is None else list(answer.fine)
