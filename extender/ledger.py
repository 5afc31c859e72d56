"""Pods placed since the last load measurement: the herding protection.

Metrics lag placements by a window (load-watcher refreshes every minute,
metrics-server every 15 s). Without accounting for the pods placed meanwhile, a
burst of pods all sees the same "coolest" node and all lands on it. Like
Trimaran's PodAssignEventHandler and Koordinator's podAssignCache, the ledger
remembers each placement with its time and estimated use; a placement counts
towards a node until the measurement window has covered it.

Two ways in: ``bind`` from the extender's pod watch (what really happened), and
``assume`` from prioritize (the node the extender scored best) for when there is
no watch, or before the watch event arrives. A bind replaces an assumption.

And one way out that counts: ``depart``, from the watch, for a pod that left its node
(deleted, or finished). A measurement taken before it left still holds its use; until
the window covers its leaving, the ledger takes its estimate *off* the node. Without
this, a cluster where pods come and go counts every replaced pod twice, once in the
reading and once at its successor's estimate: in the placement benchmark's steady-mix
(42 pods living 60-180 s, load-watcher's one-minute collection) the filter estimated
nodes at 91-128 % CPU while the whole cluster used 69 %, and let 77 of 138 pods through
only as "every candidate over its threshold".
A departure counts in a window that starts at ``since`` when the pod was placed at or
before ``since`` (so the reading holds it) and left after ``since``; a pod placed and
gone within the window was never in the reading and is simply forgotten.

Per-node totals are kept up to date on every change, and placements leave the
"recent" totals through a time-ordered heap as the window moves on, so a
request costs the same whether the ledger holds ten placements or ten thousand.

Memory is bounded whatever the load source does: ``prune`` drops placements
older than the horizon (by then they are in the measurement, or the data is too
old to be used at all, see ``nodestate``) and compacts the heap, which otherwise
keeps an entry per placement for as long as the window does not move; and a hard
cap evicts the oldest placements first.

What one caller can make the ledger believe is bounded too: a placement never counts
more than its node's allocatable (``size_of``), and ``prune`` can drop assumptions the
watch never confirmed long before the horizon (``unconfirmed_before``).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Mapping

import msgspec

from .model import NodeInfo, PodLoad, Usage

__all__ = [
    "HORIZON_SECONDS",
    "MAX_ENTRIES",
    "REPORT_INTERVAL_SECONDS",
    "Ledger",
    "NodeTotals",
    "Pending",
    "Placement",
    "capped",
]

# Trimaran's metricsAgentReportingIntervalSeconds: a pod placed less than this
# before the window end is assumed not to be in the measurement yet. The longest
# a source says (LoadSnapshot.settle_seconds), so the ledger's horizon covers it.
REPORT_INTERVAL_SECONDS = 60.0
# Trimaran's cacheCleanupIntervalMinutes: the longest staleness a source has.
HORIZON_SECONDS = 300.0
# The hard cap. At 10 placements a second and a 660 s horizon (the default
# max_stale_seconds plus the report interval) the ledger holds 6,600; the cap is
# for a source or a watch gone wrong, and costs some 20 MB when reached.
MAX_ENTRIES = 50_000


def capped(load: PodLoad, info: NodeInfo | None) -> PodLoad:
    """``load`` with each figure at most the node's allocatable (a figure the node does
    not report, 0, caps nothing). A pod cannot use more than its node has, however large
    its limits: an estimate from a 1 TiB limit would otherwise count as 1 TiB."""
    if info is None:
        return load
    cpu, memory = info.cpu_allocatable_millis, info.memory_allocatable_bytes
    usage, request = load.usage, load.request
    if (  # the usual case, every figure within the node
        usage.cpu_millis <= cpu
        and request.cpu_millis <= cpu
        and load.tlp_cpu_millis <= cpu
        and usage.memory_bytes <= memory
        and request.memory_bytes <= memory
    ) or not (cpu or memory):
        return load

    def cap(usage: Usage) -> Usage:
        c = min(usage.cpu_millis, cpu) if cpu else usage.cpu_millis
        m = min(usage.memory_bytes, memory) if memory else usage.memory_bytes
        return usage if c == usage.cpu_millis and m == usage.memory_bytes else Usage(c, m)

    usage, request = cap(load.usage), cap(load.request)
    tlp = min(load.tlp_cpu_millis, cpu) if cpu else load.tlp_cpu_millis
    if usage is load.usage and request is load.request and tlp == load.tlp_cpu_millis:
        return load
    return PodLoad(usage, request, tlp)


class Placement(msgspec.Struct, frozen=True):
    """One pod on one node, counted as ``load`` from ``at``; or, with ``left``, a pod that
    left its node at ``at`` after being placed there at ``placed_at`` (-inf: before
    anything the ledger holds), counted as minus ``load`` in a window that starts in
    between."""

    node: str
    load: PodLoad
    at: float
    confirmed: bool
    seq: int = 0
    left: bool = False
    placed_at: float = -math.inf
    placed: float = -math.inf
    """A departure's pod's placement time (-inf: unknown), also when ``placed_at`` is
    -inf because the ledger counts departures partly held (``Ledger.partial_departures``)."""

    def in_window(self, since: float) -> bool:
        """Whether it counts in the totals of a window starting at ``since``."""
        if self.left:
            return self.placed_at <= since < self.at
        return self.at > since


class Pending:
    """Running totals of placements on one node: ``pods`` placed, less the use of the
    ``departed`` ones (so the figures can be negative: a node that lost more than it
    gained since its reading)."""

    __slots__ = (
        "cpu_millis",
        "departed",
        "memory_bytes",
        "pods",
        "request_cpu_millis",
        "request_memory_bytes",
        "tlp_cpu_millis",
    )

    def __init__(self, usage: Usage | None = None, tlp_cpu_millis: float = 0.0, pods: int = 0):
        self.cpu_millis = usage.cpu_millis if usage else 0.0
        self.memory_bytes = usage.memory_bytes if usage else 0.0
        self.request_cpu_millis = self.cpu_millis
        self.request_memory_bytes = self.memory_bytes
        self.tlp_cpu_millis = tlp_cpu_millis
        self.pods = pods
        self.departed = 0

    @property
    def usage(self) -> Usage:
        return Usage(self.cpu_millis, self.memory_bytes)

    @property
    def request(self) -> Usage:
        """The same pods at the filter's figure (``PodLoad.request``)."""
        return Usage(self.request_cpu_millis, self.request_memory_bytes)

    @property
    def empty(self) -> bool:
        return self.pods <= 0 and self.departed <= 0

    def add(self, p: Placement, sign: int) -> None:
        if p.left:
            self.departed += sign
            sign = -sign  # its use comes off
        else:
            self.pods += sign
        if self.empty:  # exact zero, no float drift left behind
            self.pods = self.departed = 0
            self.cpu_millis = self.memory_bytes = self.tlp_cpu_millis = 0.0
            self.request_cpu_millis = self.request_memory_bytes = 0.0
            return
        load = p.load
        usage, request = load.usage, load.request
        self.cpu_millis += sign * usage.cpu_millis
        self.memory_bytes += sign * usage.memory_bytes
        self.request_cpu_millis += sign * request.cpu_millis
        self.request_memory_bytes += sign * request.memory_bytes
        self.tlp_cpu_millis += sign * load.tlp_cpu_millis

    def __repr__(self) -> str:
        return (
            f"Pending(pods={self.pods}, departed={self.departed}, {self.usage}, "
            f"tlp={self.tlp_cpu_millis})"
        )


