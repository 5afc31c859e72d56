"""Prometheus instant queries, one per resource (node CPU and memory utilisation).

Each query must return a vector with one sample per node, valued as a fraction
(0..1) of the node's capacity, labelled with the node name. The defaults are the
recording rules load-watcher's Prometheus provider reads
(``instance:node_cpu:ratio``, ``instance:node_memory_utilisation:ratio``), keyed
by the ``instance`` label; set ``node_label`` when your relabeling names nodes
another way (for example a ``node`` label added by relabeling).

Sample values are strings in the HTTP API and may be ``"NaN"``, ``"+Inf"`` or ``"-Inf"``
(a rule dividing by zero yields them); such a value, a negative one, one above 1 and
one that is not a number refuse that node alone (``readings``). Each node is as old
as the older of its two samples (``LoadSnapshot.measured_at``): a rule that stopped
being evaluated for one node leaves a sample that ages alone, and is refused alone once
older than ``max_stale_seconds``, however new its neighbours' are.
"""

from __future__ import annotations

import math
import time
from typing import Generic, TypeVar

import msgspec

from ..model import InvalidReading, LoadSnapshot, NodeLoad, ResourceLoad
from ..quantity import shown
from ..readings import MALFORMED, validated
from .base import (
    DEFAULT_MAX_NODES,
    DEFAULT_MAX_RESPONSE_BYTES,
    SourceError,
    count_results,
    decode_document,
    over_node_cap,
)
from .credentials import Credentials
from .http import HTTPReader

__all__ = ["PrometheusSource", "Vector", "parse_vector", "parse_vectors"]


class _Sample(msgspec.Struct):
    metric: dict[str, str] = msgspec.field(default_factory=dict)
    value: tuple[float, str] | None = None


class _Labels(msgspec.Struct):
    metric: dict[str, str] = msgspec.field(default_factory=dict)


S = TypeVar("S")  # a sample: _Sample, or msgspec.Raw to decode each alone


class _Data(msgspec.Struct, Generic[S]):
    resultType: str = ""
    result: list[S] = msgspec.field(default_factory=list)


class _Response(msgspec.Struct, Generic[S]):
    status: str = ""
    data: _Data[S] | None = None
    error: str = ""


_decoder = msgspec.json.Decoder(_Response[_Sample])
_lenient_decoder = msgspec.json.Decoder(_Response[msgspec.Raw])
_sample_decoder = msgspec.json.Decoder(_Sample)
_labels_decoder = msgspec.json.Decoder(_Labels)


class Vector(msgspec.Struct, frozen=True):
    """One query's answer: node -> percent (``value * 100``, not checked yet), node ->
    why its sample is not a number, the newest sample time (0: none) and node -> its
    sample's time."""

    values: dict[str, float]
    malformed: dict[str, str]
    newest: float
    stamps: dict[str, float] = msgspec.field(default_factory=dict)


def parse_vector(
    body: bytes | bytearray, node_label: str, *, max_nodes: int = DEFAULT_MAX_NODES
) -> Vector:
    """One instant query's answer; SourceError when it is not a vector or holds more
    than ``max_nodes`` series."""
    count = count_results(body, "a Prometheus query response", max_nodes)
    if count is not None and count > max_nodes:  # before any sample is built
        raise over_node_cap("Prometheus query response", count, max_nodes)
    doc = decode_document(body, _decoder, _lenient_decoder, "a Prometheus query response")
    if doc.status != "success" or doc.data is None:
        raise SourceError(f"Prometheus query failed: {doc.error or doc.status}")
    if doc.data.resultType != "vector":
        raise SourceError(f"Prometheus query returned {doc.data.resultType}, want vector")
    if len(doc.data.result) > max_nodes:
        raise over_node_cap("Prometheus query response", len(doc.data.result), max_nodes)
    values: dict[str, float] = {}
    stamps: dict[str, float] = {}
    malformed: dict[str, str] = {}
    newest = 0.0
    for item in doc.data.result:
        if isinstance(item, msgspec.Raw):  # the lenient pass: this sample alone
            try:
                sample = _sample_decoder.decode(item)
            except msgspec.DecodeError as exc:
                try:
                    labels = _labels_decoder.decode(item).metric
                except msgspec.DecodeError:
                    continue  # not even labels to refuse it under
                if node := labels.get(node_label):
                    malformed[node] = f"sample unusable: {exc}"
                continue
        else:
            sample = item
        node = sample.metric.get(node_label)
        if not node or sample.value is None:
            continue
        stamp, text = sample.value
        try:
            value = float(text)
        except ValueError:
            malformed[node] = f"value {shown(text)} is not a number"
            continue
        # a fraction beyond 1e306 would overflow to inf as a percentage: kept as it is,
        # it is refused as over capacity (or negative), which is what it is
        values[node] = value * 100 if abs(value) < 1e306 else value
        stamps[node] = stamp
        newest = max(newest, stamp)
    return Vector(values, malformed, newest, stamps)


