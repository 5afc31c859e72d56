"""least-used for a whole request at the cost of what changed since the last one.

kube-scheduler sends the same node list again and again (its filtered node
list, in the order of its node cache), and within one load snapshot a node's
measured use in absolute units and its allocatable do not change from pod to
pod. So per (snapshot, node list) a *layout* keeps the nodes' bases as arrays
and each node's ``{"Host":"name","Score":`` prefix; per pod shape (cpu, memory
estimate: a burst of one Deployment's pods shares it) a *view* keeps every
node's score, its use after placement and the pending placements it was
computed with. A request then re-scores only the nodes whose pending
placements (the ledger's totals) changed, maps to 0..10 and joins the answer
body from the prefixes. It covers the common case (fresh metrics and a known
size for every node, cpu/memory weights); anything else returns None and the
caller takes the general path. Equality with the general path is tested
(tests/extender/test_fastpath.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter, ne

import msgspec

from .decide import to_priorities
from .estimate import PodFacts, go_round
from .ledger import Pending
from .model import LoadSnapshot, NodeInfo
from .policies import MAX_SCORE, LeastUsed, Policy
from .policies.base import PRIORITY_OF
from .policies.least_used import least_used

__all__ = ["FastAnswer", "LeastUsedFastPath"]

_LAYOUTS = 4  # node lists kept per snapshot (the scheduler's filtered lists vary a little)
_VIEWS = 8  # pod shapes kept per layout
_AMOUNTS = attrgetter("cpu_millis", "memory_bytes")
_SCORE_BYTES = [str(p).encode() + b"}" for p in range(11)]


@dataclass(frozen=True, slots=True)
class FastAnswer:
    """One request's result. ``priorities`` and ``body`` may be shared with later
    requests: never mutate them."""

    names: Sequence[str]
    priorities: list[int]
    win: int | None
    body: bytes
    """The JSON answer, ``[{"Host":..,"Score":..},..]``, ready to send."""
    fine: Sequence[int] = ()
    """With ``figures=True``: every node's 0..100 score (a copy)."""
    figures: Callable[[int], tuple[int | None, int | None]] | None = None
    """With ``figures=True``: node index -> [cpu, memory] percent of allocatable
    after placement, from the very sums that were scored (None: no data)."""


def _scorer(policy: LeastUsed) -> Callable[[int, float, int, float], int]:
    """One node's 0..100 score from (cpu allocatable, cpu used, memory allocatable,
    memory used): ``least_used`` per resource and ``LeastUsed.combine``, the same
    functions the general path calls, so the two cannot drift apart."""
    combine = policy.combine
    if policy.weights.get("cpu", 0) and policy.weights.get("memory", 0):

        def both(ac: int, cu: float, am: int, mu: float) -> int:
            score = combine(least_used(ac, cu), least_used(am, mu), None)
            assert score is not None
            return score

        return both
    if policy.weights.get("cpu", 0):

        def cpu(ac: int, cu: float, am: int, mu: float) -> int:
            score = combine(least_used(ac, cu), None, None)
            assert score is not None
            return score

        return cpu

    def memory(ac: int, cu: float, am: int, mu: float) -> int:
        score = combine(None, least_used(am, mu), None)
        assert score is not None
        return score

    return memory


