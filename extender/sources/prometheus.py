"""Prometheus instant queries, one per resource (node CPU and memory utilisation).

Each query must return a vector with one sample per node, valued as a fraction
(0..1) of the node's capacity, labelled with the node name. The defaults are the
recording rules load-watcher's Prometheus provider reads
(``instance:node_cpu:ratio``, ``instance:node_memory_utilisation:ratio``), keyed
by the ``instance`` label; set ``node_label`` when your relabeling names nodes
another way (for example a ``node`` label added by relabeling).
"""

from __future__ import annotations

import time

import aiohttp
import msgspec

from ..model import LoadSnapshot, NodeLoad, ResourceLoad
from .base import SourceError

__all__ = ["PrometheusSource", "parse_vector"]


class _Sample(msgspec.Struct):
    metric: dict[str, str] = msgspec.field(default_factory=dict)
    value: tuple[float, str] | None = None


class _Data(msgspec.Struct):
    resultType: str = ""
    result: list[_Sample] = msgspec.field(default_factory=list)


class _Response(msgspec.Struct):
    status: str = ""
    data: _Data | None = None
    error: str = ""


_decoder = msgspec.json.Decoder(_Response)


def parse_vector(body: bytes, node_label: str) -> tuple[dict[str, float], float]:
    """Map node -> percent, and the newest sample time."""
    try:
        doc = _decoder.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise SourceError(f"not a Prometheus query response: {exc}") from None
    if doc.status != "success" or doc.data is None:
        raise SourceError(f"Prometheus query failed: {doc.error or doc.status}")
    if doc.data.resultType != "vector":
        raise SourceError(f"Prometheus query returned {doc.data.resultType}, want vector")
    values: dict[str, float] = {}
    newest = 0.0
    for sample in doc.data.result:
        node = sample.metric.get(node_label)
        if not node or sample.value is None:
            continue
        stamp, text = sample.value
        try:
            values[node] = float(text) * 100
        except ValueError:
            continue
        newest = max(newest, stamp)
    return values, newest


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

    async def _query(self, query: str) -> tuple[dict[str, float], float]:
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
        except TimeoutError:
            raise SourceError(f"Prometheus {self.url}: timed out") from None
        return parse_vector(body, self.node_label)

    async def fetch(self) -> LoadSnapshot:
        cpu, cpu_at = await self._query(self.cpu_query)
        mem, mem_at = await self._query(self.memory_query)
        now = time.time()
        nodes = {
            name: NodeLoad(ResourceLoad(cpu.get(name)), ResourceLoad(mem.get(name)))
            for name in set(cpu) | set(mem)
        }
        return LoadSnapshot("prometheus", max(cpu_at, mem_at) or now, now, nodes)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
