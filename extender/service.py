"""The extender's state and its two answers.

``Extender`` holds the load refresher, the ledger, the optional cluster watch and
event recorder (all built by ``wiring.build_extender``), and turns an
ExtenderArgs into a filter or prioritize answer by calling the pure functions in
``nodestate``, ``decide`` and ``policies``. Nothing here does I/O on the request path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

import msgspec

from .cluster import ClusterView
from .config import Settings
from .decide import best, filter_nodes, prioritize, to_priorities
from .estimate import PodFacts, pod_facts
from .events import Decision, EventRecorder
from .fastpath import LeastUsedFastPath
from .ledger import HORIZON_SECONDS, REPORT_INTERVAL_SECONDS, Ledger
from .metrics import Metrics
from .model import NodeInfo, NodeState
from .nodestate import build_states
from .policies import MAX_SCORE, Policy, make_policy, to_extender_priority
from .sources import LoadSource, Refresher
from .wire import (
    ExtenderArgs,
    FilterResult,
    HostPriority,
    Node,
    NodeListOut,
    PrioritizeArgs,
    decode_node,
)

__all__ = ["NEUTRAL_PRIORITY", "SEEN_NODES_MAX", "SIZES_UNKNOWN", "Extender", "ledger_horizon"]

log = logging.getLogger("loadwise.extender")

NEUTRAL_PRIORITY = to_extender_priority(MAX_SCORE // 2)

# Node sizes learnt from full-Node requests, at most this many (Kubernetes
# supports clusters of up to 5,000 nodes, "Considerations for large clusters");
# beyond it the longest-unrefreshed entry goes, so deleted nodes cannot pile up.
SEEN_NODES_MAX = 10_000

SIZES_UNKNOWN = (
    "node sizes unknown: the scheduler sends node names only (nodeCacheCapable: true) "
    "and there is no kubeconfig to watch Nodes; pods placed since the last measurement "
    "are counted per node but cannot be sized; give --kubeconfig or set "
    "nodeCacheCapable: false"
)


def ledger_horizon(settings: Settings) -> float:
    """How long the ledger keeps a placement: while a stale snapshot is still
    read (max_stale), every placement since its window must be counted."""
    return max(HORIZON_SECONDS, settings.source.max_stale + REPORT_INTERVAL_SECONDS)


class Extender:
    def __init__(
        self,
        settings: Settings,
        source: LoadSource,
        *,
        metrics: Metrics | None = None,
        ledger: Ledger | None = None,
        cluster: ClusterView | None = None,
        recorder: EventRecorder | None = None,
        clock: Callable[[], float] = time.time,
        use_fast_path: bool = True,
    ) -> None:
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.policy: Policy = make_policy(settings.policy, settings.policy_args)
        self.fast_path = LeastUsedFastPath.for_policy(self.policy) if use_fast_path else None
        """least-used's arithmetic per snapshot (see ``fastpath``); None: general path only."""
        self.thresholds = dict(settings.filter.thresholds) if settings.filter.enabled else {}
        self.estimator = settings.estimator_args()
        self.tlp = settings.tlp_args()
        self.ledger = ledger if ledger is not None else Ledger(horizon=ledger_horizon(settings))
        self.cluster = cluster  # the node/pod watch, when a kubeconfig was given
        self.recorder = recorder
        self.clock = clock
        interval = (
            min(settings.source.refresh_seconds, 1.0)
            if source.name == "file"
            else (settings.source.refresh_seconds)
        )
        self.refresher = Refresher(
            source,
            interval=interval,
            stale_after=settings.source.stale_after_seconds,
            max_stale=settings.source.max_stale,
            on_error=lambda _msg: self.metrics.source_errors.inc(),
        )
        self._scored = self.metrics.decisions.labels("prioritize", "scored")
        self._seen: dict[str, NodeInfo] = {}
        self._seen_rv: dict[str, str] = {}
        self.sizes_unknown = False
        """Set when a names-only request named nodes whose size nobody knows."""
        self._prune_task: asyncio.Task[None] | None = None

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        if self.cluster is not None:
            self.cluster.start(asyncio.get_running_loop())
        self.refresher.start()
        if self.recorder is not None:
            self.recorder.start()
        self._prune_task = asyncio.create_task(self._housekeeping(), name="housekeeping")

    async def stop(self) -> None:
        if self._prune_task is not None:
            self._prune_task.cancel()
        if self.cluster is not None:
            self.cluster.stop()
        await self.refresher.stop()
        if self.recorder is not None:
            await self.recorder.stop()

    async def _housekeeping(self) -> None:
        while True:
            self.housekeep()
            await asyncio.sleep(5)

    def housekeep(self) -> None:
        """Drop what is too old to matter (the ledger bounds itself) and export sizes."""
        self.ledger.prune(self.clock())
        self.update_gauges()

    def update_gauges(self) -> None:
        age = self.refresher.age(self.clock())
        self.metrics.load_age.set(-1 if age is None else age)
        self.metrics.load_stale.set(0 if self.refresher.fresh(self.clock()) else 1)
        snap = self.refresher.snapshot
        self.metrics.nodes_with_load.set(len(snap.nodes) if snap else 0)
        self.metrics.pending_placements.set(len(self.ledger))
        self.metrics.ledger_entries.set(len(self.ledger))
        self.metrics.ledger_heap_entries.set(self.ledger.heap_size)
        self.metrics.node_cache_entries.set(len(self._seen))
        self.metrics.sizes_unknown.set(1 if self.sizes_unknown else 0)
        if self.cluster is not None:
            self.metrics.watched_nodes.set(len(self.cluster.nodes))

    def readiness(self) -> tuple[bool, str]:
        now = self.clock()
        snap = self.refresher.snapshot
        problems = []
        if snap is None:
            why = self.refresher.last_error or "no reading yet"
            problems.append(f"no load snapshot from {self.refresher.source.name}: {why}")
        elif not self.refresher.fresh(now):
            problems.append(
                f"load data from {snap.source} is stale: {self.refresher.age(now):.0f}s old "
                f"> {self.refresher.stale_after:.0f}s"
                + (
                    f" (last error: {self.refresher.last_error})"
                    if self.refresher.last_error
                    else ""
                )
            )
        if self.cluster is not None and not self.cluster.synced:
            err = self.cluster.last_error
            problems.append("node/pod watch not synced" + (f": {err}" if err else ""))
        if problems:
            return False, "; ".join(problems)
        assert snap is not None
        # Still ready (scheduling works, the herding protection only counts pods),
        # but said where the operator looks.
        warning = f"; warning: {SIZES_UNKNOWN}" if self.sizes_unknown else ""
        return (
            True,
            f"ok: {len(snap.nodes)} nodes from {snap.source}, {self.refresher.age(now):.0f}s old"
            + warning,
        )

    @property
    def seen_nodes(self) -> Mapping[str, NodeInfo]:
        """Node sizes learnt from full-Node requests (nodeCacheCapable: false)."""
        return self._seen

    # -- the answers ----------------------------------------------------------------

    def _info(self, node: Node) -> NodeInfo:
        """NodeInfo for a Node object, reused while its resourceVersion is unchanged."""
        meta = node.metadata
        cached = self._seen.get(meta.name)
        if (
            cached is not None
            and meta.resourceVersion
            and self._seen_rv.get(meta.name) == meta.resourceVersion
        ):
            return cached
        info = NodeInfo.from_node(node)
        seen, seen_rv = self._seen, self._seen_rv
        seen.pop(meta.name, None)  # re-inserted last: the dict's order is by last refresh
        seen[meta.name] = info
        seen_rv[meta.name] = meta.resourceVersion
        while len(seen) > SEEN_NODES_MAX:
            oldest = next(iter(seen))
            del seen[oldest]
            seen_rv.pop(oldest, None)
        return info

    def _infos(self, args: ExtenderArgs | PrioritizeArgs) -> tuple[list[str], dict[str, NodeInfo]]:
        if args.nodes is not None and args.nodes.items is not None:
            names = []
            infos: dict[str, NodeInfo] = {}
            for item in args.nodes.items:
                node = item if isinstance(item, Node) else decode_node(item)
                info = self._info(node)
                names.append(info.name)
                infos[info.name] = info
            return names, infos
        names = list(args.node_names or [])
        known = self.cluster.nodes if self.cluster is not None else {}
        found: dict[str, NodeInfo] = {}
        for name in names:
            seen = known.get(name) or self._seen.get(name)
            if seen is not None:
                found[name] = seen
        if self.cluster is None and len(found) < len(names) and not self.sizes_unknown:
            self.sizes_unknown = True
            log.warning("%s", SIZES_UNKNOWN)
        return names, found

    def _states(
        self, names: list[str], infos: Mapping[str, NodeInfo]
    ) -> tuple[list[NodeState], bool]:
        now = self.clock()
        fresh = self.refresher.fresh(now)
        facts = self.cluster.facts() if self.cluster is not None else None
        states = build_states(
            names,
            infos,
            self.refresher.snapshot,
            fresh=fresh,
            usable=self.refresher.usable(now),
            ledger=self.ledger,
            cluster=facts,
        )
        return states, not fresh

    def _decision(self, stale: bool) -> Decision:
        snap = self.refresher.snapshot
        return Decision(
            policy=self.policy.name,
            source=snap.source if snap else self.refresher.source.name,
            stale=stale,
        )

    def _facts(self, args: ExtenderArgs | PrioritizeArgs) -> PodFacts:
        assert args.pod is not None
        return pod_facts(args.pod, self.estimator, self.tlp)

    def filter(self, args: ExtenderArgs) -> FilterResult:
        pod = self._facts(args)
        names, infos = self._infos(args)
        states, stale = self._states(names, infos)
        outcome = filter_nodes(pod, states, self.thresholds)
        self.metrics.decisions.labels("filter", "passed").inc(len(outcome.passed))
        self.metrics.decisions.labels("filter", "failed").inc(len(outcome.failed))
        if self.recorder is not None and args.pod is not None:
            meta = args.pod.metadata
            failed = dict(outcome.failed)

            def update(d: Decision) -> Decision:
                return msgspec.structs.replace(d, failed={**d.failed, **failed})

            self.recorder.note(
                pod.key, meta.name, meta.namespace, meta.uid, update, self._decision(stale)
            )
        if len(outcome.passed) == 1:
            # kube-scheduler skips prioritize when one node is left: it goes there.
            self.ledger.assume(
                pod.key, outcome.passed[0], pod.usage, pod.tlp_cpu_millis, self.clock()
            )
        passed = set(outcome.passed)
        if args.nodes is not None and args.nodes.items is not None:
            # Answer with the very Node objects we were given (names are in item order).
            items = [
                raw for raw, name in zip(args.nodes.items, names, strict=True) if name in passed
            ]
            return FilterResult(
                nodes=NodeListOut(items=items), failed_and_unresolvable=outcome.failed
            )
        kept = [name for name in names if name in passed]
        # Unresolvable: preemption cannot lower measured load (docs/contracts.md).
        return FilterResult(node_names=kept, failed_and_unresolvable=outcome.failed)

    def prioritize(self, args: ExtenderArgs | PrioritizeArgs) -> list[HostPriority]:
        pod = self._facts(args)
        now = self.clock()
        snap = self.refresher.snapshot
        fresh = snap is not None and self.refresher.fresh(now)
        scores = None
        # (the policy may have been swapped since, in tests)
        fast = self.fast_path if self.fast_path and self.fast_path.policy is self.policy else None
        recent = None
        if fast is not None and fresh:
            assert snap is not None
            recent = self.ledger.recent(snap.window_end - REPORT_INTERVAL_SECONDS)
        cache_capable = args.node_names is not None and args.nodes is None
        if fast is not None and recent is not None and cache_capable:
            # Look sizes up where the watch keeps them, without copying them per request.
            assert snap is not None and args.node_names is not None
            names = args.node_names
            infos = self.cluster.nodes if self.cluster is not None else self._seen
            scores = fast.scores(pod, names, infos, snap, recent)
        if scores is None:
            names, infos = self._infos(args)
            if fast is not None and recent is not None and not cache_capable:
                assert snap is not None
                scores = fast.scores(pod, names, infos, snap, recent)
        if scores is None:
            states, stale = self._states(names, infos)
            ranked = prioritize(pod, states, self.policy)
            priorities = [r.priority for r in ranked]
            winner = best(ranked)
            win, why = (winner.node, winner.detail.why) if winner else (None, "")
        else:
            stale = False
            # the tie-break reads the same ledger counts the scores did (see to_priorities)
            assert recent is not None
            placed = recent

            def pending(name: str) -> int:
                p = placed.get(name)
                return p.pods if p is not None else 0

            priorities, index = to_priorities(names, scores, pending)
            win = names[index] if index is not None else None
            why = ""
            if win is not None and self.recorder is not None:
                state = self._states([win], infos)[0][0]
                why = self.policy.score(pod, state, True).why
        self._scored.inc(len(names))
        if win is not None:
            # Herding protection: count the pod on the node we favoured until the
            # watch (if any) says where it really went, or the metrics show it.
            # The favourite is the only node at the top priority (to_priorities),
            # so with otherwise equal scores the scheduler picks it, not a random one.
            self.ledger.assume(pod.key, win, pod.usage, pod.tlp_cpu_millis, now)
        if self.recorder is not None:
            self._note_scores(args, pod, dict(zip(names, priorities, strict=True)), win, why, stale)
        return [HostPriority(n, p) for n, p in zip(names, priorities, strict=True)]

    def _note_scores(
        self,
        args: ExtenderArgs | PrioritizeArgs,
        pod: PodFacts,
        scores: dict[str, int],
        winner: str | None,
        why: str,
        stale: bool,
    ) -> None:
        assert self.recorder is not None and args.pod is not None
        meta = args.pod.metadata

        def update(d: Decision) -> Decision:
            return msgspec.structs.replace(d, scores=scores, best=winner, why=why, stale=stale)

        self.recorder.note(
            pod.key, meta.name, meta.namespace, meta.uid, update, self._decision(stale)
        )

    # -- fail-open answers ------------------------------------------------------------

    def fallback_filter(self, args: ExtenderArgs) -> FilterResult:
        if args.nodes is not None and args.nodes.items is not None:
            return FilterResult(nodes=NodeListOut(items=list(args.nodes.items)))
        return FilterResult(node_names=list(args.node_names or []))

    def fallback_prioritize(self, args: ExtenderArgs | PrioritizeArgs) -> list[HostPriority]:
        if args.nodes is not None and args.nodes.items is not None:
            names = [
                (n if isinstance(n, Node) else decode_node(n)).metadata.name
                for n in args.nodes.items
            ]
        else:
            names = list(args.node_names or [])
        return [HostPriority(name, NEUTRAL_PRIORITY) for name in names]
