"""The pods-on-a-node table of the node detail screen."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from ..model import ClusterModel
from ..objects import PodInfo
from .cells import age, compact_bytes, cores
from .table import KeyedTable, Row

__all__ = ["PodsTable", "pod_row"]

_PHASE_STYLE = {"Running": "green", "Pending": "yellow", "Failed": "red", "Succeeded": "dim"}


def _limit(value: float, text: str) -> str:
    return text if value else "–"


def pod_row(pod: PodInfo, model: ClusterModel, now: datetime) -> Row:
    usage = model.pod_usage.get(pod.key)
    used = usage.usage if usage is not None else None
    cells = (
        pod.namespace,
        Text(pod.name, style="bold"),
        Text(pod.phase, style=_PHASE_STYLE.get(pod.phase, "")),
        Text(cores(used.cpu_m), style="bold") if used else Text("–", style="dim"),
        cores(pod.requests.cpu_m) if pod.requests.cpu_m else "–",
        _limit(pod.limits.cpu_m, cores(pod.limits.cpu_m)),
        Text(compact_bytes(used.memory), style="bold") if used else Text("–", style="dim"),
        compact_bytes(pod.requests.memory) if pod.requests.memory else "–",
        _limit(pod.limits.memory, compact_bytes(pod.limits.memory)),
        pod.scheduler,
        age(pod.created, now),
    )
    return pod.key, cells


class PodsTable(KeyedTable):
    COLUMNS = (
        ("ns", "NAMESPACE", None),
        ("pod", "POD", None),
        ("phase", "PHASE", 9),
        ("cpu", "CPU used", 8),
        ("cpu_r", "CPU req", 7),
        ("cpu_l", "CPU lim", 7),
        ("mem", "MEM used", 8),
        ("mem_r", "MEM req", 7),
        ("mem_l", "MEM lim", 7),
        ("sched", "SCHEDULER", None),
        ("age", "AGE", 5),
    )
