"""metrics-server through the API (``metrics.k8s.io/v1beta1`` NodeMetrics).

NodeMetrics carry absolute usage (CPU often in nanocores, memory in Ki); the
percentages the policies use are taken against the node's capacity, as
load-watcher's own metrics-server provider does. A usage that is not a quantity,
is negative or exceeds the node's capacity refuses that node alone (``readings``).

Each node is as old as its item's ``timestamp``: metrics.k8s.io defines an item's
figures as collected over ``[timestamp - window, timestamp]``, so the timestamp is the
end of the measurement. A kubelet that stopped answering leaves its node's item ageing
(metrics-server keeps it until the node is gone), and it is refused alone once older
than ``max_stale_seconds`` (``readings.expired``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Generic, TypeVar

import msgspec

from ..kubeapi import KubeAPI
from ..model import InvalidReading, LoadSnapshot, NodeInfo, NodeLoad, ResourceLoad
from ..quantity import QuantityError, parse_quantity
from ..readings import MALFORMED, validated
from .base import (
    DEFAULT_MAX_NODES,
    DEFAULT_MAX_RESPONSE_BYTES,
    SourceError,
    count_items,
    decode_document,
    get_from_api,
    over_node_cap,
)

__all__ = ["MetricsServerSource", "parse_node_metrics"]

PATH = "/apis/metrics.k8s.io/v1beta1/nodes"


class _Meta(msgspec.Struct):
    name: str = ""


class _NodeMetrics(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    timestamp: str = ""
    window: str = ""
    usage: dict[str, str | int | float] = msgspec.field(default_factory=dict)


class _Named(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


Item = TypeVar("Item")  # an item: _NodeMetrics, or msgspec.Raw to decode each alone


class _NodeMetricsList(msgspec.Struct, Generic[Item]):
    items: list[Item] | None = None


_decoder = msgspec.json.Decoder(_NodeMetricsList[_NodeMetrics])
_lenient_decoder = msgspec.json.Decoder(_NodeMetricsList[msgspec.Raw])
_item_decoder = msgspec.json.Decoder(_NodeMetrics)
_name_decoder = msgspec.json.Decoder(_Named)


def _parse_time(value: str) -> float | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _percent(
    usage: Mapping[str, str | int | float], resource: str, capacity: float
) -> float | None:
    """``usage[resource]`` in percent of ``capacity`` (its base unit: cores, bytes), not
    checked yet; None without a figure or a capacity. QuantityError for garbage."""
    value = usage.get(resource)
    if value is None or not capacity:
        return None
    return float(parse_quantity(value) * 100) / capacity


def parse_node_metrics(
    body: bytes | bytearray,
    infos: Mapping[str, NodeInfo],
    *,
    fetched_at: float | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> LoadSnapshot:
    """The checked snapshot (``readings.validated``) of a NodeMetricsList, for the nodes
    whose size ``infos`` holds; SourceError when it is not a NodeMetricsList or holds
    more than ``max_nodes`` items. An item of the wrong shape refuses its node alone
    (when its name can be read)."""
    count = count_items(body, "a NodeMetricsList", max_nodes)
    if count is not None and count > max_nodes:  # before any item is built
        raise over_node_cap("NodeMetricsList", count, max_nodes)
    doc = decode_document(body, _decoder, _lenient_decoder, "a NodeMetricsList")
    if doc.items is not None and len(doc.items) > max_nodes:
        raise over_node_cap("NodeMetricsList", len(doc.items), max_nodes)
    now = time.time() if fetched_at is None else fetched_at
    nodes: dict[str, NodeLoad] = {}
    invalid: dict[str, InvalidReading] = {}
    measured_at: dict[str, float] = {}
    newest = 0.0
    for entry in doc.items or []:
        if isinstance(entry, msgspec.Raw):  # the lenient pass: this item alone
            try:
                item = _item_decoder.decode(entry)
            except msgspec.DecodeError as exc:
                try:
                    name = _name_decoder.decode(entry).metadata.name
                except msgspec.DecodeError:
                    continue  # not even a name to refuse it under
                if name in infos:
                    invalid[name] = InvalidReading(MALFORMED, f"NodeMetrics unusable: {exc}")
                continue
        else:
            item = entry
        name = item.metadata.name
        info = infos.get(name)
        if info is None:
            continue  # capacity unknown: a percentage cannot be formed
        try:
            cpu = _percent(item.usage, "cpu", info.cpu_capacity_millis / 1000)
            memory = _percent(item.usage, "memory", info.memory_capacity_bytes)
        except QuantityError as exc:
            invalid[name] = InvalidReading(MALFORMED, f"usage: {exc}")
            continue
        nodes[name] = NodeLoad(ResourceLoad(cpu), ResourceLoad(memory))
        stamp = _parse_time(item.timestamp)
        if stamp is not None:
            measured_at[name] = stamp
            newest = max(newest, stamp)
    # The newest NodeMetrics timestamp is metrics-server's last scrape, and its CPU a rate
    # over about one --metric-resolution (15 s default) before it: a pod placed within
    # that and the seconds it needs to start is not in the figure yet.
    return validated(
        LoadSnapshot(
            "metrics-server",
            newest or now,
            now,
            nodes,
            settle_seconds=30.0,
            invalid=invalid,
            measured_at=measured_at,
        )
    )


class MetricsServerSource:
    name = "metrics-server"

    def __init__(
        self,
        api: KubeAPI,
        infos: Callable[[], Mapping[str, NodeInfo]],
        *,
        max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_nodes: int = DEFAULT_MAX_NODES,
    ) -> None:
        self._api = api
        self._infos = infos
        self.max_bytes = max_bytes
        self.max_nodes = max_nodes

    async def fetch(self) -> LoadSnapshot:
        body = await get_from_api(self._api, PATH, self.max_bytes, "metrics-server")
        infos = self._infos()
        if not infos:
            raise SourceError("metrics-server: node sizes not known yet (node watch not synced)")
        return parse_node_metrics(body, infos, max_nodes=self.max_nodes)

    async def close(self) -> None:
        return None
