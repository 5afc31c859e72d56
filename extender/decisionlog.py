"""A record of every placement decision's predicted node use, for measuring the estimator.

With ``estimator.decision_log`` set, each prioritize call the extender ranks appends one
JSON line to that file: when (``at``, unix seconds), the pod (``pod``, namespace/name), how
its own use was estimated (``estimate``: learned or request rule), the estimator mode, the
extender's favourite (``favourite``), and per candidate node the CPU and memory it predicts
the node will use with the pod on it, in percent of the node's allocatable (``nodes``:
name -> [cpu, memory], null where it has no figure). The placement benchmark joins the lines
with the pods' bindings and compares each prediction with the node's true use
(benchmarks/placement/steady_measures.py ``prediction_error``).

A JSON-lines file, not a field of the pod's Event: Events are rate-limited (60 a minute by
default) and sampled, and a benchmark needs every decision; a file the extender appends to
is read after the run without an API. The prediction is what the scores read
(``estimate.demand_after``: the node's reading, the pods counted since, the pod itself), so
the error measured is the scores' own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import IO, Any, Protocol

from .estimate import PodFacts, demand_after
from .model import NodeState

__all__ = ["DecisionLog", "DecisionSink", "decision_record", "predicted_use"]


class DecisionSink(Protocol):
    def write(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def predicted_use(pod: PodFacts, state: NodeState) -> list[float | None]:
    """[cpu, memory]: the node's predicted use with ``pod`` on it, percent of allocatable
    rounded to 0.01 (None for a resource without data)."""
    out: list[float | None] = []
    for resource in ("cpu", "memory"):
        demand = demand_after(resource, pod, state)
        out.append(None if demand is None else round(demand.percent, 2))
    return out


def decision_record(
    at: float,
    pod: PodFacts,
    how: str,
    mode: str,
    favourite: str | None,
    states: Sequence[NodeState],
) -> dict[str, Any]:
    """One line of the log (see the module docstring)."""
    return {
        "at": round(at, 3),
        "pod": f"{pod.namespace}/{pod.name}",
        "estimate": how,
        "mode": mode,
        "favourite": favourite,
        "nodes": {s.name: predicted_use(pod, s) for s in states},
    }


class DecisionLog:
    """Appends records to ``path`` as JSON lines, each flushed as it is written (the
    benchmark reads the file while the extender may still run)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close)

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
