"""The extender's own watch of nodes and pods (with a kubeconfig).

Two ``Reflector`` loops (list, watch, relist on 410, back off on failure) run in
daemon threads; every change is handed to the event loop with
``call_soon_threadsafe``, so all state is read and written on the loop thread and
the request path never takes a lock. Where each pod went is reported to a
``PlacementSink`` (the ledger) given at construction.

The pod watch also carries pods not yet bound, for one reason: ordering. A ReplicaSet
replaces a deleted pod within milliseconds, and the scheduler, whose own watch delivered
the deletion before the replacement, asks about the replacement at once; the extender's
watch is a second stream that may not have delivered the deletion yet, and then scores
the replacement against a node still holding the pod that left. A watch delivers one
resource's events in the order they happened, so once it has delivered the pod being
scheduled it has delivered every deletion before it: ``caught_up`` waits (briefly) for
that. Seen in the placement benchmark's generated clusters (gen-1710, at 58778e9): two of
six replacements of a 1.7-core workload were scored while their predecessor still
counted, and both went beside a sibling, taking the node to 100 % CPU.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, TypeVar

import msgspec

from .estimate import EstimatorArgs, TLPArgs, pod_load
from .exceptions import QuantityError
from .inflight import InFlight, Tracked
from .model import NodeInfo, PodLoad, Usage, usable_node_info
from .nodestate import ClusterFacts
from .reflector import ListWatchClient, Reflector
from .wire import Node, Pod, timestamp
from .workloads import owner_key, workload_key

__all__ = [
    "POD_SELECTOR",
    "ClusterView",
    "ClusterWatch",
    "PlacementSink",
    "latest",
    "scheduled_at",
    "started_at",
]

log = logging.getLogger("loadwise.extender.cluster")

T = TypeVar("T", Node, Pod)

# Pods that hold resources on a node or are waiting for one: not finished. Unbound pods
# only mark how far the watch has got (``ClusterWatch.caught_up``).
POD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
# The most unbound pods remembered (oldest forgotten first): a backlog that large already
# has its pods seen long before the scheduler reaches them.
MAX_UNBOUND = 100_000


class PlacementSink(Protocol):
    """Where the watch reports pods bound to nodes and pods gone (``Ledger`` is one)."""

    def bind(self, pod_key: str, node: str, load: PodLoad, at: float) -> None: ...

    def forget(self, pod_key: str) -> None: ...

    def depart(self, pod_key: str, node: str, load: PodLoad, at: float) -> None: ...

    def started(self, pod_key: str, at: float) -> None: ...


class ClusterView(Protocol):
    """What the extender reads from a cluster watch, on the event loop's thread."""

    @property
    def nodes(self) -> Mapping[str, NodeInfo]: ...

    @property
    def synced(self) -> bool: ...

    @property
    def last_error(self) -> str | None: ...

    def facts(self) -> ClusterFacts: ...

    def start(self, loop: asyncio.AbstractEventLoop) -> None: ...

    def stop(self) -> None: ...

    async def caught_up(self, pod: Pod, timeout: float) -> bool: ...


_node = msgspec.json.Decoder(Node)
_pod = msgspec.json.Decoder(Pod)


def latest(at: float | None) -> float | None:
    """The latest instant a status time ``at`` can stand for: the API server writes them to
    the second (metav1.Time, RFC 3339 without a fraction), so a container started at
    17.08 reads 17, and the pod is taken to have started by 18. A reading's own time
    (metrics-server's NodeMetrics ``timestamp``, to the second as well) is taken at its
    earliest, so a pod counts as held by a reading only when it surely ran at its sample:
    taken at 17, a pod started 17.08 was counted as held by a sample taken at 17.0, and
    left out of its node's figure until the next reading (the steady simulator's
    strong-weak with estimates that match use: the 48th pod went to a 2-core node seen 10
    points of memory short of what it held, 83.6 % in 3 of 5 runs; the test on estimates
    that match use in tests/extender/test_steady_sim.py). A time with a fraction is taken
    as written."""
    if at is None or not math.isfinite(at) or at != math.floor(at):
        return at
    return at + 1.0


def scheduled_at(pod: Pod) -> float | None:
    for condition in (pod.status.conditions if pod.status else None) or ():
        if condition.type == "PodScheduled" and condition.status == "True":
            return latest(timestamp(condition.lastTransitionTime))
    return None


