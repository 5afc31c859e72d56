"""The pods-on-a-node table of the node detail screen."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from ..model import ClusterModel
from ..objects import PodInfo
from .cells import age, compact_bytes, cores, plain
from .table import KeyedTable, Row

__all__ = ["PodsTable", "pod_row"]

_PHASE_STYLE = {"Running": "green", "Pending": "yellow", "Failed": "red", "Succeeded": "dim"}


def _amount(value: float, text: str) -> Text:
    return plain(text if value else "–")


def pod_row(pod: PodInfo, model: ClusterModel, now: datetime) -> Row:
    usage = model.pod_usage.get(pod.key)
    used = usage.usage if usage is not None else None
    cells = (
        plain(pod.namespace),
        Text(pod.name, style="bold"),
        Text(pod.phase, style=_PHASE_STYLE.get(pod.phase, "")),
        Text(cores(used.cpu_m), style="bold") if used else Text("–", style="dim"),
        _amount(pod.requests.cpu_m, cores(pod.requests.cpu_m)),
        _amount(pod.limits.cpu_m, cores(pod.limits.cpu_m)),
        Text(compact_bytes(used.memory), style="bold") if used else Text("–", style="dim"),
        _amount(pod.requests.memory, compact_bytes(pod.requests.memory)),
        _amount(pod.limits.memory, compact_bytes(pod.limits.memory)),
        plain(pod.scheduler),
        plain(age(pod.created, now)),
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