def parse_vectors(
    cpu: bytes | bytearray,
    memory: bytes | bytearray,
    node_label: str,
    *,
    fetched_at: float | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> LoadSnapshot:
    """The checked snapshot (``readings.validated``) of the CPU and memory queries'
    answers; SourceError when either is not a vector or holds more than ``max_nodes``
    series."""
    return _combined(
        parse_vector(cpu, node_label, max_nodes=max_nodes),
        parse_vector(memory, node_label, max_nodes=max_nodes),
        time.time() if fetched_at is None else fetched_at,
    )


def _combined(cpu_v: Vector, mem_v: Vector, now: float) -> LoadSnapshot:
    """The checked snapshot of a CPU and a memory answer read at ``now``."""
    invalid = {
        node: InvalidReading(MALFORMED, f"{resource} {why}")
        for resource, vector in (("memory", mem_v), ("cpu", cpu_v))  # cpu's said if both
        for node, why in vector.malformed.items()
    }
    nodes = {
        name: NodeLoad(ResourceLoad(cpu_v.values.get(name)), ResourceLoad(mem_v.values.get(name)))
        for name in cpu_v.values.keys() | mem_v.values.keys()
    }
    measured_at = {
        name: min(cpu_v.stamps.get(name, math.inf), mem_v.stamps.get(name, math.inf))
        for name in nodes
    }
    window_end = max(cpu_v.newest, mem_v.newest) or now
    return validated(
        LoadSnapshot("prometheus", window_end, now, nodes, invalid=invalid, measured_at=measured_at)
    )


class PrometheusSource:
    name = "prometheus"

    def __init__(
        self,
        url: str,
        *,
        cpu_query: str = "instance:node_cpu:ratio",
        memory_query: str = "instance:node_memory_utilisation:ratio",
        node_label: str = "instance",
        timeout: float = 10.0,
        credentials: Credentials | None = None,
        max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_nodes: int = DEFAULT_MAX_NODES,
    ) -> None:
        self._http = HTTPReader(
            url.rstrip("/") + "/api/v1/query",
            what="Prometheus",
            timeout=timeout,
            max_bytes=max_bytes,
            credentials=credentials,
        )
        self.url = self._http.shown_url  # what may be shown: no credentials
        self.cpu_query = cpu_query
        self.memory_query = memory_query
        self.node_label = node_label
        self.max_nodes = max_nodes

    async def _vector(self, query: str) -> Vector:
        try:
            body = await self._http.get({"query": query})
            return parse_vector(body, self.node_label, max_nodes=self.max_nodes)
        except SourceError as exc:
            raise SourceError(f"Prometheus {query!r}: {exc}") from None

    async def fetch(self) -> LoadSnapshot:
        # one answer decoded before the next is read: one body in memory at a time
        cpu = await self._vector(self.cpu_query)
        memory = await self._vector(self.memory_query)
        return _combined(cpu, memory, time.time())

    async def close(self) -> None:
        await self._http.close()