def started_at(pod: Pod) -> float | None:
    """When a bound pod's use began, as far as its status says: ``math.inf`` while it is
    ``Pending`` (its images pulling, its init containers running: none of its containers
    uses anything a reading could hold), once ``Running`` the latest ``startedAt`` of its
    running containers, and None where the status says neither (no status, no running
    container, a finished pod).

    A pod's use starts when its containers do, not when it is bound: on a real kubelet
    1-3 s later without an image to pull, minutes later with a large one, and later still
    on a busy node (the lab's kwok nodes mark a pod running when their controller gets to
    it). A reading taken in between holds none of it."""
    status = pod.status
    if status is None:
        return None
    if status.phase == "Pending":
        return math.inf
    if status.phase != "Running":
        return None
    starts = [
        timestamp(c.state.running.startedAt)
        for c in status.containerStatuses or ()
        if c.state is not None and c.state.running is not None
    ]
    known = [t for t in starts if t is not None]
    return latest(max(known)) if known else None


class ClusterWatch:
    def __init__(
        self,
        api: ListWatchClient,
        *,
        estimator: EstimatorArgs,
        tlp: TLPArgs,
        placements: PlacementSink,
        watch_timeout: int = 300,
        inflight: InFlight | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._api = api
        self._inflight = inflight
        """Per-pod use, learned estimates and the pods per controller (``inflight``):
        a bound pod counts its workload's learned use, and leaves at its measured use."""
        self._clock = clock
        self._estimator = estimator
        self._tlp = tlp
        self._placements = placements
        self._watch_timeout = watch_timeout
        self.nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, tuple[str, PodLoad]] = {}
        # The same pods by node, and the nodes whose totals changed since the last facts():
        # a pod event re-adds one node's pods, not the cluster's. (The full sum over 2,000
        # pods, redone after every binding, was 17 % of the extender's busy samples in a
        # 500-node backlog, py-spy, 2026-11-27: the Event's reason reads it per request.)
        self._by_node: dict[str, dict[str, PodLoad]] = {}
        self._dirty: set[str] = set()
        self._facts: ClusterFacts | None = None
        # Pods seen unbound (insertion-ordered: the oldest go first past MAX_UNBOUND), and
        # request handlers waiting for a pod's first event (``caught_up``).
        self._unbound: dict[str, None] = {}
        self._awaited: dict[str, asyncio.Future[None]] = {}
        self.nodes_synced = False
        self.pods_synced = False
        self.last_error: str | None = None
        self.on_bound: Callable[[], None] | None = None
        """Called for each pod the watch sees bound (loadwise_extender_pods_bound_total)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()

    # -- read side (loop thread) ------------------------------------------------

    @property
    def synced(self) -> bool:
        return self.nodes_synced and self.pods_synced

    def facts(self) -> ClusterFacts:
        """Pods, estimated use and TLP CPU per node. A new object after any change (callers
        may hold the last one), its totals copied and only the changed nodes' added anew."""
        if self._facts is not None and not self._dirty:
            return self._facts
        if self._facts is None:
            counts: dict[str, int] = {}
            usage: dict[str, Usage] = {}
            tlp: dict[str, float] = {}
            nodes: Iterable[str] = list(self._by_node)
        else:
            counts = dict(self._facts.pod_counts)
            usage = dict(self._facts.pod_usage)
            tlp = dict(self._facts.pod_tlp_cpu)
            nodes = self._dirty
        for node in nodes:
            pods = self._by_node.get(node)
            if not pods:
                counts.pop(node, None)
                usage.pop(node, None)
                tlp.pop(node, None)
                continue
            total, cpu = Usage(), 0.0
            for load in pods.values():
                total = total + load.usage
                cpu += load.tlp_cpu_millis
            counts[node], usage[node], tlp[node] = len(pods), total, cpu
        self._dirty.clear()
        self._facts = ClusterFacts(counts, usage, tlp)
        return self._facts

    async def caught_up(self, pod: Pod, timeout: float) -> bool:
        """Wait until the pod watch has delivered ``pod`` (so every change before its
        creation, deletions of the pods it replaces included), at most ``timeout`` seconds.
        True when it has; False at once when the pod carries no uid (not from an API
        server) or the watch is not synced, and after ``timeout`` otherwise."""
        key = pod.metadata.uid
        if not key or not self.pods_synced:
            return False
        if key in self._unbound or key in self._pods:
            return True
        waiter = self._awaited.get(key)
        if waiter is None:
            waiter = self._awaited[key] = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            return False
        finally:
            if waiter.done() or self._awaited.get(key) is waiter:
                self._awaited.pop(key, None)
        return True

    def _seen(self, key: str) -> None:
        waiter = self._awaited.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- write side (applied on the loop thread) --------------------------------

    def _set_nodes(self, nodes: list[Node]) -> None:
        infos = {n.metadata.name: usable_node_info(n) for n in nodes}
        self.nodes = {name: info for name, info in infos.items() if info is not None}
        self.nodes_synced = True

    def _node_event(self, kind: str, node: Node) -> None:
        info = None if kind == "DELETED" else usable_node_info(node)
        if info is None:  # gone, or of unusable size: unknown (logged)
            self.nodes.pop(node.metadata.name, None)
        else:
            self.nodes[node.metadata.name] = info

    def _set_pods(self, pods: list[Pod]) -> None:
        gone = set(self._pods)
        self._unbound.clear()
        for pod in pods:
            gone.discard(pod.key)
            self._pod_event("ADDED", pod)
        for key in gone:
            self._pod_event_deleted(key)
        self.pods_synced = True

    def _pod_event_deleted(self, key: str) -> None:
        known = self._pods.pop(key, None)
        if known is None:
            self._placements.forget(key)  # an assumption the watch never confirmed
            if self._inflight is not None:
                self._inflight.untrack(key)
            return
        node, load = known
        self._off_node(key, node)
        if self._inflight is not None and self._inflight.pending(key):
            # never started: no reading holds any of it, so nothing comes off
            self._inflight.untrack(key)
            self._placements.forget(key)
            return
        # Seen now (a watch event arrives within a second or so of the change; after a
        # relist, the time of the list): the load source's reading may predate it.
        now = self._clock()
        if self._inflight is not None:
            # what it was last measured using comes off, not its estimate: a departed pod
            # that used 4x its request would otherwise leave 3/4 of its use behind
            load = self._inflight.departure(key, load, now)
        self._placements.depart(key, node, load, now)

    def _off_node(self, key: str, node: str) -> None:
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(key, None)
            if not pods:
                del self._by_node[node]
        self._dirty.add(node)

    def _pod_event(self, kind: str, pod: Pod) -> None:
        key = pod.key
        self._seen(key)
        if kind == "DELETED" or pod.metadata.deletionTimestamp:
            # Leaving: a pod whose deletion was asked for stops within its grace period,
            # and its ReplicaSet has already created the replacement that will be scored
            # against this node (the scheduler's spreading, too, counts terminating pods
            # as gone).
            self._unbound.pop(key, None)
            self._pod_event_deleted(key)
            return
        if not pod.spec.nodeName:
            if key not in self._unbound:
                self._unbound[key] = None
                if len(self._unbound) > MAX_UNBOUND:
                    del self._unbound[next(iter(self._unbound))]
            return
        self._unbound.pop(key, None)
        known = self._pods.get(key)
        if known is not None and known[0] == pod.spec.nodeName:
            self._started(key, started_at(pod))
            return
        try:
            load = pod_load(pod, self._estimator, self._tlp)
        except QuantityError as exc:
            # Not on the request path, so no 400 to give: leave this pod out rather
            # than abort the whole list (the watch would then never report synced).
            log.warning("pod %s left out of the node totals: %s", key, exc)
            return
        if known is not None:  # bound to another node than the one recorded
            self._off_node(key, known[0])
        # the end of PodScheduled's second (``latest``), but no later than now: the watch
        # has seen the binding, so it happened by then
        now = self._clock()
        at = min(scheduled_at(pod) or now, now)
        load = self._track(key, pod, load, at)
        self._pods[key] = (pod.spec.nodeName, load)
        self._by_node.setdefault(pod.spec.nodeName, {})[key] = load
        self._dirty.add(pod.spec.nodeName)
        self._placements.bind(key, pod.spec.nodeName, load, at)
        self._started(key, started_at(pod))

    def _started(self, key: str, at: float | None) -> None:
        """The bound pod ``key``'s use began at ``at`` (``started_at``; inf: not yet): the
        ledger counts it from then, and a reading taken before then holds none of it."""
        if at is None:
            return
        # a start in the future is a node's clock or a bad status, not a start yet to come:
        # taken as is, the pod would count whole, and stay in the ledger, until then
        at = min(at, self._clock()) if math.isfinite(at) else at
        if self._inflight is not None:
            self._inflight.started(key, at)
        if math.isfinite(at):
            self._placements.started(key, at)

    def _track(self, key: str, pod: Pod, load: PodLoad, at: float) -> PodLoad:
        """The load a bound pod counts (its workload's learned use when measured lately,
        else ``load``), and the pod tracked for delta accounting and spreading."""
        inflight = self._inflight
        if inflight is None:
            return load
        workload = workload_key(pod)
        load, how = inflight.bound(load, workload, self._clock())
        meta = pod.metadata
        name = f"{meta.namespace}/{meta.name}"
        inflight.track(
            key, Tracked(name, pod.spec.nodeName, workload, owner_key(pod), load, how, True, at)
        )
        return load

    def _listed_nodes(self, nodes: list[Node]) -> None:
        self.last_error = None
        self._set_nodes(nodes)

    def _listed_pods(self, pods: list[Pod]) -> None:
        self.last_error = None
        self._set_pods(pods)

    def _lost(self, what: str) -> None:
        """A list or watch of ``what`` failed: not synced until it lists again (the
        reflector lists after every failure), so /readyz says so meanwhile."""
        if what == "nodes":
            self.nodes_synced = False
        else:
            self.pods_synced = False

    # -- threads ----------------------------------------------------------------

    def _post(self, fn: Callable[..., None], *args: object) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            # The loop closed under a watch still in flight (the process is stopping and the
            # thread is a daemon): nothing is left to apply the result to.
            if not self._loop.is_closed():
                raise

    def _reflector(self, what: str) -> Reflector:
        def failed(exc: Exception, delay: float) -> None:
            self.last_error = f"{what}: {exc}"
            self._post(self._lost, what)  # in order with the lists and events posted before
            log.warning("watching %s failed: %s; listing again in %.0fs", what, exc, delay)

        if what == "nodes":
            return self._reflect(
                "/api/v1/nodes", "", _node, self._listed_nodes, self._node_event, failed
            )
        return self._reflect(
            "/api/v1/pods", POD_SELECTOR, _pod, self._listed_pods, self._pod_watched, failed
        )

    def _pod_watched(self, kind: str, pod: Pod) -> None:
        # A pod the watch shows on a node (not a list) that it added so or saw unbound before
        # has just been bound (a pod left out of the totals counts once, not at every update).
        if (
            self.on_bound is not None
            and kind != "DELETED"
            and pod.spec.nodeName
            and not pod.metadata.deletionTimestamp
            and (kind == "ADDED" or pod.key in self._unbound)
            and pod.key not in self._pods
        ):
            self.on_bound()
        self._pod_event(kind, pod)

    def _reflect(
        self,
        path: str,
        selector: str,
        decoder: msgspec.json.Decoder[T],
        listed: Callable[[list[T]], None],
        changed: Callable[[str, T], None],
        failed: Callable[[Exception, float], None],
    ) -> Reflector:
        """A reflector that decodes in its own thread and applies on the loop's."""

        def apply(kind: str, obj: T) -> None:
            self.last_error = None  # the watch is back (it may have resumed without a list)
            changed(kind, obj)

        return Reflector(
            self._api,
            path,
            field_selector=selector,
            on_list=lambda items: self._post(listed, [decoder.decode(raw) for raw in items]),
            on_event=lambda kind, raw: self._post(apply, kind, decoder.decode(raw)),
            on_error=failed,
            stop=self._stop,
            watch_timeout=self._watch_timeout,
        )

    def _run(self, what: str) -> None:
        # A thread's top level: the reflector handles what a list/watch can raise; a
        # bug below it must not silently end the watch for the life of the process,
        # so it is logged with its traceback and the loop started again.
        while not self._stop.is_set():
            try:
                self._reflector(what).run()
            except Exception as exc:
                self.last_error = f"{what}: {type(exc).__name__}: {exc}"
                self._post(self._lost, what)
                log.exception("watching %s crashed; restarting in 30s", what)
                self._stop.wait(30.0)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        for what in ("nodes", "pods"):
            threading.Thread(
                target=self._run, args=(what,), name=f"watch-{what}", daemon=True
            ).start()

    def stop(self) -> None:
        self._stop.set()
