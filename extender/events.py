"""The Event the extender records on each pod it scored: why it went where it went.

Contract (docs/contracts.md): reason ``LoadwiseScored``, a human message, and
the machine-readable decision as JSON in the ``loadwise.dev/decision``
annotation, which the TUI reads.

kube-scheduler calls filter and prioritize separately (and skips prioritize when
one node is left), so a pod's two halves are merged for a short moment before
the Event is sent. Sending happens off the request path, rate-limited, and a
failure to send is only counted.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

import msgspec

from .exceptions import KubeError
from .tasks import cancel

__all__ = [
    "ANNOTATION",
    "LISTED",
    "MAX_PENDING",
    "REASON",
    "Decision",
    "EventRecorder",
    "Scored",
    "build_event",
    "encode_decision",
    "format_message",
    "parse_decision",
    "with_candidates",
]

REASON = "LoadwiseScored"
ANNOTATION = "loadwise.dev/decision"
COMPONENT = "loadwise-extender"
MAX_MESSAGE = 1024  # the API server truncates longer Event messages
LISTED = 16  # nodes listed in the decision besides the favourite and the bound node
MAX_PENDING = 512  # pods waiting to be recorded; more are dropped and counted. Each holds
# its scored nodes (about 7 words per node: ~30 MB at 1000 nodes when full), far more than
# the default rate limit (events.per_minute: 60, as a burst of 60) lets through.

log = logging.getLogger("loadwise.extender.events")


class Decision(msgspec.Struct, kw_only=True):
    """The decision annotation's JSON (also what :func:`parse_decision` returns).
    Format version 2 (docs/contracts.md): every key but ``policy`` and ``source``
    is optional for readers."""

    policy: str
    source: str
    stale: bool = False
    scores: dict[str, int] = msgspec.field(default_factory=dict)
    """node -> 0..10 priority: the LISTED best, the favourite and the bound node."""
    use: dict[str, list[int | None]] = msgspec.field(default_factory=dict)
    """node -> [cpu, memory] percent of allocatable after placement (None: no data)."""
    estimated: list[str] = msgspec.field(default_factory=list)
    omitted: int = 0
    failed: dict[str, str] = msgspec.field(default_factory=dict)
    best: str | None = None
    why: str = ""
    tied: list[str] | None = None
    bound: str | None = None
    thresholds: dict[str, dict[str, float]] = msgspec.field(default_factory=dict)
    """node -> {"cpu": percent, "memory": percent}: the filter's thresholds for the listed
    candidates whose own (node annotation or label) differ from the configured default."""
    let_through: dict[str, str] = msgspec.field(default_factory=dict)
    """node -> why it is over its threshold, for nodes the filter passed all the same:
    every such node for an ``exempt`` pod, else the least loaded when all were over."""
    exempt: str | None = None
    """Why the load filter never rejects this pod (a DaemonSet pod, ...), else absent."""
    observe: bool = False
    """Observe-only mode: nothing was applied; ``failed`` and ``scores`` are what the
    extender would have answered (it passed every node and gave equal priorities)."""
    scored_lowest: bool = False
    """Prioritize-only (``filter.enabled: false``): the nodes in ``failed`` were not
    rejected but given the lowest priority."""

    @property
    def all_over(self) -> bool:
        """The filter found every candidate over its threshold and let the least loaded
        through (not for an exempt pod, which passes anyway)."""
        return bool(self.let_through) and self.exempt is None


@dataclass(frozen=True, slots=True)
class Scored:
    """Every node one prioritize call scored, kept until the Event is written so
    the node the pod is finally bound to can be listed with its own figures."""

    names: Sequence[str]
    priorities: Sequence[int]
    """0..10, what the scheduler was told."""
    fine: Sequence[int]
    """The ranking behind the priorities (highest first, then name): 0..100, least-used's
    below 0 for a node over capacity or without data."""
    figures: Callable[[int], tuple[int | None, int | None, bool]]
    """index -> (cpu %, memory % after placement, estimated?), from the scored sums."""


def _listed(scored: Scored, extra: Sequence[str | None]) -> list[int]:
    names, fine = scored.names, scored.fine
    top = heapq.nsmallest(LISTED, range(len(names)), key=lambda i: (-fine[i], names[i]))
    chosen = set(top)
    wanted = {n for n in extra if n is not None and n not in {names[i] for i in top}}
    if wanted:
        top.extend(i for i, n in enumerate(names) if n in wanted and i not in chosen)
    return top


def with_candidates(decision: Decision, scored: Scored) -> Decision:
    """``decision`` with the listed nodes' scores, figures and the tie filled in
    from ``scored`` (the favourite ``best`` and the ``bound`` node always listed)."""
    listed = _listed(scored, (decision.best, decision.bound))
    names, priorities = scored.names, scored.priorities
    scores: dict[str, int] = {}
    use: dict[str, list[int | None]] = {}
    estimated: list[str] = []
    for i in listed:
        cpu, memory, guessed = scored.figures(i)
        scores[names[i]] = priorities[i]
        use[names[i]] = [cpu, memory]
        if guessed:
            estimated.append(names[i])
    tied = None
    if priorities:
        top = max(priorities)
        equal = [n for n, p in zip(names, priorities, strict=True) if p == top]
        tied = equal if len(equal) > 1 else None
    return msgspec.structs.replace(
        decision,
        scores=scores,
        use=use,
        estimated=estimated,
        omitted=len(set(names)) - len(scores),
        tied=tied,
    )


def _figures(decision: Decision, node: str) -> str:
    parts = [str(decision.scores[node])] if node in decision.scores else []
    cpu, memory = (decision.use.get(node) or [None, None])[:2]
    if cpu is not None:
        parts.append(f"cpu {cpu}%")
    if memory is not None:
        parts.append(f"mem {memory}%")
    return f" ({'; '.join(parts)})" if parts else ""


def _placement(decision: Decision) -> str:
    """Where the pod went, said from that node, and why when not the favourite."""
    bound, best = decision.bound, decision.best
    assert bound is not None
    if best is None:  # only the filter ran (one node left): the scheduler had no choice
        return f"bound to {bound}{_figures(decision, bound)}"
    if decision.observe:
        why = f": {decision.why}" if decision.why else ""
        return (
            f"bound to {bound}{_figures(decision, bound)}; "
            f"would have preferred {best}{_figures(decision, best)}{why}"
        )
    if bound == best:
        why = f": {decision.why}" if decision.why else ""
        return f"bound to {bound}{_figures(decision, bound)}, the favourite{why}"
    if decision.tied and bound in decision.tied:
        reason = "tie at the top priority, the scheduler picks at random"
    elif bound not in decision.scores:
        reason = "not scored by loadwise"
    else:
        reason = "the scheduler's own plugin scores outweighed loadwise's"
    return (
        f"scheduler chose {bound}{_figures(decision, bound)} over favourite "
        f"{best}{_figures(decision, best)}: {reason}"
    )


def _reasons(reasons: Mapping[str, str], top: int) -> str:
    listed = sorted(reasons.items())
    shown = "; ".join(f"{n}: {r}" for n, r in listed[:top])
    return shown + (f" (+{len(listed) - top} more)" if len(listed) > top else "")


def _let_through(decision: Decision, top: int) -> str:
    nodes = _reasons(decision.let_through, top)
    if decision.exempt is not None:
        return f"passed over its threshold: {nodes}"
    if decision.observe:
        return (
            f"every candidate over its threshold: would have let through the least loaded {nodes}"
        )
    return f"every candidate over its threshold: let through the least loaded {nodes}"


def format_message(decision: Decision, top: int = 5) -> str:
    parts = []
    observe = decision.observe
    if observe:
        parts.append("observe-only, nothing applied")
    if decision.exempt is not None:
        parts.append(f"{decision.exempt}: never rejected for load")
    elif decision.let_through:  # the Warning's point comes first
        parts.append(_let_through(decision, top))
    if decision.bound:
        parts.append(_placement(decision))
    if decision.scores:
        ranked = sorted(decision.scores.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = " ".join(f"{n}={s}" for n, s in ranked[:top])
        hidden = len(ranked) - top + decision.omitted
        more = f" (+{hidden} more)" if hidden > 0 else ""
        parts.append(f"{'would have scored' if observe else 'scores'} {shown}{more}")
    if decision.best and not decision.bound:
        best = "would have preferred" if observe else "best"
        parts.append(
            f"{best} {decision.best}: {decision.why}" if decision.why else f"{best} {decision.best}"
        )
    if decision.failed:
        verb = (
            "would have rejected"
            if observe
            else "scored lowest"
            if decision.scored_lowest
            else "filtered"
        )
        parts.append(f"{verb} {_reasons(decision.failed, top)}")
    if decision.let_through and decision.exempt is not None:
        parts.append(_let_through(decision, top))
    if decision.stale:
        parts.append("load data stale, estimates used")
    message = "; ".join(parts) or "no nodes"
    return message[: MAX_MESSAGE - 3] + "..." if len(message) > MAX_MESSAGE else message


def parse_decision(annotation: str | bytes) -> Decision:
    """Decode the annotation; raises msgspec errors on malformed input."""
    return msgspec.json.decode(annotation, type=Decision)


# Keys left out of the annotation while they hold their default (readers of format
# version 2 before them see the same JSON as before).
_OPTIONAL: dict[str, object] = {
    "tied": None,
    "bound": None,
    "thresholds": {},
    "let_through": {},
    "exempt": None,
}


def encode_decision(decision: Decision) -> str:
    """The annotation's JSON; ``tied``, ``bound``, ``thresholds``, ``let_through``,
    ``exempt`` and ``observe`` are left out when unset."""
    data = msgspec.to_builtins(decision)
    for key, unset in _OPTIONAL.items():
        if data.get(key) == unset:
            data.pop(key, None)
    if not data.get("observe"):
        data.pop("observe", None)
    return msgspec.json.encode(data).decode()


def _named(decision: Decision) -> Decision:
    """``decision`` with ``thresholds`` kept for the nodes it names (listed, failed, let
    through, favourite, bound): the rest are nodes nobody reads about in it."""
    if not decision.thresholds:
        return decision
    named = {*decision.scores, *decision.failed, *decision.let_through}
    named.update(n for n in (decision.best, decision.bound) if n is not None)
    kept = {n: t for n, t in decision.thresholds.items() if n in named}
    return msgspec.structs.replace(decision, thresholds=kept)


def _now_rfc3339(now: float) -> str:
    return datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_event(
    pod_name: str, namespace: str, uid: str, decision: Decision, *, now: float, instance: str
) -> dict[str, object]:
    stamp = _now_rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{pod_name}.loadwise-",
            "namespace": namespace,
            "annotations": {ANNOTATION: encode_decision(decision)},
        },
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod_name,
            "namespace": namespace,
            "uid": uid,
        },
        "reason": REASON,
        "message": format_message(decision),
        # A Warning when load left no candidate under its threshold (observe mode: nothing
        # happened, so Normal): `kubectl get events --field-selector type=Warning` shows it.
        "type": "Warning" if decision.all_over and not decision.observe else "Normal",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


@dataclass
class _Pending:
    name: str
    namespace: str
    uid: str
    decision: Decision
    due: float = field(default=0.0)
    """When the filter and prioritize halves are merged (the Event may go)."""
    latest: float = field(default=0.0)
    """The longest it waits for the pod's binding (with a watch); = due without."""
    scored: Scored | None = None