class _View:
    """Every node's score for one pod shape, and the pending totals it includes.

    Besides the scores it keeps what ``decide.to_priorities`` needs, up to date
    per changed node: each node's plain 0..10 step (``PRIORITY_OF``), how many
    nodes have each 0..100 score and which nodes are in each step. That function
    maps every score through the table and then adjusts only nodes in the
    winner's step (a lower fine score there steps down, or the winner steps up
    from 0), so it is run on that step's nodes alone, in their order, and every
    other node keeps its table value. Equality with the full call is tested
    (tests/extender/test_fastpath.py).
    """

    __slots__ = (
        "applied",
        "body",
        "keys",
        "count",
        "cpu_used",
        "mem_used",
        "parts",
        "plain",
        "priorities",
        "scores",
        "steps",
        "touched",
        "values",
        "where",
        "win",
    )

    def __init__(self, layout: _Layout, pc: float, pm: float) -> None:
        score = layout.score
        # the same sums, in the same order, as estimate.demand_after (pending 0.0)
        self.cpu_used = [b + (0.0 + pc) for b in layout.cpu_base]
        self.mem_used = [b + (0.0 + pm) for b in layout.mem_base]
        self.scores = list(
            map(score, layout.cpu_alloc, self.cpu_used, layout.mem_alloc, self.mem_used)
        )
        if min(self.scores, default=0) < 0 or max(self.scores, default=0) > MAX_SCORE:
            raise ValueError("least-used scores outside 0..100")  # cannot happen; see _scorer
        self.plain = list(map(PRIORITY_OF.__getitem__, self.scores))
        self.count = [0] * (MAX_SCORE + 1)
        self.steps: list[set[int]] = [set() for _ in range(11)]
        for i, (s, p) in enumerate(zip(self.scores, self.plain, strict=True)):
            self.count[s] += 1
            self.steps[p].add(i)
        self.applied: dict[str, tuple[float, float]] = {}
        self.keys: list[str] = []
        self.values: list[tuple[float, float]] = []
        self.priorities: list[int] = []
        self.win: int | None = None
        self.body = b""
        self.parts: list[bytes] = []  # the body's pieces, one per node
        self.touched: set[int] = set()  # nodes whose step moved since the body was made
        self.where: list[int] = []  # the top step's nodes when the body was made

    def sync(self, layout: _Layout, recent: Mapping[str, Pending], pc: float, pm: float) -> bool:
        """Re-score the nodes whose pending totals changed; True when any did.

        The ledger's totals are a dict that, between two requests, mostly changes
        a value or two and appends a node or two; comparing its keys and values
        with the last request's as lists (C loops, no per-node Python) finds them.
        Anything else (a node left the window) is found by a full comparison."""
        keys = list(recent)
        values = list(map(_AMOUNTS, recent.values()))
        known = len(self.keys)
        if keys[:known] == self.keys:
            names = list(compress(keys, map(ne, values, self.values)))
            names.extend(keys[known:])
            moved = self._apply(layout, names, recent, pc, pm)
        else:
            moved = self._compare(layout, recent, pc, pm)
        self.keys, self.values = keys, values
        return moved

    def _apply(
        self,
        layout: _Layout,
        names: list[str],
        recent: Mapping[str, Pending],
        pc: float,
        pm: float,
    ) -> bool:
        index, applied = layout.index, self.applied
        moved = False
        for name in names:
            i = index.get(name)
            if i is None:
                continue
            p = recent[name]
            c, m = p.cpu_millis, p.memory_bytes
            applied[name] = (c, m)
            moved = self._rescore(layout, i, c + pc, m + pm) or moved
        return moved

    def _compare(
        self, layout: _Layout, recent: Mapping[str, Pending], pc: float, pm: float
    ) -> bool:
        index, applied = layout.index, self.applied
        changed: list[str] = []
        matched = 0
        for name, p in recent.items():
            if name not in index:
                continue
            matched += 1
            old = applied.get(name)
            if old is None or old[0] != p.cpu_millis or old[1] != p.memory_bytes:
                changed.append(name)
        moved = self._apply(layout, changed, recent, pc, pm)
        if matched != len(applied):
            # some node's placements left the window (or the ledger forgot them)
            for name in [n for n in applied if n not in recent]:
                del applied[name]
                moved = self._rescore(layout, index[name], 0.0 + pc, 0.0 + pm) or moved
        return moved

    def _rescore(self, layout: _Layout, i: int, cpu_extra: float, mem_extra: float) -> bool:
        """Score node ``i`` with these pending amounts; True when its score moved."""
        cu = self.cpu_used[i] = layout.cpu_base[i] + cpu_extra
        mu = self.mem_used[i] = layout.mem_base[i] + mem_extra
        new = layout.score(layout.cpu_alloc[i], cu, layout.mem_alloc[i], mu)
        old = self.scores[i]
        if new == old:
            return False
        self.scores[i] = new
        self.count[old] -= 1
        self.count[new] += 1
        step = PRIORITY_OF[new]
        if step != self.plain[i]:
            self.steps[self.plain[i]].discard(i)
            self.steps[step].add(i)
            self.plain[i] = step
            self.touched.add(i)
        return True

    def refresh(self, layout: _Layout) -> None:
        """Priorities, winner and body for the current scores: the body's pieces
        change only for nodes whose step moved and the top step's nodes."""
        names = layout.names
        if not names:
            self.priorities, self.win, self.body = [], None, b"[]"
            return
        top_score = MAX_SCORE
        while not self.count[top_score]:
            top_score -= 1
        where = sorted(self.steps[PRIORITY_OF[top_score]])
        top, win = to_priorities([names[i] for i in where], [self.scores[i] for i in where])
        if top and (min(top) < 0 or max(top) > 10):
            raise ValueError(f"to_priorities answered outside 0..10: {top}")
        priorities = self.plain.copy()
        for i, p in zip(where, top, strict=True):
            priorities[i] = p
        self.win = None if win is None else where[win]
        if priorities == self.priorities and self.body:
            return  # the body stands; ``touched`` keeps what moved since it was made
        pieces, parts = layout.pieces, self.parts
        if not parts:
            parts.extend(map(list.__getitem__, pieces, priorities))
        else:
            for i in self.touched.union(where, self.where):
                parts[i] = pieces[i][priorities[i]]
        self.touched.clear()
        self.where = where
        self.priorities = priorities
        self.body = b"[" + b",".join(parts) + b"]"


