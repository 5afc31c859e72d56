"""The TUI's state: a pure, single-threaded model that both sources feed through `apply`.

Nothing here knows about Textual or Kubernetes clients, so the model is unit-tested with
plain values and benchmarked at cluster scale on its own. Per-node request totals are
kept incrementally (a pod change touches one node, not all 10,000 pods), usage history
lives in fixed-size ring buffers, and the placement feed is capped, so memory and the
cost of one change stay bounded however long the TUI runs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from heapq import nlargest

from .objects import Decision, Eviction, NodeInfo, PodInfo, Resources, Usage
from .sources import changes as ch
from .untrusted import clean

__all__ = ["ClusterModel", "FeedItem", "NodeSort", "NodeState", "Placement"]

_EPOCH = datetime.fromtimestamp(0).astimezone()


class NodeSort(Enum):
    """Orders for the nodes table; CPU and memory fall back to requests without metrics."""

    NAME = "name"
    CPU = "cpu"
    MEMORY = "memory"
    PODS = "pods"
    ROLE = "role"


@dataclass(slots=True)
class NodeState:
    """A node plus what the model derived for it (requests, pods, usage, history)."""

    info: NodeInfo
    requests: Resources = Resources()
    limits: Resources = Resources()
    pods: int = 0
    usage: Usage | None = None
    cpu_history: deque[float] = field(default_factory=deque)
    memory_history: deque[float] = field(default_factory=deque)

    @property
    def name(self) -> str:
        return self.info.name

    def cpu_fraction(self, *, requests: bool = False) -> float | None:
        alloc = self.info.allocatable.cpu_m
        if not alloc:
            return None
        if requests:
            return self.requests.cpu_m / alloc
        return None if self.usage is None else self.usage.usage.cpu_m / alloc

    def memory_fraction(self, *, requests: bool = False) -> float | None:
        alloc = self.info.allocatable.memory
        if not alloc:
            return None
        if requests:
            return self.requests.memory / alloc
        return None if self.usage is None else self.usage.usage.memory / alloc


@dataclass(frozen=True, slots=True)
class Placement:
    """A pod seen bound to a node: when, where and by which scheduler."""

    namespace: str
    pod: str
    uid: str
    node: str
    scheduler: str
    at: datetime

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod}"


@dataclass(frozen=True, slots=True)
class FeedItem:
    """One row of the placements feed: a binding (with its decision, if any) or an eviction."""

    at: datetime
    placement: Placement | None = None
    decision: Decision | None = None
    eviction: Eviction | None = None

    @property
    def key(self) -> str:
        if self.placement is not None:
            return f"bound:{self.placement.uid or self.placement.key}"
        assert self.eviction is not None
        return f"evicted:{self.eviction.uid}"


class ClusterModel:
    """Everything the screens show, updated one `Change` at a time.

    `revision` increases on every applied change so views can skip redrawing when
    nothing moved.
    """

    def __init__(
        self,
        *,
        history: int = 40,
        placement_limit: int = 1000,
        eviction_limit: int = 500,
        decision_limit: int = 5000,
    ) -> None:
        self.history = history
        self.placement_limit = placement_limit
        self.eviction_limit = eviction_limit
        self.decision_limit = decision_limit
        self.nodes: dict[str, NodeState] = {}
        self.pods: dict[str, PodInfo] = {}
        self.pods_by_node: dict[str, set[str]] = {}
        self.pod_usage: dict[str, Usage] = {}
        self.placements: dict[str, Placement] = {}
        self.decisions_by_key: dict[str, Decision] = {}
        self.decisions_by_uid: dict[str, Decision] = {}
        self.evictions: dict[str, Eviction] = {}
        self._totals: dict[str, tuple[Resources, Resources, int]] = {}
        # Connectivity and metrics state, rendered as banners and notices.
        self.connected: bool | None = None
        self.unreachable_reason = ""
        self.unreachable_since: datetime | None = None
        self.retry_in = 0.0
        self.last_contact: datetime | None = None
        self.metrics_available: bool | None = None
        self.metrics_reason = ""
        self.metrics_at: datetime | None = None
        # Objects the parsers could not read, per stream: left out of every view.
        self.skipped: dict[str, int] = {}
        self.revision = 0

    # -- applying changes ---------------------------------------------------------------

    def apply(self, change: ch.Change) -> None:
        """Fold one change from a source into the state."""
        self.revision += 1
        match change:
            case ch.NodesListed(nodes):
                self._replace_nodes(nodes)
            case ch.NodeUpserted(node):
                self._upsert_node(node)
            case ch.NodeDeleted(name):
                self.nodes.pop(name, None)
            case ch.PodsListed(pods):
                self._replace_pods(pods)
            case ch.PodUpserted(pod):
                self._upsert_pod(pod)
            case ch.PodDeleted(namespace, name):
                self._delete_pod(f"{namespace}/{name}")
            case ch.EventsSeen(records):
                self._add_records(records)
            case ch.MetricsPolled(at, nodes, pods):
                self._add_metrics(at, nodes, pods)
            case ch.MetricsUnavailable(reason):
                self.metrics_available = False
                # API error texts quote the server's Status message: cluster text too.
                self.metrics_reason = clean(reason)
            case ch.ObjectsSkipped(stream, count):
                if count > 0:
                    self.skipped[stream] = count
                else:
                    self.skipped.pop(stream, None)
            case ch.ApiUnreachable(reason, retry_in, at):
                if self.connected is not False:
                    self.unreachable_since = at
                self.connected = False
                self.unreachable_reason = clean(reason)
                self.retry_in = retry_in
            case ch.ApiReachable(at):
                self.connected = True
                self.unreachable_reason = ""
                self.unreachable_since = None
                self.last_contact = at

    def apply_all(self, changes: Iterable[ch.Change]) -> None:
        for change in changes:
            self.apply(change)

    def _upsert_node(self, node: NodeInfo) -> None:
        state = self.nodes.get(node.name)
        if state is None:
            requests, limits, count = self._totals.get(node.name, (Resources(), Resources(), 0))
            self.nodes[node.name] = NodeState(
                node,
                requests,
                limits,
                count,
                cpu_history=deque(maxlen=self.history),
                memory_history=deque(maxlen=self.history),
            )
        else:
            state.info = node

    def _replace_nodes(self, nodes: Iterable[NodeInfo]) -> None:
        names = set()
        for node in nodes:
            names.add(node.name)
            self._upsert_node(node)
        for gone in set(self.nodes) - names:
            del self.nodes[gone]

    def _account(self, pod: PodInfo, sign: int) -> None:
        requests, limits, count = self._totals.get(pod.node, (Resources(), Resources(), 0))
        if sign > 0:
            totals = (requests + pod.requests, limits + pod.limits, count + 1)
        else:
            totals = (requests - pod.requests, limits - pod.limits, count - 1)
        self._totals[pod.node] = totals
        state = self.nodes.get(pod.node)
        if state is not None:
            state.requests, state.limits, state.pods = totals

    def _upsert_pod(self, pod: PodInfo) -> None:
        key = pod.key
        old = self.pods.get(key)
        if old is not None:
            if old.active:
                self._account(old, -1)
            if old.node and old.node != pod.node:
                self.pods_by_node.get(old.node, set()).discard(key)
        self.pods[key] = pod
        if pod.node:
            self.pods_by_node.setdefault(pod.node, set()).add(key)
        if pod.active:
            self._account(pod, +1)
        if pod.node and (old is None or not old.node or old.uid != pod.uid):
            self._add_placement(pod)

    def _delete_pod(self, key: str) -> None:
        old = self.pods.pop(key, None)
        if old is None:
            return
        if old.active:
            self._account(old, -1)
        if old.node:
            self.pods_by_node.get(old.node, set()).discard(key)
        self.pod_usage.pop(key, None)

    def _replace_pods(self, pods: Iterable[PodInfo]) -> None:
        listed = {pod.key: pod for pod in pods}
        for gone in set(self.pods) - set(listed):
            self._delete_pod(gone)
        for pod in listed.values():
            self._upsert_pod(pod)

    def _add_placement(self, pod: PodInfo) -> None:
        at = pod.scheduled_at or pod.created
        if at is None:
            return
        placement = Placement(pod.namespace, pod.name, pod.uid, pod.node, pod.scheduler, at)
        self.placements[pod.uid or pod.key] = placement
        if len(self.placements) > self.placement_limit * 3 // 2:
            keep = nlargest(self.placement_limit, self.placements.items(), key=lambda i: i[1].at)
            self.placements = dict(keep)

    def _add_records(self, records: Iterable[Decision | Eviction]) -> None:
        for record in records:
            if isinstance(record, Decision):
                self._add_decision(record)
            else:
                self.evictions[record.uid] = record
        if len(self.evictions) > self.eviction_limit * 3 // 2:
            keep = nlargest(
                self.eviction_limit, self.evictions.items(), key=lambda i: i[1].at or _EPOCH
            )
            self.evictions = dict(keep)

    def _add_decision(self, decision: Decision) -> None:
        current = self.decisions_by_key.get(decision.key)
        if current is None or (current.at or _EPOCH) <= (decision.at or _EPOCH):
            self.decisions_by_key[decision.key] = decision
        if decision.pod_uid:
            self.decisions_by_uid[decision.pod_uid] = decision
        if len(self.decisions_by_key) > self.decision_limit * 3 // 2:
            keep = nlargest(
                self.decision_limit,
                self.decisions_by_key.items(),
                key=lambda i: i[1].at or _EPOCH,
            )
            self.decisions_by_key = dict(keep)
            kept = {d.pod_uid for d in self.decisions_by_key.values()}
            self.decisions_by_uid = {u: d for u, d in self.decisions_by_uid.items() if u in kept}

    def _add_metrics(
        self, at: datetime, nodes: Iterable[Usage], pods: Iterable[Usage] | None
    ) -> None:
        self.metrics_available = True
        self.metrics_reason = ""
        self.metrics_at = at
        for usage in nodes:
            state = self.nodes.get(usage.name)
            if state is None:
                continue
            state.usage = usage
            cpu = state.cpu_fraction()
            memory = state.memory_fraction()
            if cpu is not None:
                state.cpu_history.append(cpu)
            if memory is not None:
                state.memory_history.append(memory)
        if pods is not None:
            self.pod_usage = {usage.key: usage for usage in pods}

    # -- queries for the views ----------------------------------------------------------

    def decision_for(self, placement: Placement) -> Decision | None:
        """The extender's decision for this binding, never one about an older namesake pod."""
        if placement.uid and placement.uid in self.decisions_by_uid:
            return self.decisions_by_uid[placement.uid]
        decision = self.decisions_by_key.get(placement.key)
        if decision is None:
            return None
        if decision.pod_uid and placement.uid and decision.pod_uid != placement.uid:
            return None
        return decision

    def feed(self, limit: int = 200, text: str = "") -> list[FeedItem]:
        """Newest bindings and evictions first, optionally filtered by a substring."""
        needle = text.lower()
        items: list[FeedItem] = []
        for placement in self.placements.values():
            if needle and needle not in f"{placement.key} {placement.node} {placement.scheduler}":
                continue
            items.append(FeedItem(placement.at, placement, self.decision_for(placement)))
        for eviction in self.evictions.values():
            if needle and needle not in f"{eviction.key} {eviction.node} {eviction.strategy}":
                continue
            items.append(FeedItem(eviction.at or _EPOCH, eviction=eviction))
        return nlargest(limit, items, key=lambda item: item.at)

    def node_list(
        self, sort: NodeSort = NodeSort.CPU, *, descending: bool = True, text: str = ""
    ) -> list[NodeState]:
        """Nodes filtered by a substring of name, role or state, then sorted."""
        needle = text.lower()
        nodes = [
            n
            for n in self.nodes.values()
            if not needle or needle in f"{n.name} {n.info.role} {n.info.state}".lower()
        ]
        use_requests = not self.metrics_available

        def by_cpu(n: NodeState) -> tuple[float, str]:
            return (n.cpu_fraction(requests=use_requests) or 0.0, n.name)

        def by_memory(n: NodeState) -> tuple[float, str]:
            return (n.memory_fraction(requests=use_requests) or 0.0, n.name)

        match sort:
            case NodeSort.NAME:
                nodes.sort(key=lambda n: n.name, reverse=descending)
            case NodeSort.CPU:
                nodes.sort(key=by_cpu, reverse=descending)
            case NodeSort.MEMORY:
                nodes.sort(key=by_memory, reverse=descending)
            case NodeSort.PODS:
                nodes.sort(key=lambda n: (n.pods, n.name), reverse=descending)
            case NodeSort.ROLE:
                nodes.sort(key=lambda n: (n.info.role, n.name), reverse=descending)
        return nodes

    def pods_on(self, node: str) -> list[PodInfo]:
        return sorted(
            (self.pods[key] for key in self.pods_by_node.get(node, ()) if key in self.pods),
            key=lambda p: (p.namespace, p.name),
        )

    @property
    def skipped_total(self) -> int:
        """Cluster objects left out because they could not be parsed, over all streams."""
        return sum(self.skipped.values())

    @property
    def has_decisions(self) -> bool:
        return bool(self.decisions_by_key)