class NodeTotals(dict[str, Pending]):
    """Per node, its pending totals; with ``changes``, the nodes whose totals changed, in
    order, so a reader that saw this very object at ``seen()`` reads only the nodes changed
    since (``since``) instead of every node's totals, which the fast path compared on each
    request (in-process, 2,000 pods on 500 nodes with 230 listed, filter and prioritize:
    about 200 -> 165 us a pod)."""

    __slots__ = ("changes", "dropped")

    # Past this many, the older half of the log is dropped; a reader behind it compares
    # all the totals again (and so does a reader of a new NodeTotals object).
    LOG_MAX = 4096

    def __init__(self) -> None:
        super().__init__()
        self.changes: list[str] = []
        self.dropped = 0

    def seen(self) -> int:
        """How many changes were logged so far."""
        return self.dropped + len(self.changes)

    def since(self, seen: int) -> list[str] | None:
        """The nodes changed after ``seen`` (maybe repeated), or None if forgotten."""
        if seen < self.dropped:
            return None
        return self.changes[seen - self.dropped :]

    def log(self, node: str) -> None:
        changes = self.changes
        changes.append(node)
        if len(changes) > self.LOG_MAX:
            half = len(changes) // 2
            del changes[:half]
            self.dropped += half


class _Totals:
    def __init__(self) -> None:
        self.by_node = NodeTotals()

    def add(self, p: Placement, sign: int) -> None:
        entry = self.by_node.get(p.node)
        if entry is None:
            if sign < 0:
                return
            entry = self.by_node[p.node] = Pending()
        entry.add(p, sign)
        if entry.empty:
            del self.by_node[p.node]
        self.by_node.log(p.node)


