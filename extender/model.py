"""What the extender knows about nodes: their size, their measured load, and the
state a policy scores. Frozen msgspec structs (cheap to build on the request path); no I/O
here but the rate-limited warning about a Node whose size is unusable."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Protocol

import msgspec

from .exceptions import QuantityError
from .quantity import cpu_millis, memory_bytes, shown
from .throttle import LogThrottle
from .wire import Node, timestamp

__all__ = [
    "CPU_THRESHOLD_KEY",
    "DEFAULT_SETTLE_SECONDS",
    "MEMORY_THRESHOLD_KEY",
    "Amount",
    "InvalidReading",
    "LoadSnapshot",
    "NodeInfo",
    "NodeLoad",
    "NodeState",
    "PodLoad",
    "ResourceLoad",
    "Usage",
    "usable_node_info",
]

log = logging.getLogger("loadwise.extender.model")


class Usage(msgspec.Struct, frozen=True):
    """An absolute amount of CPU (millicores) and memory (bytes)."""

    cpu_millis: float = 0.0
    memory_bytes: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.cpu_millis + other.cpu_millis, self.memory_bytes + other.memory_bytes)


class PodLoad(msgspec.Struct, frozen=True):
    """What one placed pod counts on its node until a reading holds it (the herding
    ledger): ``usage`` the estimate the scores count, ``request`` the figure the filter
    counts (``estimate.filter_usage``), ``tlp_cpu_millis`` TargetLoadPacking's prediction."""

    usage: Usage
    request: Usage
    tlp_cpu_millis: float


CPU_THRESHOLD_KEY = "loadwise.dev/cpu-threshold"
MEMORY_THRESHOLD_KEY = "loadwise.dev/memory-threshold"
_threshold_log = LogThrottle(60.0)


def _node_threshold(node: Node, resource: str) -> float | None:
    """The node's own filter threshold for ``resource`` (percent of allocatable, in
    (0, 100], a trailing "%" allowed): its annotation, else its label (a label is what a
    kubelet can be given at join, ``--node-labels``; an annotation is easier to change
    later). A value that is not such a percentage is ignored for this node, which then
    uses the default, and a WARNING names it (at most once a minute per node and key)."""
    meta = node.metadata
    for where, keys in (("annotation", meta.annotations), ("label", meta.labels)):
        if keys is None:
            continue
        value = keys.cpu_threshold if resource == "cpu" else keys.memory_threshold
        if value is None:
            continue
        text = value.strip().removesuffix("%").strip()
        try:
            percent = float(text)
        except ValueError:
            percent = math.nan
        if math.isfinite(percent) and 0 < percent <= 100:
            return percent
        key = CPU_THRESHOLD_KEY if resource == "cpu" else MEMORY_THRESHOLD_KEY
        _threshold_log.warning(
            log,
            f"{meta.name}/{where}/{key}",
            "node %s: %s %s=%s is not a percentage in (0, 100]; ignored, the default "
            "threshold applies",
            shown(meta.name),
            where,
            key,
            shown(value),
        )
    return None


class NodeInfo(msgspec.Struct, frozen=True):
    """A node's size, from its Node object, and its own filter thresholds (None: the
    configured default; see ``_node_threshold``)."""

    name: str
    cpu_capacity_millis: int = 0
    memory_capacity_bytes: int = 0
    cpu_allocatable_millis: int = 0
    memory_allocatable_bytes: int = 0
    pods_allocatable: int = 0
    unschedulable: bool = False
    cpu_threshold: float | None = None
    memory_threshold: float | None = None
    created_at: float | None = None
    """When the Node object was created (unix seconds; None: not said): no source has
    measured it before, so a mean over a window reaching further back covers less
    (``inflight.held_share``)."""

    @classmethod
    def from_node(cls, node: Node) -> NodeInfo:
        """The node's size; a value missing is 0. Raises QuantityError naming the
        field (``status.capacity.cpu``) for one present but unusable: garbage,
        negative, not finite or beyond int64 (see ``quantity``). A bad threshold
        never raises: it is ignored (``_node_threshold``)."""
        capacity = node.status.capacity or {}
        allocatable = node.status.allocatable or capacity
        where = "allocatable" if node.status.allocatable else "capacity"

        def get(
            values: Mapping[str, str | int | float],
            path: str,
            key: str,
            parse: Callable[[str | int | float], int],
        ) -> int:
            value = values.get(key)
            if value is None:
                return 0
            try:
                return parse(value)
            except QuantityError as exc:
                raise QuantityError(f"status.{path}.{key}: {exc}") from None

        return cls(
            name=node.metadata.name,
            cpu_capacity_millis=get(capacity, "capacity", "cpu", cpu_millis),
            memory_capacity_bytes=get(capacity, "capacity", "memory", memory_bytes),
            cpu_allocatable_millis=get(allocatable, where, "cpu", cpu_millis),
            memory_allocatable_bytes=get(allocatable, where, "memory", memory_bytes),
            pods_allocatable=get(allocatable, where, "pods", memory_bytes),
            unschedulable=node.spec.unschedulable,
            cpu_threshold=_node_threshold(node, "cpu"),
            memory_threshold=_node_threshold(node, "memory"),
            created_at=timestamp(node.metadata.creationTimestamp),
        )


