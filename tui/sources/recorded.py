"""`RecordedSource`: a `ClusterSource` fed from recorded Kubernetes JSON, not an API server.

A recorded cluster is a directory of the documents `kubectl get --raw` returns:

    nodes.json        NodeList                 /api/v1/nodes
    pods.json         PodList                  /api/v1/pods
    events.json       EventList                /api/v1/events
    nodemetrics.json  NodeMetricsList, or a JSON array of them (successive polls, oldest first)
    podmetrics.json   PodMetricsList           /apis/metrics.k8s.io/v1beta1/pods

Missing metrics files mean "no metrics-server"; a missing events file means "no
extender, no descheduler". Tests use this source to drive the real screens,
`loadwise-tui --demo DIR` uses it to show the TUI without a cluster, and `--demo` alone
replays a generated cluster (`tui.sources.synthetic`) through it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..exceptions import RecordedClusterError
from ..objects import (
    Decision,
    Eviction,
    parse_event,
    parse_node,
    parse_node_metrics,
    parse_pod,
    parse_pod_metrics,
)
from . import Sink
from . import changes as ch
from .skipped import Read, read_each

__all__ = ["RecordedCluster", "RecordedSource"]

JSON = dict[str, Any]


def _items(doc: Any) -> list[Any]:
    """A list document's items; none if `doc` is not one."""
    items = doc.get("items") if isinstance(doc, Mapping) else None
    return items if isinstance(items, list) else []


def _skipped(stream: str, read: Read[Any]) -> list[ch.Change]:
    return [ch.ObjectsSkipped(stream, len(read.skipped))] if read.skipped else []


@dataclass(slots=True)
class RecordedCluster:
    """Raw API documents, as they would come off the wire."""

    nodes: JSON
    pods: JSON
    events: JSON | None = None
    node_metrics: list[JSON] = field(default_factory=list)
    pod_metrics: JSON | None = None

    @classmethod
    def from_dir(cls, path: str | Path) -> RecordedCluster:
        """Read a recorded-cluster directory; raises `RecordedClusterError` if it is unusable."""
        root = Path(path)
        if not root.is_dir():
            raise RecordedClusterError(f"{root} is not a directory of recorded cluster JSON")

        def load(name: str) -> Any:
            file = root / name
            if not file.exists():
                return None
            try:
                return json.loads(file.read_text())
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                raise RecordedClusterError(f"cannot read {file}: {exc}") from exc

        node_metrics = load("nodemetrics.json")
        if isinstance(node_metrics, dict):
            node_metrics = [node_metrics]
        return cls(
            nodes=load("nodes.json") or {"items": []},
            pods=load("pods.json") or {"items": []},
            events=load("events.json"),
            node_metrics=node_metrics or [],
            pod_metrics=load("podmetrics.json"),
        )

    def write(self, path: str | Path) -> None:
        """Save as a recorded-cluster directory (see the module docstring)."""
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        docs: dict[str, Any] = {"nodes.json": self.nodes, "pods.json": self.pods}
        if self.events is not None:
            docs["events.json"] = self.events
        if self.node_metrics:
            docs["nodemetrics.json"] = self.node_metrics
        if self.pod_metrics is not None:
            docs["podmetrics.json"] = self.pod_metrics
        for name, doc in docs.items():
            (root / name).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")

    def changes(
        self, *, now: datetime, metrics: bool = True, events: bool = True
    ) -> list[ch.Change]:
        """The changes a fresh connection to this cluster would produce, in order.

        An object the parsers cannot read is left out and counted, as the live source
        does (`tui.sources.skipped`).
        """
        nodes = read_each(parse_node, _items(self.nodes))
        pods = read_each(parse_pod, _items(self.pods))
        changes: list[ch.Change] = [
            ch.ApiReachable(now),
            ch.NodesListed(nodes.parsed),
            *_skipped("nodes", nodes),
            ch.PodsListed(pods.parsed),
            *_skipped("pods", pods),
        ]
        if events and self.events is not None:
            records: Read[Decision | Eviction] = read_each(parse_event, _items(self.events))
            changes += [ch.EventsSeen(records.parsed), *_skipped("events", records)]
        if not metrics or not self.node_metrics:
            changes.append(
                ch.MetricsUnavailable(
                    "the metrics.k8s.io API is not served (404): no metrics-server"
                )
            )
            return changes
        polls = self.node_metrics
        skipped = 0  # node metrics skipped in the last poll: each poll replaces the count
        for index, poll in enumerate(polls):
            usages = read_each(parse_node_metrics, _items(poll))
            stamp = next((u.at for u in usages.parsed if u.at), None) or now - timedelta(
                seconds=15 * (len(polls) - 1 - index)
            )
            last = index == len(polls) - 1
            pod_usages = (
                read_each(parse_pod_metrics, _items(self.pod_metrics))
                if last and self.pod_metrics is not None
                else None
            )
            changes.append(
                ch.MetricsPolled(
                    stamp, usages.parsed, None if pod_usages is None else pod_usages.parsed
                )
            )
            if len(usages.skipped) != skipped:
                skipped = len(usages.skipped)
                changes.append(ch.ObjectsSkipped("nodemetrics", skipped))
            if pod_usages is not None:
                changes += _skipped("podmetrics", pod_usages)
        return changes


class RecordedSource:
    """Replays a `RecordedCluster` on start, then delivers whatever a test `push`es.

    `reachable=False` starts in the "API unreachable" state (nothing listed), the way
    the real source looks when the kubeconfig points at a server that is down.
    """

    def __init__(
        self,
        cluster: RecordedCluster,
        *,
        now: Callable[[], datetime],
        metrics: bool = True,
        events: bool = True,
        reachable: bool = True,
        description: str = "recorded",
    ) -> None:
        self.cluster = cluster
        self._now = now
        self.metrics = metrics
        self.events = events
        self.reachable = reachable
        self._description = description
        self._sink: Sink | None = None
        self.stopped = False

    @property
    def description(self) -> str:
        return self._description

    def start(self, sink: Sink) -> None:
        self._sink = sink
        if not self.reachable:
            sink(ch.ApiUnreachable("connection refused (127.0.0.1:6443)", 1.0, self._now()))
            return
        for change in self.cluster.changes(
            now=self._now(), metrics=self.metrics, events=self.events
        ):
            sink(change)

    def push(self, *changes: ch.Change) -> None:
        """Deliver further changes, as a watch stream or metrics poll would."""
        assert self._sink is not None, "push() before start()"
        for change in changes:
            self._sink(change)

    def stop(self) -> None:
        self.stopped = True