class Ledger:
    def __init__(
        self,
        horizon: float = HORIZON_SECONDS,
        max_entries: int = MAX_ENTRIES,
        *,
        size_of: Callable[[str], NodeInfo | None] | None = None,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.size_of = size_of
        """node -> its size, or None when unknown: every placement is ``capped`` at it.
        The extender sets it (it holds the sizes: the watch's, or the requests')."""
        # insertion order = order of the last change, so the first key is the oldest
        self._placements: dict[str, Placement] = {}
        self._horizon = horizon
        self._max_entries = max_entries
        self._seq = itertools.count(1)
        self._all = _Totals()
        self._unconfirmed = _Totals()
        self._recent = _Totals()  # entries with in_window(self._cut)
        self._cut = -math.inf
        self._heap: list[tuple[float, int, str]] = []  # (at, seq, key) of entries in _recent
        # (placed_at, seq, key) of departures the window has not reached yet
        self._waiting: list[tuple[float, int, str]] = []
        self.partial_departures = False
        """Count a departure in every window that starts before it left, even one that
        starts after its pod was placed, for a caller that scales it to the part of the
        window its pod ran in (``inflight.held_share``). A reading that saw the pod for part
        of its window holds that part of its use: forgetting such a departure left it on its
        node. In steady_sim's steady-mix (seed 4) a node that lost four pods placed within
        the window read 76 % CPU while it really used 52 %."""

    def __len__(self) -> int:
        return len(self._placements)

    @property
    def horizon(self) -> float:
        return self._horizon

    @property
    def heap_size(self) -> int:
        """Entries in the time-ordered heaps, live or not (exported on /metrics)."""
        return len(self._heap) + len(self._waiting)

    # -- changes ------------------------------------------------------------------

    def _put(self, key: str, node: str, load: PodLoad, at: float, confirmed: bool) -> None:
        self._remove(key)
        if self.size_of is not None:
            load = capped(load, self.size_of(node))
        p = Placement(node, load, at, confirmed, next(self._seq))
        self._placements[key] = p
        self._all.add(p, +1)
        if not confirmed:
            self._unconfirmed.add(p, +1)
        self._enter(key, p)
        self._cap()

    def _enter(self, key: str, p: Placement) -> None:
        """Count ``p`` in the recent totals if the window holds it, and schedule the
        moves the window's advance makes: leaving at ``at``, a departure entering at
        ``placed_at``."""
        cut = self._cut
        if p.in_window(cut):
            self._recent.add(p, +1)
            heapq.heappush(self._heap, (p.at, p.seq, key))
        elif p.left and p.placed_at > cut:
            heapq.heappush(self._waiting, (p.placed_at, p.seq, key))

    def _cap(self) -> None:
        while len(self._placements) > self._max_entries:
            self._remove(next(iter(self._placements)))

    def _remove(self, key: str) -> None:
        p = self._placements.pop(key, None)
        if p is None:
            return
        if not p.left:  # a departure is only ever in the recent totals
            self._all.add(p, -1)
        if not p.confirmed:
            self._unconfirmed.add(p, -1)
        if p.in_window(self._cut):
            self._recent.add(p, -1)  # its heap entry is now stale and will be skipped

    def assume(self, pod_key: str, node: str, load: PodLoad, at: float) -> None:
        current = self._placements.get(pod_key)
        if current is not None and current.confirmed:
            return
        self._put(pod_key, node, load, at, False)

    def bind(self, pod_key: str, node: str, load: PodLoad, at: float) -> None:
        current = self._placements.get(pod_key)
        if current is not None and current.confirmed and current.node == node:
            return
        if current is not None and current.node == node:
            at = min(at, current.at)  # keep the earlier time: the pod was there already
        self._put(pod_key, node, load, at, True)

    def forget(self, pod_key: str) -> None:
        self._remove(pod_key)

    def started(self, pod_key: str, at: float) -> None:
        """The pod counts from ``at`` on, as if placed then (never earlier than it does):
        its containers began running then, after its binding (a reading between the two
        holds none of it, and the window that covers it is the one after its start), or it
        is still waiting to start when a reading's window has passed its placement
        (``InFlight.sync``)."""
        current = self._placements.get(pod_key)
        if current is None or current.left or not at > current.at:
            return
        self._put(pod_key, current.node, current.load, at, current.confirmed)

    def placement(self, pod_key: str) -> Placement | None:
        """Where and since when ``pod_key`` counts, if it does."""
        return self._placements.get(pod_key)

    def placed_after(self, since: float) -> list[tuple[str, Placement]]:
        """The pods (not departures) the window starting at ``since`` still counts."""
        return [(k, p) for k, p in self._placements.items() if not p.left and p.at > since]

    def departed_after(self, since: float) -> list[tuple[str, Placement]]:
        """The departures the window starting at ``since`` counts (placed at or before it,
        gone after it), by their ledger key."""
        return [(k, p) for k, p in self._placements.items() if p.left and p.in_window(since)]

    def recount(self, key: str, load: PodLoad) -> bool:
        """Count the placement or departure ``key`` as ``load`` from now on (its node,
        times and confirmation kept): what it is known to use, or what the reading holds
        of it, has changed (``inflight``). False when the ledger holds no such entry."""
        current = self._placements.get(key)
        if current is None:
            return False
        if self.size_of is not None:
            load = capped(load, self.size_of(current.node))
        if load == current.load:
            return True
        if not current.left:
            self._put(key, current.node, load, current.at, current.confirmed)
            return True
        self._remove(key)
        p = msgspec.structs.replace(current, load=load, seq=next(self._seq))
        self._placements[key] = p
        self._enter(key, p)
        return True

    def depart(self, pod_key: str, node: str, load: PodLoad, at: float) -> None:
        """The pod left ``node`` at ``at``: its placement is forgotten, and its ``load``
        comes off the node in any window its placement is before and its leaving after
        (a placement the ledger no longer holds is older than any window it serves)."""
        current = self._placements.get(pod_key)
        placed_at = -math.inf
        if current is not None and current.node == node:
            placed_at = current.at
        self._remove(pod_key)
        if placed_at >= at:
            return  # never in a reading that it left after
        if self.size_of is not None:
            load = capped(load, self.size_of(node))
        seq = next(self._seq)
        window_from = -math.inf if self.partial_departures else placed_at
        p = Placement(node, load, at, True, seq, left=True, placed_at=window_from, placed=placed_at)
        key = f"\x00{seq}"  # pod keys are "namespace/name": never a NUL
        self._placements[key] = p
        self._enter(key, p)
        self._cap()

    def prune(self, now: float, *, unconfirmed_before: float | None = None) -> None:
        """Drop placements older than the horizon, assumptions (never confirmed by
        ``bind``) made before ``unconfirmed_before`` if given, and the heap's dead entries."""
        cutoff = now - self._horizon
        guess = cutoff if unconfirmed_before is None else max(cutoff, unconfirmed_before)
        old = [
            k
            for k, p in self._placements.items()
            if p.at < cutoff or (not p.confirmed and p.at < guess)
        ]
        for key in old:
            self._remove(key)
        if len(self._heap) + len(self._waiting) > 2 * len(self._placements) + 64:
            self._heap = self._live(self._heap)
            self._waiting = self._live(self._waiting)

    def _live(self, heap: list[tuple[float, int, str]]) -> list[tuple[float, int, str]]:
        placements = self._placements
        kept = [
            (at, seq, key)
            for at, seq, key in heap
            if (p := placements.get(key)) is not None and p.seq == seq
        ]
        heapq.heapify(kept)
        return kept

    # -- reads ----------------------------------------------------------------------

    def _advance(self, since: float) -> None:
        if since < self._cut:
            # The window moved back (a source restarted): rebuild from scratch.
            self._cut = since
            self._recent = _Totals()
            self._heap = []
            self._waiting = []
            for key, p in self._placements.items():
                if p.in_window(since):
                    self._recent.add(p, +1)
                    self._heap.append((p.at, p.seq, key))
                elif p.left and p.placed_at > since:
                    self._waiting.append((p.placed_at, p.seq, key))
            heapq.heapify(self._heap)
            heapq.heapify(self._waiting)
            return
        self._cut = since
        heap, waiting = self._heap, self._waiting
        # departures whose pod the window now starts after: in, unless gone by then too
        # (which the loop below would take out again)
        while waiting and waiting[0][0] <= since:
            _, seq, key = heapq.heappop(waiting)
            gone = self._placements.get(key)
            if gone is not None and gone.seq == seq and gone.at > since:
                self._recent.add(gone, +1)
                heapq.heappush(heap, (gone.at, seq, key))
        while heap and heap[0][0] <= since:
            _, seq, key = heapq.heappop(heap)
            placed = self._placements.get(key)
            if placed is not None and placed.seq == seq:
                self._recent.add(placed, -1)

    def recent(self, since: float) -> NodeTotals:
        """Per node, placements made after ``since``, less the departures of pods placed
        at or before it: the same object, updated in place, until the window moves back
        (a source restarted)."""
        self._advance(since)
        return self._recent.by_node

    def unconfirmed(self) -> Mapping[str, Pending]:
        """Per node, placements only assumed, not yet seen by the watch."""
        return self._unconfirmed.by_node

    def everything(self) -> Mapping[str, Pending]:
        return self._all.by_node

    def pending(
        self, since: float | None = None, *, unconfirmed_only: bool = False
    ) -> Mapping[str, Pending]:
        """Convenience for tests and callers that want one view by arguments."""
        if unconfirmed_only:
            return self.unconfirmed()
        return self.everything() if since is None else self.recent(since)
