"""The one seam between the TUI and Kubernetes: a source that pushes typed changes.

A `ClusterSource` is started with a sink and calls it with `Change` values, from any
thread, until stopped. The app only ever sees these values; whether they came from
watch streams against a live API server (`tui.kube.KubernetesSource`) or from recorded
JSON (`tui.fake.FakeSource`) is invisible above this line. That is what lets the tests
drive the real screens and the lab later run the same code against a real cluster.

Lists replace ("this is everything there is"), watch events patch, metrics polls add a
sample. Connectivity is reported as changes too, so a lost API server is just another
state the model records and the screens render.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from .objects import Decision, Eviction, NodeInfo, PodInfo, Usage

__all__ = [
    "ApiReachable",
    "ApiUnreachable",
    "Change",
    "ClusterSource",
    "EventsSeen",
    "MetricsPolled",
    "MetricsUnavailable",
    "NodeDeleted",
    "NodesListed",
    "NodeUpserted",
    "PodDeleted",
    "PodsListed",
    "PodUpserted",
    "Sink",
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
    | ApiUnreachable
    | ApiReachable
)

Sink = Callable[[Change], None]


class ClusterSource(Protocol):
    """Where cluster state comes from. Implementations must tolerate `stop()` at any time."""

    @property
    def description(self) -> str:
        """Shown in the header: the kubeconfig context, or "demo", or a file name."""
        ...

    def start(self, sink: Sink) -> None:
        """Begin delivering changes to `sink` (which is thread-safe) and return promptly."""
        ...

    def stop(self) -> None:
        """Stop delivering changes and release connections and threads."""
        ...
