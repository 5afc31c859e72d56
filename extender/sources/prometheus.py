"""Prometheus instant queries, one per resource (node CPU and memory utilisation).

Each query must return a vector with one sample per node, valued as a fraction
(0..1) of the node's capacity, labelled with the node name. The defaults are the
recording rules load-watcher's Prometheus provider reads
(``instance:node_cpu:ratio``, ``instance:node_memory_utilisation:ratio``), keyed
by the ``instance`` label; set ``node_label`` when your relabeling names nodes
another way (for example a ``node`` label added by relabeling).

Sample values are strings in the HTTP API and may be ``"NaN"``, ``"+Inf"`` or ``"-Inf"``
(a rule dividing by zero yields them); such a value, a negative one, one above 1 and
one that is not a number refuse that node alone (``readings``), and the newest sample
time counts as no later than the fetch.
"""

from __future__ import annotations

import asyncio
import time
from typing import Generic, TypeVar

import aiohttp
import msgspec

from ..model import InvalidReading, LoadSnapshot, NodeLoad, ResourceLoad
from ..quantity import shown
from ..readings import MALFORMED, validated
from .base import SourceError, decode_document

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
    why its sample is not a number, and the newest sample time (0: none)."""

    values: dict[str, float]
    malformed: dict[str, str]
    newest: float


def parse_vector(body: bytes, node_label: str) -> Vector:
    """One instant query's answer; SourceError when it is not a vector."""
    doc = decode_document(body, _decoder, _lenient_decoder, "a Prometheus query response")
    if doc.status != "success" or doc.data is None:
        raise SourceError(f"Prometheus query failed: {doc.error or doc.status}")
    if doc.data.resultType != "vector":
        raise SourceError(f"Prometheus query returned {doc.data.resultType}, want vector")
    values: dict[str, float] = {}
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
        newest = max(newest, stamp)
    return Vector(values, malformed, newest)


def parse_vectors(
    cpu: bytes, memory: bytes, node_label: str, *, fetched_at: float | None = None
) -> LoadSnapshot:
    """The checked snapshot (``readings.validated``) of the CPU and memory queries'
    answers; SourceError when either is not a vector."""
    now = time.time() if fetched_at is None else fetched_at
    cpu_v, mem_v = parse_vector(cpu, node_label), parse_vector(memory, node_label)
    invalid = {
        node: InvalidReading(MALFORMED, f"{resource} {why}")
        for resource, vector in (("memory", mem_v), ("cpu", cpu_v))  # cpu's said if both
        for node, why in vector.malformed.items()
    }
    nodes = {
        name: NodeLoad(ResourceLoad(cpu_v.values.get(name)), ResourceLoad(mem_v.values.get(name)))
        for name in cpu_v.values.keys() | mem_v.values.keys()
    }
    window_end = max(cpu_v.newest, mem_v.newest) or now
    return validated(LoadSnapshot("prometheus", window_end, now, nodes, invalid=invalid))


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
    ) -> None:
        self.url = url.rstrip("/") + "/api/v1/query"
        self.cpu_query = cpu_query
        self.memory_query = memory_query
        self.node_label = node_label
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def _query(self, query: str) -> bytes:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.get(self.url, params={"query": query}) as response:
                body = await response.read()
                if response.status != 200:
                    raise SourceError(
                        f"Prometheus {query!r}: HTTP {response.status}: {body[:200]!r}"
                    )
        except aiohttp.ClientError as exc:
            raise SourceError(f"Prometheus {self.url}: {exc}") from None
        except asyncio.TimeoutError:
            raise SourceError(f"Prometheus {self.url}: timed out") from None
        return body

    async def fetch(self) -> LoadSnapshot:
        cpu = await self._query(self.cpu_query)
        memory = await self._query(self.memory_query)
        return parse_vectors(cpu, memory, self.node_label)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
