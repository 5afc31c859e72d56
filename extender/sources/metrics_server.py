"""metrics-server through the API (``metrics.k8s.io/v1beta1`` NodeMetrics).

NodeMetrics carry absolute usage (CPU often in nanocores, memory in Ki); the
percentages the policies use are taken against the node's capacity, as
load-watcher's own metrics-server provider does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from datetime import datetime

import msgspec

from ..exceptions import KubeError
from ..kubeapi import KubeAPI
from ..model import LoadSnapshot, NodeInfo, NodeLoad, ResourceLoad
from ..quantity import QuantityError, cpu_millis, memory_bytes
from .base import SourceError

__all__ = ["MetricsServerSource", "parse_node_metrics"]

PATH = "/apis/metrics.k8s.io/v1beta1/nodes"


class _Meta(msgspec.Struct):
    name: str = ""


class _NodeMetrics(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    timestamp: str = ""
    window: str = ""
    usage: dict[str, str | int | float] = msgspec.field(default_factory=dict)


class _NodeMetricsList(msgspec.Struct):
    items: list[_NodeMetrics] | None = None


_decoder = msgspec.json.Decoder(_NodeMetricsList)


def _parse_time(value: str) -> float | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def parse_node_metrics(
    body: bytes, infos: Mapping[str, NodeInfo], *, fetched_at: float | None = None
) -> LoadSnapshot:
    try:
        doc = _decoder.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise SourceError(f"not a NodeMetricsList: {exc}") from None
    now = time.time() if fetched_at is None else fetched_at
    nodes: dict[str, NodeLoad] = {}
    newest = 0.0
    for item in doc.items or []:
        info = infos.get(item.metadata.name)
        if info is None:
            continue  # capacity unknown: a percentage cannot be formed
        try:
            cpu = cpu_millis(item.usage["cpu"]) if "cpu" in item.usage else None
            mem = memory_bytes(item.usage["memory"]) if "memory" in item.usage else None
        except QuantityError as exc:
            raise SourceError(f"NodeMetrics {item.metadata.name}: {exc}") from None
        cpu_pct = (
            100 * cpu / info.cpu_capacity_millis
            if cpu is not None and info.cpu_capacity_millis
            else None
        )
        mem_pct = (
            100 * mem / info.memory_capacity_bytes
            if mem is not None and info.memory_capacity_bytes
            else None
        )
        nodes[item.metadata.name] = NodeLoad(ResourceLoad(cpu_pct), ResourceLoad(mem_pct))
        stamp = _parse_time(item.timestamp)
        if stamp is not None:
            newest = max(newest, stamp)
    # The newest NodeMetrics timestamp is metrics-server's last scrape, and its CPU a rate
    # over about one --metric-resolution (15 s default) before it: a pod placed within
    # that and the seconds it needs to start is not in the figure yet.
    return LoadSnapshot("metrics-server", newest or now, now, nodes, settle_seconds=30.0)


class MetricsServerSource:
    name = "metrics-server"

    def __init__(self, api: KubeAPI, infos: Callable[[], Mapping[str, NodeInfo]]) -> None:
        self._api = api
        self._infos = infos

    async def fetch(self) -> LoadSnapshot:
        try:
            body = await asyncio.to_thread(self._api.get, PATH)
        except KubeError as exc:
            raise SourceError(str(exc)) from None
        infos = self._infos()
        if not infos:
            raise SourceError("metrics-server: node sizes not known yet (node watch not synced)")
        return parse_node_metrics(body, infos)

    async def close(self) -> None:
        return None
