"""A record of every placement decision's predicted node use, for measuring the estimator.

With ``estimator.decision_log`` set, each prioritize call the extender ranks appends one
JSON line to that file, and so does each filter call that leaves one node (kube-scheduler
then skips prioritize and binds the pod there: with every node over its thresholds the
filter passes only the least over (with least-used, those within its spreading band too), so
on a busy cluster many pods are placed by the filter alone, and a log of prioritize calls
misses them). A line holds: which verb decided (``verb``: prioritize or filter), when
(``at``, unix seconds), the pod (``pod``, namespace/name), how its own use was estimated
(``estimate``: learned, implied or request rule), the estimator mode, the extender's
favourite (``favourite``; after a filter, the node it left), and per candidate node the CPU
and memory it predicts the node will use with the pod on it, in percent of the node's
allocatable (``nodes``: name -> [cpu, memory], null where it has no figure), the same as
the filter counts it (``filter``: the pods in flight and this one at the filter's figure),
the node's reading alone (``read``: what the other two add the pods to), and how old each
node's load reading was (``age``: name -> seconds, ``reading_ages``). The placement
benchmark joins the lines with the pods' bindings and compares each prediction with the
node's true use (benchmarks/placement/steady_measures.py ``prediction_error``).

A JSON-lines file, not a field of the pod's Event: Events are rate-limited (60 a minute by
default) and sampled, and a benchmark needs every decision; a file the extender appends to
is read after the run without an API. The prediction is what the scores read
(``estimate.demand_after``: the node's reading, the pods counted since, the pod itself), so
the error measured is the scores' own.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import msgspec

from .estimate import PodFacts, demand_after
from .model import LoadSnapshot, NodeState, Usage

__all__ = [
    "DECISION_LOG_MAX_BYTES",
    "DecisionLog",
    "DecisionSink",
    "decision_record",
    "predicted_use",
    "read_use",
    "reading_ages",
]

# A decision with 500 candidate nodes of 11-character names is some 52 KB (three figures and
# an age per node); 64 MiB holds 1,300 of those and about a hundred thousand of a 5-node
# cluster's.
DECISION_LOG_MAX_BYTES = 64 * 1024 * 1024


class DecisionSink(Protocol):
    def write(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def predicted_use(
    pod: PodFacts, state: NodeState, *, filtering: bool = False
) -> list[float | None]:
    """[cpu, memory]: the node's predicted use with ``pod`` on it, percent of allocatable
    rounded to 0.01 (None for a resource without data); with ``filtering`` the filter's
    figure (the pods in flight and this one at ``estimate.filter_usage``)."""
    out: list[float | None] = []
    for resource in ("cpu", "memory"):
        demand = demand_after(resource, pod, state, filtering=filtering)
        out.append(None if demand is None else round(demand.percent, 2))
    return out


def read_use(pod: PodFacts, state: NodeState) -> list[float | None]:
    """[cpu, memory]: the node's reading alone, without the pods in flight or ``pod``, in
    ``predicted_use``'s terms: what the other two figures add to."""
    nothing = Usage()
    alone = msgspec.structs.replace(state, pending=nothing, pending_request=None)
    return predicted_use(msgspec.structs.replace(pod, usage=nothing, load=None), alone)


def reading_ages(
    at: float, snapshot: LoadSnapshot | None, names: Sequence[str]
) -> dict[str, float]:
    """Per node of ``names`` the snapshot holds, how old its load measurement was at ``at``
    (seconds; its own time, else the window's end): the freshness of the view a decision
    read. A node the snapshot lacks is left out."""
    if snapshot is None:
        return {}
    return {
        name: round(at - snapshot.measured_at.get(name, snapshot.window_end), 1)
        for name in names
        if name in snapshot.nodes
    }


def decision_record(
    at: float,
    pod: PodFacts,
    how: str,
    mode: str,
    favourite: str | None,
    states: Sequence[NodeState],
    ages: Mapping[str, float] | None = None,
    *,
    verb: str = "prioritize",
) -> dict[str, Any]:
    """One line of the log (see the module docstring)."""
    return {
        "verb": verb,
        "at": round(at, 3),
        "pod": f"{pod.namespace}/{pod.name}",
        "estimate": how,
        "mode": mode,
        "favourite": favourite,
        "nodes": {s.name: predicted_use(pod, s) for s in states},
        "filter": {s.name: predicted_use(pod, s, filtering=True) for s in states},
        "read": {s.name: read_use(pod, s) for s in states},
        "age": dict(ages or {}),
    }


class DecisionLog:
    """Appends records to ``path`` as JSON lines, each flushed as it is written (the
    benchmark reads the file while the extender may still run). Bounded: past
    ``max_bytes`` the file becomes ``path.1`` (the one before is dropped) and a new one
    starts, so a log left on in a long-lived cluster holds at most twice ``max_bytes``.
    logging's RotatingFileHandler does the rotation; this logger's records go nowhere else."""

    def __init__(self, path: str, max_bytes: int = DECISION_LOG_MAX_BYTES) -> None:
        self.path = path
        self._handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=max_bytes, backupCount=1, encoding="utf-8"
        )
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger = logging.Logger(f"loadwise.extender.decisions:{path}")  # not registered
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._logger.addHandler(self._handler)

    def write(self, record: dict[str, Any]) -> None:
        self._logger.info(json.dumps(record, separators=(",", ":")))

    def close(self) -> None:
        self._logger.removeHandler(self._handler)
        self._handler.close()
