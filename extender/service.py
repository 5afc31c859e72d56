"""The extender's state and its two answers.

``Extender`` holds the load refresher, the ledger, the optional cluster watch and
event recorder, the parsed policy and the fast path (all built once by
``wiring.build_extender``), and turns an ExtenderArgs into a filter or prioritize
answer by calling the pure functions in ``nodestate``, ``decide`` and ``policies``.
Nothing here does I/O on the request path.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from typing import NamedTuple

import msgspec
from prometheus_client import CollectorRegistry, Counter

from .churn import without_churn
from .cluster import ClusterView
from .config import Settings
from .decide import FilterOutcome, Ranked, best, filter_nodes, prioritize, scorer
from .decisionlog import DecisionLog, DecisionSink, decision_record, reading_ages
from .estimate import EstimatorArgs, PodFacts, TLPArgs, demand_after, go_round, pod_facts
from .events import Decision, EventRecorder, Scored
from .exemptions import exemption, ignored
from .fastpath import FastAnswer, LeastUsedFastPath
from .inflight import InFlight, Tracked
from .ledger import HORIZON_SECONDS, REPORT_INTERVAL_SECONDS, Ledger, Pending
from .metrics import Metrics
from .model import LoadSnapshot, NodeInfo, NodeState
from .nodesizes import SEEN_NODES_MAX, NodeSizes
from .nodestate import build_states
from .podusage import PodUsageStore
from .policies import MAX_SCORE, Policy, to_extender_priority
from .policies.least_used import raised_note
from .readings import describe, validated
from .sources import LoadSource, Refresher, SourceError
from .sources.pod_metrics import PodUsageSource
from .sources.watcher import WATCHER_WINDOW_SECONDS
from .tasks import cancel
from .wire import (
    ExtenderArgs,
    FilterResult,
    HostPriority,
    Node,
    NodeListOut,
    Pod,
    PrioritizeArgs,
    decode_node,
    encode,
)
from .workloads import LearnedUsage, Learner, owner_key, workload_key

__all__ = [
    "NEUTRAL_PRIORITY",
    "SEEN_NODES_MAX",
    "SIZES_UNKNOWN",
    "UNCONFIRMED_SECONDS",
    "Extender",
    "Scoring",
    "build_inflight",
    "build_scoring",
    "ledger_horizon",
]

log = logging.getLogger("loadwise.extender")

NEUTRAL_PRIORITY = to_extender_priority(MAX_SCORE // 2)

_hosts = msgspec.json.Decoder(list[HostPriority])
_shape_encoder = msgspec.json.Encoder()
_SHAPES = 256  # pod resource specs whose facts are kept


class _FastInputs(NamedTuple):
    """What the fast path reads for one request (``Extender._fast_inputs``)."""

    fast: LeastUsedFastPath
    snap: LoadSnapshot
    recent: Mapping[str, Pending]
    names: list[str]
    infos: Mapping[str, NodeInfo]


def _only(
    args: ExtenderArgs | PrioritizeArgs, names: list[str], keep: set[str]
) -> ExtenderArgs | PrioritizeArgs:
    """``args`` with only the candidates in ``keep`` (``names``: every candidate's name, in
    the request's order), as kube-scheduler would send them after a filter call."""
    if args.nodes is not None and args.nodes.items is not None:
        items = [n for n, name in zip(args.nodes.items, names, strict=True) if name in keep]
        return msgspec.structs.replace(args, nodes=msgspec.structs.replace(args.nodes, items=items))
    return msgspec.structs.replace(args, node_names=[n for n in names if n in keep])


def _general_scored(
    pod: PodFacts, states: list[NodeState], ranked: list[Ranked], sigmas: float
) -> Scored:
    """The general path's candidates for the Event: use after placement as
    ``estimate.demand_after`` computes it for every policy (percent of allocatable; the
    measured use ``sigmas`` deviations above its mean, as the filter reads it)."""

    def percent(resource: str, state: NodeState) -> int | None:
        demand = demand_after(resource, pod, state, sigmas=sigmas)
        return None if demand is None else go_round(demand.percent)

    cpu = [percent("cpu", s) for s in states]
    memory = [percent("memory", s) for s in states]
    estimated = [s.estimated for s in states]
    return Scored(
        [r.node for r in ranked],
        [r.priority for r in ranked],
        [r.detail.score for r in ranked],
        lambda i: (cpu[i], memory[i], estimated[i]),
    )


SIZES_UNKNOWN = (
    "node sizes unknown: the scheduler sends node names only (nodeCacheCapable: true) "
    "and there is no kubeconfig to watch Nodes; pods placed since the last measurement "
    "are counted per node but cannot be sized; give --kubeconfig or set "
    "nodeCacheCapable: false"
)


# How long, while the pod watch is synced, a placement the extender only assumed (its
# favourite) counts without the watch confirming the pod bound there. kube-scheduler binds
# right after scoring (the Event waits 3 s for it, wiring.BIND_WAIT_SECONDS); a pod held
# longer (a volume provisioned in PreBind) counts again once the watch sees it bound. An
# assumption nobody confirms is a pod that went nowhere, or a request about a pod that
# does not exist: it must not keep a node looking busy for the ledger's whole horizon.
UNCONFIRMED_SECONDS = 15.0

# The longest a request waits for the pod watch to deliver the pod it is about (so the
# deletions before it too: ``ClusterWatch.caught_up``). A watch event follows its change
# within milliseconds; the scheduler asks about one pod at a time, so a watch that is
# synced yet slower than this costs at most this per pod, and the answer goes out on what
# the watch has delivered so far.
CATCH_UP_SECONDS = 0.5


_ESTIMATOR_METRICS: weakref.WeakKeyDictionary[CollectorRegistry, tuple[Counter, Counter]] = (
    weakref.WeakKeyDictionary()
)


def _estimator_metrics(metrics: Metrics) -> tuple[Counter, Counter]:
    """The estimator's counters on ``metrics``' registry, made once per registry (two
    extenders may share one ``Metrics``, and a registry refuses a name twice)."""
    known = _ESTIMATOR_METRICS.get(metrics.registry)
    if known is None:
        known = (
            Counter(
                "loadwise_extender_estimates_total",
                "Pods estimated, by path: learned from their workload's measured use, implied "
                "by node readings (before its first measurement), or the request rule (a "
                "workload not measured lately).",
                ["path"],
                registry=metrics.registry,
            ),
            Counter(
                "loadwise_extender_pod_usage_errors_total",
                "Failed reads of per-pod use.",
                registry=metrics.registry,
            ),
        )
        _ESTIMATOR_METRICS[metrics.registry] = known
    return known


def build_inflight(settings: Settings) -> InFlight:
    """The per-pod use store and learned estimates ``settings.estimator`` asks for."""
    est = settings.estimator
    learner = Learner(
        LearnedUsage(est.learned_percentile, est.learned_window_seconds, est.learned_max_workloads)
    )
    return InFlight(learner, PodUsageStore(), delta=est.delta, mode=est.mode)


class Scoring(NamedTuple):
    """How pods are weighed and nodes scored, parsed from the settings once."""

    policy: Policy
    estimator: EstimatorArgs
    """How a pod's request becomes its estimated use."""
    tlp: TLPArgs
    """TargetLoadPacking's CPU prediction (Trimaran's defaults under the other policies)."""
    fast_path: LeastUsedFastPath | None
    """least-used's arithmetic per snapshot (see ``fastpath``); None: general path only."""


def build_scoring(settings: Settings, *, fast_path: bool = True) -> Scoring:
    """The scoring parts from validated settings: the policy config validation parsed
    (``Settings.scoring``), and the fast path for it when it has one."""
    choice = settings.scoring
    return Scoring(
        choice.policy,
        settings.estimator_args(),
        choice.tlp,
        LeastUsedFastPath.for_policy(choice.policy) if fast_path else None,
    )


def ledger_horizon(settings: Settings) -> float:
    """How long the ledger keeps a placement: while a stale snapshot is still
    read (max_stale), every placement since its window must be counted; load-watcher's
    averaged windows run up to ``WATCHER_WINDOW_SECONDS``."""
    window = REPORT_INTERVAL_SECONDS
    if settings.source.kind == "load-watcher":
        window = max(window, WATCHER_WINDOW_SECONDS)
    return max(HORIZON_SECONDS, settings.source.max_stale + window)


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
        inflight: InFlight | None = None,
        pod_usage: PodUsageSource | None = None,
        scoring: Scoring | None = None,
    ) -> None:
        """``settings`` validated; every part not given is built from them as
        ``wiring.build_extender`` builds it (``use_fast_path``: only when ``scoring`` is not
        given)."""
        self.settings = settings
        self.metrics = metrics or Metrics()
        parts = scoring if scoring is not None else build_scoring(settings, fast_path=use_fast_path)
        self.policy: Policy = parts.policy
        self.peak_sigmas = settings.estimator.peak_sigmas
        """Deviations above its mean a node's use counts in the filter and the Event's
        figures, under every policy (least-used's scores carry the same, parsed with it)."""
        self.fast_path = parts.fast_path
        """least-used's arithmetic per snapshot (see ``fastpath``); None: general path only."""
        self.estimator = parts.estimator
        self.tlp = parts.tlp
        self.inflight = inflight if inflight is not None else build_inflight(settings)
        """Per-pod use, learned estimates, delta accounting and the pods per controller."""
        self.pod_usage = pod_usage
        """Where per-pod use is read, every ``estimator.pod_usage_seconds``; None: not read."""
        self.decision_log: DecisionSink | None = (
            DecisionLog(log_path) if (log_path := settings.estimator.decision_log) else None
        )
        """Where each decision's predicted node use is appended (``decisionlog``)."""
        self._estimates, self._pod_usage_errors = _estimator_metrics(self.metrics)
        self._pod_usage_task: asyncio.Task[None] | None = None
        self.thresholds: Mapping[str, float] = settings.filter.thresholds
        """The filter's limits: the settings' own mapping, replaced whole, never edited."""
        self.ledger = ledger if ledger is not None else Ledger(horizon=ledger_horizon(settings))
        if self.ledger.size_of is None:
            self.ledger.size_of = self.size_of  # a placement counts at most its node's size
        # the delta accounting (``inflight.sync``) scales each departure to what the reading holds
        self.ledger.partial_departures = self.inflight.delta
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
            on_success=lambda snap: self.metrics.count_invalid(snap.invalid),
        )
        self._scored = self.metrics.decisions.labels("prioritize", "scored")
        self.node_sizes = NodeSizes(SEEN_NODES_MAX)
        """Node sizes learnt from full-Node requests (nodeCacheCapable: false)."""
        self._shapes: dict[bytes, PodFacts] = {}
        self._checked: tuple[LoadSnapshot | None, LoadSnapshot | None] = (None, None)
        # nodes of the checked snapshot with a deviation but no size known when it was
        # checked: once one has a size, the snapshot is checked again (``_snapshot``)
        self._unsized: list[str] = []
        self.sizes_unknown = False
        """Set when a names-only request named nodes whose size nobody knows."""
        self._prune_task: asyncio.Task[None] | None = None

    @property
    def observe(self) -> bool:
        """Observe-only: nothing rejected, equal priorities; the Events say "would have"."""
        return self.settings.mode == "observe"

    async def catch_up(self, pod: Pod | None) -> None:
        """Before deciding about ``pod``: let the pod watch deliver it first (see
        ``CATCH_UP_SECONDS``), counted in loadwise_extender_watch_catch_up_total."""
        if self.cluster is None or pod is None or not pod.metadata.uid:
            return
        if not self.cluster.synced:
            self.metrics.catch_up.labels("not_synced").inc()
            return
        caught = await self.cluster.caught_up(pod, CATCH_UP_SECONDS)
        self.metrics.catch_up.labels("delivered" if caught else "timed_out").inc()

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        if self.cluster is not None:
            self.cluster.start(asyncio.get_running_loop())
        self.refresher.start()
        if self.recorder is not None:
            self.recorder.start()
        self._prune_task = asyncio.create_task(self._housekeeping(), name="housekeeping")
        if self.pod_usage is not None:
            self._pod_usage_task = asyncio.create_task(self._read_pod_usage(), name="pod-usage")

    async def _read_pod_usage(self) -> None:
        """One loop at the configured interval; a failed read keeps the last figures
        (they age: the learned window and the delta's snapshot bound their use)."""
        assert self.pod_usage is not None
        interval = self.settings.estimator.pod_usage_seconds
        while True:
            try:
                reading = await self.pod_usage.fetch()
            except SourceError as exc:
                self._pod_usage_errors.inc()
                log.warning("reading pod use from %s failed: %s", self.pod_usage.name, exc)
            except Exception:  # a bug below must not end the loop for the process's life
                self._pod_usage_errors.inc()
                log.exception("reading pod use from %s crashed", self.pod_usage.name)
            else:
                self.inflight.take(reading)
            await asyncio.sleep(interval)

    async def stop(self) -> None:
        if self._prune_task is not None:
            self._prune_task.cancel()
        if self._pod_usage_task is not None:
            await cancel(self._pod_usage_task)
        if self.pod_usage is not None:
            await self.pod_usage.close()
        if self.cluster is not None:
            self.cluster.stop()
        await self.refresher.stop()
        if self.recorder is not None:
            await self.recorder.stop()
        if self.decision_log is not None:
            self.decision_log.close()

    async def _housekeeping(self) -> None:
        while True:
            self.housekeep()
            await asyncio.sleep(5)

    def housekeep(self) -> None:
        """Drop what is too old to matter (the ledger bounds itself) and export sizes.
        While the pod watch is synced, an assumption it has not confirmed within
        UNCONFIRMED_SECONDS goes too."""
        now = self.clock()
        watching = self.cluster is not None and self.cluster.synced
        self.ledger.prune(now, unconfirmed_before=now - UNCONFIRMED_SECONDS if watching else None)
        self.inflight.expire(now - (UNCONFIRMED_SECONDS if watching else self.ledger.horizon))
        self.inflight.learner.prune(now)
        self.update_gauges()

    def update_gauges(self) -> None:
        age = self.refresher.age(self.clock())
        self.metrics.load_age.set(-1 if age is None else age)
        self.metrics.load_stale.set(0 if self.refresher.fresh(self.clock()) else 1)
        snap = self.refresher.snapshot
        self.metrics.nodes_with_load.set(len(snap.nodes) if snap else 0)
        self.metrics.show_invalid(snap.invalid if snap else {})
        self.metrics.pending_placements.set(len(self.ledger))
        self.metrics.ledger_entries.set(len(self.ledger))
        self.metrics.ledger_heap_entries.set(self.ledger.heap_size)
        self.metrics.node_cache_entries.set(len(self.node_sizes))
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
        if snap.invalid:  # partial data: those nodes are scored as unknown, the rest as usual
            warning += f"; warning: {describe(snap.invalid)}"
        return (
            True,
            f"ok: {len(snap.nodes)} nodes from {snap.source}, {self.refresher.age(now):.0f}s old"
            + warning,
        )

    @property
    def seen_nodes(self) -> Mapping[str, NodeInfo]:
        """Node sizes learnt from full-Node requests (nodeCacheCapable: false)."""
        return self.node_sizes.known

    def size_of(self, node: str) -> NodeInfo | None:
        """The node's size as the watch knows it, else as the last full-Node request said."""
        info = self.cluster.nodes.get(node) if self.cluster is not None else None
        return info if info is not None else self.node_sizes.get(node)

    def _snapshot(self) -> LoadSnapshot | None:
        """The load snapshot as the filter and the scores read it, fast path and general
        path alike: ``readings.validated``, so a figure no source check caught (not finite,
        negative, over capacity) makes its node alone unknown instead of breaking the
        arithmetic for every node. Worked out once per snapshot; the snapshot itself when
        its source checked it already (the usual case)."""
        snap = self.refresher.snapshot
        last_in, last_out = self._checked
        if snap is None or (
            snap is last_in and not any(self.size_of(n) is not None for n in self._unsized)
        ):
            out = None if snap is None else last_out
        else:
            out = validated(snap)
            deviating = [n for n, load in out.nodes.items() if load.cpu.std or load.memory.std]
            if deviating:
                # deviations over a window: less the part the pods' comings and goings
                # made, which the extender counts on its own (``churn``); it needs the
                # node's size, which a request may tell only after this one
                since = out.window_end - out.settle_seconds
                out = without_churn(out, self.inflight.stays(since), self.size_of, self._created)
            self._unsized = [n for n in deviating if self.size_of(n) is None]
            self._checked = (snap, out)
        # what the ledger counts beside this reading, corrected by the pods' measured use
        # (``inflight``): here, so the fast path and the general path read the same
        self.inflight.sync(self.ledger, out, self._created, self._capacity)
        return out

    def _capacity(self, node: str) -> tuple[float, float] | None:
        """``node``'s CPU millicores and memory bytes, where the extender knows its size."""
        info = self.size_of(node)
        if info is None:
            return None
        return float(info.cpu_capacity_millis), float(info.memory_capacity_bytes)

    def _created(self, node: str) -> float | None:
        """When ``node``'s Node object was created, where the extender has seen it."""
        info = self.size_of(node)
        return None if info is None else info.created_at

    # -- the answers ----------------------------------------------------------------

    def _infos(self, args: ExtenderArgs | PrioritizeArgs) -> tuple[list[str], dict[str, NodeInfo]]:
        if args.nodes is not None and args.nodes.items is not None:
            names = []
            infos: dict[str, NodeInfo] = {}
            for item in args.nodes.items:
                node = item if isinstance(item, Node) else decode_node(item)
                info = self.node_sizes.learn(node)
                names.append(node.metadata.name)
                if info is not None:
                    infos[info.name] = info
            return names, infos
        names = list(args.node_names or [])
        known = self.cluster.nodes if self.cluster is not None else {}
        found: dict[str, NodeInfo] = {}
        for name in names:
            seen = known.get(name) or self.node_sizes.get(name)
            if seen is not None:
                found[name] = seen
        if self.cluster is None and len(found) < len(names) and not self.sizes_unknown:
            self.sizes_unknown = True
            log.warning("%s", SIZES_UNKNOWN)
        return names, found

    def _states(
        self, names: list[str], infos: Mapping[str, NodeInfo], owner: str | None = None
    ) -> tuple[list[NodeState], bool]:
        """Every candidate's state; with ``owner`` (the scored pod's controller), each
        holds how many of its pods are there and in all (the spreading term)."""
        now = self.clock()
        fresh = self.refresher.fresh(now)
        facts = self.cluster.facts() if self.cluster is not None else None
        snap = self._snapshot()
        states = build_states(
            names,
            infos,
            snap,
            fresh=fresh,
            usable=self.refresher.usable(now),
            ledger=self.ledger,
            cluster=facts,
        )
        spread = self.inflight.spread(owner)
        if spread:
            total = sum(spread.values())
            states = [
                msgspec.structs.replace(s, same_owner=here, owner_pods=total)
                if (here := spread.get(s.name, 0))
                else msgspec.structs.replace(s, owner_pods=total)
                for s in states
            ]
        return states, not fresh

    def _decision(self, stale: bool) -> Decision:
        snap = self.refresher.snapshot
        return Decision(
            policy=self.policy.name,
            source=snap.source if snap else self.refresher.source.name,
            stale=stale,
            observe=self.observe,
            scored_lowest=not self.settings.filter.enabled,
        )

    def _facts(self, args: ExtenderArgs | PrioritizeArgs) -> PodFacts:
        """The pod's numbers. A burst is many pods of one template, so the parsed
        quantities are kept per resources-spec (what ``pod_facts`` reads)."""
        pod = args.pod
        assert pod is not None
        spec = pod.spec
        shape = _shape_encoder.encode(
            (spec.containers, spec.initContainers, spec.overhead, spec.resources)
        )
        known = self._shapes.get(shape)
        if known is None:
            known = pod_facts(pod, self.estimator, self.tlp)
            if len(self._shapes) >= _SHAPES:
                self._shapes.clear()
            self._shapes[shape] = known
        meta = pod.metadata
        facts = msgspec.structs.replace(
            known, key=pod.key, name=meta.name, namespace=meta.namespace
        )
        facts, how = self.inflight.estimate(facts, workload_key(pod), self.clock())
        self._estimates.labels(how).inc()
        return facts

    def _ignored(self, args: ExtenderArgs | PrioritizeArgs) -> bool:
        assert args.pod is not None
        return ignored(args.pod, self.settings.ignore_namespaces) is not None

    def _assume(self, pod: PodFacts, node: str, now: float, raw: Pod | None = None) -> None:
        """Count ``pod`` on ``node`` until the watch or a measurement says otherwise;
        not when it requests more than the node's allocatable: kube-scheduler's
        NodeResourcesFit filter never lets such a pod through to the extender for that
        node, so the request is not the scheduler's (pkg/scheduler/framework/plugins/
        noderesources/fit.go)."""
        info = self.size_of(node)
        if info is not None and (
            0 < info.cpu_allocatable_millis < pod.cpu_request_millis
            or 0 < info.memory_allocatable_bytes < pod.memory_request_bytes
        ):
            self.metrics.placements_refused.inc()
            return
        load = pod.placed()
        self.ledger.assume(pod.key, node, load, now)
        if raw is not None:
            workload = workload_key(raw)
            self.inflight.track(
                pod.key,
                Tracked(
                    f"{pod.namespace}/{pod.name}",
                    node,
                    workload,
                    owner_key(raw),
                    load,
                    pod.how,
                    False,
                    now,
                ),
            )

    def _judge(
        self, args: ExtenderArgs | PrioritizeArgs, pod: PodFacts, exempt: bool
    ) -> tuple[list[str], FilterOutcome, bool]:
        """The candidates' names (in request order), which are over their thresholds (the
        filter's rules: ``decide.filter_nodes``, or the fast path's equal of it) and whether
        the general path saw stale load."""
        got = self._fast_inputs(args, self.clock())
        if got is not None:
            outcome = got.fast.filter(
                pod, got.names, got.infos, got.snap, got.recent, self.thresholds, exempt=exempt
            )
            if outcome is not None:
                return got.names, outcome, False
        names, infos = self._infos(args)
        states, stale = self._states(names, infos)
        outcome = filter_nodes(
            pod,
            states,
            self.thresholds,
            exempt=exempt,
            sigmas=self.peak_sigmas,
            band=getattr(self.policy, "spread_band", 0),
        )
        return names, outcome, stale

    def _note_judged(
        self,
        args: ExtenderArgs | PrioritizeArgs,
        pod: PodFacts,
        outcome: FilterOutcome,
        exempt: str | None,
        stale: bool,
    ) -> None:
        """Record the verdicts for the pod's Event (which nodes were over, and why)."""
        if not self._records(pod):
            return
        assert self.recorder is not None and args.pod is not None
        meta = args.pod.metadata

        def update(d: Decision) -> Decision:
            return msgspec.structs.replace(
                d,
                failed={**d.failed, **outcome.failed},
                let_through={**d.let_through, **outcome.let_through},
                thresholds={**d.thresholds, **outcome.thresholds},
                exempt=exempt,
            )

        self.recorder.note(
            pod.key, meta.name, meta.namespace, meta.uid, update, self._decision(stale)
        )

    def filter(self, args: ExtenderArgs) -> FilterResult:
        if self._ignored(args):
            self.metrics.decisions.labels("filter", "ignored").inc()
            return self.fallback_filter(args)  # every node, as without the extender
        assert args.pod is not None
        pod = self._facts(args)
        exempt = exemption(args.pod)
        stale = False
        if self.settings.filter.enabled:  # (a node's own thresholds apply even with none set)
            names, outcome, stale = self._judge(args, pod, exempt is not None)
        else:  # no rejections (filter.enabled: false): prioritize scores those nodes lowest
            names = self._infos(args)[0]
            outcome = FilterOutcome(list(names), {})
        if outcome.all_over:
            self.metrics.all_over_threshold.inc()
        # Observe-only: every node passes; the Event says what would have been rejected.
        failed = {} if self.observe else outcome.failed
        passed = set(names) if self.observe else set(outcome.passed)
        self.metrics.decisions.labels("filter", "passed").inc(len(passed))
        self.metrics.decisions.labels("filter", "failed").inc(len(failed))
        if self.observe and outcome.failed:
            self.metrics.decisions.labels("filter", "would_fail").inc(len(outcome.failed))
        self._note_judged(args, pod, outcome, exempt, stale)
        if len(passed) == 1:
            # kube-scheduler skips prioritize when one node is left: it goes there.
            only, now = next(iter(passed)), self.clock()
            if self.decision_log is not None:
                # before the pod is counted there, as a prioritize call's record is
                self._log_decision(pod, args.pod, *self._infos(args), only, now, verb="filter")
            self._assume(pod, only, now, args.pod)
        # Nothing rejected (filter_nodes: every candidate passes): the list as it came,
        # without a membership test per node.
        everyone = not failed
        if args.nodes is not None and args.nodes.items is not None:
            # Answer with the very Node objects we were given (names are in item order).
            items = (
                list(args.nodes.items)
                if everyone
                else [
                    raw for raw, name in zip(args.nodes.items, names, strict=True) if name in passed
                ]
            )
            return FilterResult(nodes=NodeListOut(items=items), failed_and_unresolvable=failed)
        # (outcome.passed is in the candidates' order: FilterOutcome.passed)
        kept = list(names) if everyone else list(outcome.passed)
        # Unresolvable: preemption cannot lower measured load (docs/contracts.md).
        return FilterResult(node_names=kept, failed_and_unresolvable=failed)

    def prioritize(self, args: ExtenderArgs | PrioritizeArgs) -> list[HostPriority]:
        """The answer as objects (for callers in-process); the server sends
        :meth:`prioritize_json`, the same answer already encoded."""
        return _hosts.decode(self.prioritize_json(args))

    def _fast_inputs(self, args: ExtenderArgs | PrioritizeArgs, now: float) -> _FastInputs | None:
        """What the fast path (see ``fastpath``) reads, when it applies, else None."""
        # (the policy may have been swapped since, in tests)
        fast = self.fast_path if self.fast_path and self.fast_path.policy is self.policy else None
        if fast is None or not self.refresher.fresh(now):
            return None
        infos: Mapping[str, NodeInfo]
        if args.node_names is not None and args.nodes is None:
            # Look sizes up where the watch keeps them, without copying them per request.
            names = args.node_names
            infos = self.cluster.nodes if self.cluster is not None else self.node_sizes.known
        else:
            names, infos = self._infos(args)  # first: the snapshot's check reads the sizes
        snap = self._snapshot()
        if snap is None:
            return None
        recent = self.ledger.recent(snap.window_end - snap.settle_seconds)
        return _FastInputs(fast, snap, recent, names, infos)

    def _records(self, pod: PodFacts) -> bool:
        """Whether the recorder takes a note about ``pod`` (else the note is counted as
        dropped here, and not built: its figures, reasons and winner's explanation)."""
        if self.recorder is None:
            return False
        if self.recorder.wants(pod.key):
            return True
        self.recorder.drop()
        return False

    def _fast_answer(
        self, pod: PodFacts, args: ExtenderArgs | PrioritizeArgs, now: float, figures: bool
    ) -> tuple[FastAnswer, list[str], Mapping[str, NodeInfo]] | None:
        """least-used's fast path (see ``fastpath``) when it applies, else None;
        ``figures``: with the nodes' use, for the Event."""
        assert args.pod is not None
        got = self._fast_inputs(args, now)
        if got is None:
            return None
        spread = self.inflight.spread(owner_key(args.pod))
        answer = got.fast.answer(
            pod, got.names, got.infos, got.snap, got.recent, figures=figures, spread=spread
        )
        return None if answer is None else (answer, got.names, got.infos)

    def prioritize_json(self, args: ExtenderArgs | PrioritizeArgs) -> msgspec.Raw:
        if self._ignored(args):
            neutral = self.fallback_prioritize(args)  # equal priorities: no say
            self.metrics.decisions.labels("prioritize", "ignored").inc(len(neutral))
            return msgspec.Raw(encode(neutral))
        assert args.pod is not None
        pod = self._facts(args)
        if self.settings.filter.enabled or self.observe:
            return msgspec.Raw(self._ranked(args, pod))
        # Prioritize-only (the scheduler calls no filter verb): the nodes the filter would
        # reject get the lowest priority instead, and are never the favourite. The others
        # are ranked among themselves, exactly as after a filter call.
        exempt = exemption(args.pod)
        names, outcome, stale = self._judge(args, pod, exempt is not None)
        self._note_judged(args, pod, outcome, exempt, stale)
        if not outcome.failed:
            return msgspec.Raw(self._ranked(args, pod))
        self.metrics.decisions.labels("prioritize", "lowest").inc(len(outcome.failed))
        hosts = _hosts.decode(self._ranked(_only(args, names, set(outcome.passed)), pod))
        if hosts and all(h.score == 0 for h in hosts):
            # one node left at step 0 (to_priorities raises a winner only over rivals):
            # it must stay above the nodes scored lowest
            hosts[0] = HostPriority(hosts[0].host, 1)
        hosts += [HostPriority(name, 0) for name in names if name in outcome.failed]
        return msgspec.Raw(encode(hosts))

    def _ranked(self, args: ExtenderArgs | PrioritizeArgs, pod: PodFacts) -> bytes:
        """Every candidate's 0..10 priority as the answer's JSON; counts the pod on the
        favourite (herding protection) and notes the scores for its Event."""
        assert args.pod is not None
        now = self.clock()
        scored: Scored | None = None
        record = self._records(pod)
        fast = self._fast_answer(pod, args, now, record)
        if fast is not None:
            answer, names, infos = fast
            stale, body = False, answer.body
            win = names[answer.win] if answer.win is not None else None
            why = ""
            if record:
                if win is not None:
                    state = self._states([win], infos, owner_key(args.pod))[0][0]
                    why = scorer(self.policy, answer.soft)(pod, state, True).why
                    if answer.win_raised:
                        why += raised_note(answer.win_raised)
                    why += answer.passed
                scored = self._fast_scored(answer, names)
        else:
            names, infos = self._infos(args)
            states, stale = self._states(names, infos, owner_key(args.pod))
            ranked = prioritize(pod, states, self.policy)
            winner = best(ranked)
            win, why = (winner.node, winner.detail.why) if winner else (None, "")
            body = encode([HostPriority(r.node, r.priority) for r in ranked])
            if record:
                scored = _general_scored(pod, states, ranked, self.peak_sigmas)
        self._scored.inc(len(names))
        if self.observe:
            # Scored and explained, but the scheduler is told nothing: equal priorities.
            body = encode([HostPriority(name, NEUTRAL_PRIORITY) for name in names])
        if self.decision_log is not None:
            self._log_decision(pod, args.pod, names, infos, win, now)
        if win is not None:
            # Herding protection: count the pod on the node we favoured until the
            # watch (if any) says where it really went, or the metrics show it.
            # The favourite is the only node at the top priority (to_priorities),
            # so with otherwise equal scores the scheduler picks it, not a random one.
            # (Observe-only: where it would have gone, so the scores stay what they
            # would be; the watch replaces it with the real binding.)
            self._assume(pod, win, now, args.pod)
            if record:
                why = self._estimates_note(pod, win, why)
        if scored is not None:  # (an exempt pod is scored as any: only its Event says so)
            self._note_scores(args, pod, scored, win, why, stale, exemption(args.pod))
        return body

    def _log_decision(
        self,
        pod: PodFacts,
        raw: Pod,
        names: list[str],
        infos: Mapping[str, NodeInfo],
        win: str | None,
        now: float,
        *,
        verb: str = "prioritize",
    ) -> None:
        """Append the decision's predicted node use to the decision log (``decisionlog``),
        before the pod is counted on the favourite: the prediction the scores read."""
        assert self.decision_log is not None
        states, _ = self._states(names, infos)
        how = pod.how
        mode = self.settings.estimator.mode
        ages = reading_ages(now, self._snapshot(), names)
        record = decision_record(now, pod, how, mode, win, states, ages, verb=verb)
        self.decision_log.write(record)

    def _estimates_note(self, pod: PodFacts, node: str, why: str) -> str:
        """``why`` with the estimates used: the pod's own (learned, implied or request
        rule) and how the pods in flight on ``node`` are counted (learned, implied, delta,
        request rule, not started)."""
        note = f"estimate: {pod.how}"
        snap = self._snapshot()
        if snap is not None:
            since = snap.window_end - snap.settle_seconds
            counts = self.inflight.in_flight(self.ledger, node, since)
            flight = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
            if flight:
                note += f"; in flight there: {flight}"
        return f"{why}; {note}" if why else note

    @staticmethod
    def _fast_scored(answer: FastAnswer, names: list[str]) -> Scored:
        look = answer.figures
        assert look is not None

        def figures(i: int) -> tuple[int | None, int | None, bool]:
            cpu, memory = look(i)
            return cpu, memory, False  # the fast path takes only fresh measurements

        return Scored(names, answer.priorities, answer.fine, figures)

    def _note_scores(
        self,
        args: ExtenderArgs | PrioritizeArgs,
        pod: PodFacts,
        scored: Scored,
        winner: str | None,
        why: str,
        stale: bool,
        exempt: str | None,
    ) -> None:
        assert self.recorder is not None and args.pod is not None
        meta = args.pod.metadata

        def update(d: Decision) -> Decision:
            return msgspec.structs.replace(d, best=winner, why=why, stale=stale, exempt=exempt)

        self.recorder.note(
            pod.key, meta.name, meta.namespace, meta.uid, update, self._decision(stale), scored
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