class EventRecorder:
    """Merges filter and prioritize per pod, then posts one Event, rate-limited.

    ``post`` is a blocking callable (namespace, event dict) run in a thread; it
    raises ``KubeError`` when the API refuses (counted as an "error" outcome).
    With ``bind_wait_seconds`` (set when the extender watches pods) an Event waits
    up to that long after the merge for :meth:`placed` to say where the pod was
    bound, and then names that node (``bound``); a pod the watch has not seen bound
    by then gets no Event ("unbound"): the request may have named a pod that does not
    exist, and only what the cluster confirms is written into it. At most
    ``max_pending`` pods wait; notes about further pods are dropped and counted ("dropped").
    """

    def __init__(
        self,
        post: Callable[[str, Mapping[str, object]], object],
        *,
        per_minute: int,
        merge_seconds: float = 0.5,
        bind_wait_seconds: float = 0.0,
        max_pending: int = MAX_PENDING,
        on_result: Callable[[str], None] | None = None,
    ) -> None:
        self._post = post
        self._rate = per_minute / 60.0
        self._tokens = float(per_minute)
        self._capacity = float(per_minute)
        self._last = time.monotonic()
        self.merge_seconds = merge_seconds
        self.bind_wait_seconds = bind_wait_seconds
        self.max_pending = max_pending
        self._pending: dict[str, _Pending] = {}
        self._on_result = on_result or (lambda outcome: None)
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        # (when, order, key): when each pending pod may go. A pod's time only ever moves
        # earlier (its binding seen: ``placed``), so a later item for it is stale, and a
        # popped item is checked against the pod's entry. Scanning every pending pod (up
        # to 512) on each request instead took 1.56 s of the extender's 15.6 s of CPU
        # through a 2,000-pod backlog on 500 nodes (yappi, CPU clock).
        self._due: list[tuple[float, int, str]] = []
        self._order = 0
        self._next = float("inf")
        """When ``_run`` next wakes by itself; an earlier time must wake it."""
        self._instance = socket.gethostname()

    def __len__(self) -> int:
        """Pods waiting to be recorded (the ``events_pending`` gauge)."""
        return len(self._pending)

    def wants(self, key: str) -> bool:
        """Whether a note about ``key`` would be kept (the pod is waiting already, or
        there is room). A caller that builds a costly note asks first, and calls
        :meth:`drop` instead when not: in a backlog of thousands of pods the recorder,
        sending 60 Events a minute by default, is full for most of them."""
        return key in self._pending or len(self._pending) < self.max_pending

    def drop(self) -> None:
        """Count a note not taken (what :meth:`note` does when full)."""
        self._on_result("dropped")

    def note(
        self,
        key: str,
        name: str,
        namespace: str,
        uid: str,
        update: Callable[[Decision], Decision],
        base: Decision,
        scored: Scored | None = None,
    ) -> None:
        entry = self._pending.get(key)
        if entry is None:
            if len(self._pending) >= self.max_pending:
                self.drop()
                return
            due = time.monotonic() + self.merge_seconds
            entry = _Pending(name, namespace, uid, base, due, due + self.bind_wait_seconds)
            self._pending[key] = entry
            self._schedule(key, entry.latest)
        entry.decision = update(entry.decision)
        if scored is not None:
            entry.scored = scored

    def placed(self, pod_key: str, node: str) -> None:
        """The watch saw ``pod_key`` bound to ``node``: its Event may go once merged."""
        entry = self._pending.get(pod_key)
        if entry is not None and entry.decision.bound != node:
            entry.decision = msgspec.structs.replace(entry.decision, bound=node)
            entry.latest = entry.due
            self._schedule(pod_key, entry.due)

    def _schedule(self, key: str, when: float) -> None:
        self._order += 1
        heapq.heappush(self._due, (when, self._order, key))
        if when < self._next:
            self._wake.set()

    def _ready(self, entry: _Pending, now: float) -> bool:
        return now >= entry.latest or (now >= entry.due and entry.decision.bound is not None)

    def _take_token(self) -> bool:
        now = time.monotonic()
        self._tokens = min(self._capacity, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    async def _send(self, entry: _Pending) -> None:
        if not entry.uid and not entry.name:
            return
        if self.bind_wait_seconds > 0 and entry.decision.bound is None:
            self._on_result("unbound")
            return
        if not self._take_token():
            self._on_result("rate_limited")
            return
        decision = entry.decision
        if entry.scored is not None:
            decision = with_candidates(decision, entry.scored)
        decision = _named(decision)
        event = build_event(
            entry.name,
            entry.namespace,
            entry.uid,
            decision,
            now=time.time(),
            instance=self._instance,
        )
        try:
            await asyncio.to_thread(self._post, entry.namespace, event)
        except KubeError as exc:
            log.warning("could not record Event for %s/%s: %s", entry.namespace, entry.name, exc)
            self._on_result("error")
            return
        self._on_result("sent")

    async def _run(self) -> None:
        due = self._due
        while True:
            now = time.monotonic()
            while due and due[0][0] <= now:
                key = heapq.heappop(due)[2]
                entry = self._pending.get(key)
                if entry is not None and self._ready(entry, now):
                    del self._pending[key]
                    await self._send(entry)
            self._wake.clear()
            self._next = due[0][0] if due else time.monotonic() + 3600.0
            wait = self._next - time.monotonic()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=max(0.01, wait))
            except asyncio.TimeoutError:
                pass

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="events")

    async def stop(self) -> None:
        await cancel(self._task)
        self._task = None
        for entry in list(self._pending.values()):
            await self._send(entry)
        self._pending.clear()
        self._due.clear()
        self._next = float("inf")
