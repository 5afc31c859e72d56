"""The typed changes a `ClusterSource` delivers, and the only vocabulary the model accepts.

Lists replace ("this is everything there is"), watch events patch, metrics polls add a
sample. Connectivity is reported as changes too, so a lost API server is just another
state the model records and the screens render.

Callers import the module, not the names: `from loadwise.tui.sources import changes as ch`, then
`ch.NodesListed(...)`, `case ch.PodDeleted(namespace, name):`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..objects import Decision, Eviction, NodeInfo, PodInfo, Usage

__all__ = [
    "ApiReachable",
    "ApiUnreachable",
    "Change",
    "EventsSeen",
    "MetricsPolled",
    "MetricsUnavailable",
    "NodeDeleted",
    "NodesListed",
    "NodeUpserted",
    "ObjectsSkipped",
    "PodDeleted",
    "PodsListed",
    "PodUpserted",
]


@dataclass(frozen=True, slots=True)
class NodesListed:
    """A full node list: nodes not in it are gone."""

    nodes: tuple[NodeInfo, ...]


@dataclass(frozen=True, slots=True)
class NodeUpserted:
    node: NodeInfo


@dataclass(frozen=True, slots=True)
class NodeDeleted:
    name: str


@dataclass(frozen=True, slots=True)
class PodsListed:
    """A full pod list: pods not in it are gone."""

    pods: tuple[PodInfo, ...]


@dataclass(frozen=True, slots=True)
class PodUpserted:
    pod: PodInfo


@dataclass(frozen=True, slots=True)
class PodDeleted:
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class EventsSeen:
    """Extender decisions and descheduler evictions, from a list or a watch."""

    records: tuple[Decision | Eviction, ...]


@dataclass(frozen=True, slots=True)
class MetricsPolled:
    """One metrics.k8s.io poll. `pods` is None when this poll skipped PodMetrics."""

    at: datetime
    nodes: tuple[Usage, ...]
    pods: tuple[Usage, ...] | None = None


@dataclass(frozen=True, slots=True)
class MetricsUnavailable:
    """metrics.k8s.io is not served (no metrics-server) or failed."""

    reason: str


@dataclass(frozen=True, slots=True)
class ObjectsSkipped:
    """`count` objects of `stream` ("pods", "events[reason=...]", "nodemetrics"...) could
    not be parsed and are left out: the stream's whole count now, replacing the last one."""

    stream: str
    count: int


@dataclass(frozen=True, slots=True)
class ApiUnreachable:
    """A request to the API server failed; the source retries after `retry_in` seconds."""

    reason: str
    retry_in: float
    at: datetime


@dataclass(frozen=True, slots=True)
class ApiReachable:
    at: datetime


Change = (
    NodesListed
    | NodeUpserted
    | NodeDeleted
    | PodsListed
    | PodUpserted
    | PodDeleted
    | EventsSeen
    | MetricsPolled
    | MetricsUnavailable
    | ObjectsSkipped
    | ApiUnreachable
    | ApiReachable
)