class _Layout:
    """Per snapshot and node list: the bases of every node, as arrays."""

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
        "score",
        "views",
    )

    def __init__(
        self,
        names: list[str],
        infos: list[NodeInfo],
        snapshot: LoadSnapshot,
        score: Callable[[int, float, int, float], int],
    ) -> None:
        measured = snapshot.nodes
        self.names = names
        self.infos = infos
        self.index = {name: i for i, name in enumerate(names)}
        self.score = score
        self.cpu_base: list[float] = []
        self.mem_base: list[float] = []
        self.cpu_known: list[bool] = []
        self.mem_known: list[bool] = []
        for name, info in zip(names, infos, strict=True):
            load = measured[name]
            self.cpu_base.append((load.cpu.avg or 0.0) * info.cpu_capacity_millis / 100)
            self.mem_base.append((load.memory.avg or 0.0) * info.memory_capacity_bytes / 100)
            self.cpu_known.append(load.cpu.avg is not None)
            self.mem_known.append(load.memory.avg is not None)
        self.cpu_alloc = [info.cpu_allocatable_millis for info in infos]
        self.mem_alloc = [info.memory_allocatable_bytes for info in infos]
        # each node's answer for every score 0..10: the body is a join of look-ups
        self.pieces = [
            [b'{"Host":' + msgspec.json.encode(n) + b',"Score":' + b for b in _SCORE_BYTES]
            for n in names
        ]
        self.views: dict[tuple[float, float], _View] = {}

    def view(self, pc: float, pm: float) -> _View:
        key = (pc, pm)
        view = self.views.get(key)
        if view is None:
            if len(self.views) >= _VIEWS:
                del self.views[next(iter(self.views))]
            view = self.views[key] = _View(self, pc, pm)
        return view


def _percent(used: float, allocatable: int, known: bool) -> int | None:
    # estimate.Demand.percent, rounded as the filter rounds it (go_round)
    if not known:
        return None
    return go_round(100 * used / allocatable if allocatable else 100.0)


class LeastUsedFastPath:
    def __init__(self, policy: LeastUsed) -> None:
        self.policy = policy
        self._score = _scorer(policy)
        self._snapshot: LoadSnapshot | None = None
        self._layouts: list[_Layout] = []

    @classmethod
    def for_policy(cls, policy: Policy) -> LeastUsedFastPath | None:
        """A fast path for ``policy`` when it is least-used without a pods weight."""
        if isinstance(policy, LeastUsed) and not policy.weights.get("pods"):
            return cls(policy)
        return None

    def _layout(
        self, names: Sequence[str], infos: Mapping[str, NodeInfo], snapshot: LoadSnapshot
    ) -> _Layout | None:
        if snapshot is not self._snapshot:
            self._snapshot, self._layouts = snapshot, []
        for layout in self._layouts:
            # Both compare C-level and identity first; the layout's own name strings
            # have their hashes cached, the request's fresh ones would be hashed.
            if layout.names == names and list(map(infos.get, layout.names)) == layout.infos:
                return layout
        found = list(map(infos.get, names))
        if None in found or len(set(names)) != len(names):
            return None  # a node of unknown size, or a name twice: the general path
        measured = snapshot.nodes
        wc, wm = self.policy.weights.get("cpu", 0), self.policy.weights.get("memory", 0)
        for name in names:
            load = measured.get(name)
            if load is None or (wc and load.cpu.avg is None) or (wm and load.memory.avg is None):
                return None
        known = [info for info in found if info is not None]
        layout = _Layout(list(names), known, snapshot, self._score)
        if len(self._layouts) >= _LAYOUTS:
            self._layouts.pop(0)
        self._layouts.append(layout)
        return layout

    def answer(
        self,
        pod: PodFacts,
        names: Sequence[str],
        infos: Mapping[str, NodeInfo],
        snapshot: LoadSnapshot,
        recent: Mapping[str, Pending],
        *,
        figures: bool = False,
    ) -> FastAnswer | None:
        """The answer for ``names``, or None when a node lacks a size or fresh data
        (the general path handles it)."""
        layout = self._layout(names, infos, snapshot)
        if layout is None:
            return None
        pc, pm = pod.usage.cpu_millis, pod.usage.memory_bytes
        view = layout.view(pc, pm)
        if view.sync(layout, recent, pc, pm) or not view.body:
            view.refresh(layout)
        look: Callable[[int], tuple[int | None, int | None]] | None = None
        if figures:
            cpu_used, mem_used = list(view.cpu_used), list(view.mem_used)

            def look(i: int) -> tuple[int | None, int | None]:
                return (
                    _percent(cpu_used[i], layout.cpu_alloc[i], layout.cpu_known[i]),
                    _percent(mem_used[i], layout.mem_alloc[i], layout.mem_known[i]),
                )

        fine = list(view.scores) if figures else []
        return FastAnswer(layout.names, view.priorities, view.win, view.body, fine, look)

    def scores(
        self,
        pod: PodFacts,
        names: Sequence[str],
        infos: Mapping[str, NodeInfo],
        snapshot: LoadSnapshot,
        recent: Mapping[str, Pending],
    ) -> list[int] | None:
        """Every node's 0..100 score (for tests and callers that map them themselves)."""
        layout = self._layout(names, infos, snapshot)
        if layout is None:
            return None
        pc, pm = pod.usage.cpu_millis, pod.usage.memory_bytes
        view = layout.view(pc, pm)
        view.sync(layout, recent, pc, pm)
        return list(view.scores)


assert MAX_SCORE == 100  # _SCORE_BYTES covers to_priorities' 0..10