_unusable_log = LogThrottle(60.0)


def usable_node_info(node: Node) -> NodeInfo | None:
    """``NodeInfo.from_node``, or None when the Node's own capacity or allocatable
    is unusable: the node is then treated as one of unknown size (scored on its
    measured percentages, like a node the extender has no Node object for), the
    other nodes are scored as usual, and a WARNING says why (at most once a minute
    per node). The Node object is the cluster's data, not the scheduler's request,
    so the request is still answered with 200."""
    try:
        return NodeInfo.from_node(node)
    except QuantityError as exc:
        name = node.metadata.name
        _unusable_log.warning(
            log, name, "node %s: %s; scoring it as a node of unknown size", shown(name), exc
        )
        return None


class ResourceLoad(msgspec.Struct, frozen=True):
    """Measured use of one resource, in percent of the node's capacity.

    ``avg`` is the mean over the source's window (or the latest value),
    ``std`` its standard deviation when the source reports one.
    """

    avg: float | None = None
    std: float | None = None


class NodeLoad(msgspec.Struct, frozen=True):
    cpu: ResourceLoad = msgspec.field(default_factory=ResourceLoad)
    memory: ResourceLoad = msgspec.field(default_factory=ResourceLoad)


DEFAULT_SETTLE_SECONDS = 60.0


class InvalidReading(msgspec.Struct, frozen=True):
    """Why a node's reading was refused (``extender.readings``): ``reason`` is a short
    fixed word (the metrics label), ``detail`` says what was read."""

    reason: str
    detail: str


class LoadSnapshot(msgspec.Struct, frozen=True):
    """One reading of a load source.

    ``window_end`` is the wall-clock time (unix seconds) the measurements cover
    up to; a pod placed after ``window_end - settle_seconds`` is not (fully) in
    them, so the herding ledger still counts it (``nodestate``). The default is
    Trimaran's metricsAgentReportingIntervalSeconds, 60 s, made for readings
    averaged over a window; a source of latest values sets less (see its parser).
    ``fetched_at`` is when the extender got the reading (``time.time()``).
    ``invalid`` holds the nodes whose reading was refused (not in ``nodes``): their
    load is unknown, not estimated (``nodestate``).
    ``measured_at`` is a node's own measurement time, for a source that stamps each
    node apart (a Prometheus sample, a NodeMetrics item); a node it does not name was
    measured at ``window_end``. A node whose time is more than ``max_stale_seconds``
    old is moved to ``invalid`` (``readings.expired``), the others keep their reading.
    """

    source: str
    window_end: float
    fetched_at: float
    nodes: Mapping[str, NodeLoad]
    settle_seconds: float = DEFAULT_SETTLE_SECONDS
    invalid: Mapping[str, InvalidReading] = msgspec.field(default_factory=dict)
    measured_at: Mapping[str, float] = msgspec.field(default_factory=dict)


class Amount(Protocol):
    """Anything with CPU millicores and memory bytes (a Usage, or the ledger's totals)."""

    @property
    def cpu_millis(self) -> float: ...

    @property
    def memory_bytes(self) -> float: ...


class NodeState(msgspec.Struct, frozen=True):
    """Everything a policy may use to score one node for one pod.

    ``load`` is the measured load when fresh, or an estimate (``estimated``) for
    a node with no fresh measurement: a node that just joined or whose data went
    stale. ``pending`` is the estimated use of pods placed on the node that the
    measurement cannot show yet; ``pending_tlp_cpu`` is the same pods' CPU as
    TargetLoadPacking predicts it.
    """

    name: str
    info: NodeInfo | None
    load: NodeLoad
    estimated: bool = False
    pending: Amount = msgspec.field(default_factory=Usage)
    pending_tlp_cpu_millis: float = 0.0
    pending_pods: int = 0
    pod_count: int | None = None
    pending_request: Amount | None = None
    """The same pods at the filter's figure (``estimate.filter_usage``); None: ``pending``."""
    same_owner: int = 0
    """Pods of the scored pod's controller on this node, bound or assumed (spreading)."""
    owner_pods: int = 0
    """Pods of the scored pod's controller on every node (0: none known, no spreading)."""
