"""Where each pod's use comes from: PodMetrics through the API, or cAdvisor's
per-container series in Prometheus (``podusage`` parses and checks both)."""

from __future__ import annotations

from typing import Protocol

import msgspec

from ..kubeapi import KubeAPI
from ..podusage import PodUsageReading, parse_pod_metrics, parse_pod_vectors
from .base import (
    DEFAULT_MAX_CONTAINERS,
    DEFAULT_MAX_PODS,
    DEFAULT_MAX_RESPONSE_BYTES,
    Entry,
    SourceError,
    count_items,
    count_results,
    counted,
    get_from_api,
)
from .credentials import Credentials
from .http import HTTPReader

__all__ = [
    "CPU_QUERY",
    "MEMORY_QUERY",
    "PATH",
    "PodMetricsSource",
    "PodUsageSource",
    "PrometheusPodUsageSource",
    "parse_container_vector",
]

PATH = "/apis/metrics.k8s.io/v1beta1/pods"
# cAdvisor's series as the kubelet exports them: container="" is the pod's cgroup total
# and container="POD" the sandbox (pause) container, both left out so that the
# containers add up to the pod once.
CPU_QUERY = (
    'sum by (namespace, pod, container) (rate(container_cpu_usage_seconds_total{container!="",'
    'container!="POD"}[1m]))'
)
MEMORY_QUERY = (
    'sum by (namespace, pod, container) (container_memory_working_set_bytes{container!="",'
    'container!="POD"})'
)


class PodUsageSource(Protocol):
    name: str

    async def fetch(self) -> PodUsageReading: ...

    async def close(self) -> None: ...


class _CountedPod(msgspec.Struct, gc=False):
    """A PodMetrics read only to count it and its containers (base.Entry's way)."""

    containers: list[Entry] | None = None


class _CountedPods(msgspec.Struct, gc=False):
    items: list[_CountedPod | None | bool | int | float | str] | None = None


_pod_counter = msgspec.json.Decoder(_CountedPods)


class PodMetricsSource:
    """``metrics.k8s.io/v1beta1`` PodMetrics of every namespace, through the API server."""

    name = "metrics.k8s.io"

    def __init__(
        self,
        api: KubeAPI,
        *,
        max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_pods: int = DEFAULT_MAX_PODS,
        max_containers: int = DEFAULT_MAX_CONTAINERS,
    ) -> None:
        self._api = api
        self.max_bytes = max_bytes
        self.max_pods = max_pods
        self.max_containers = max_containers

    async def fetch(self) -> PodUsageReading:
        # a PodMetrics item is some 400 bytes: the 16 MiB default cap holds about 40,000
        body = await get_from_api(self._api, PATH, self.max_bytes, "pod metrics")
        self._check_counts(body)
        try:
            reading = parse_pod_metrics(body)
        except msgspec.DecodeError as exc:
            raise SourceError(f"pod metrics: not a PodMetricsList: {exc}") from None
        if len(reading.pods) + len(reading.invalid) > self.max_pods:
            raise self._too_many(len(reading.pods) + len(reading.invalid))
        return reading

    def _check_counts(self, body: bytes) -> None:
        """Pods, then their containers, counted before any is built (``base.counted``):
        pods first with the cheaper counter (an item with a field to count costs half as
        much again as one without: 228 against 142 MiB for 16 MiB of ``{}`` items)."""
        what = "pod metrics: a PodMetricsList"
        pods = count_items(body, what, self.max_pods)
        if pods is not None and pods > self.max_pods:
            raise self._too_many(pods)
        doc = counted(_pod_counter, body, what, self.max_containers)
        if doc is None:
            return
        items = doc.items or ()
        containers = sum(len(i.containers or ()) for i in items if isinstance(i, _CountedPod))
        if containers > self.max_containers:
            raise SourceError(
                f"pod metrics: PodMetricsList holds {containers} containers, over "
                f"{self.max_containers} (four a pod at the pod cap)"
            )

    def _too_many(self, count: int) -> SourceError:
        return SourceError(
            f"pod metrics: PodMetricsList holds {count} items, over {self.max_pods} "
            "(the most pods a cluster may have)"
        )

    async def close(self) -> None:
        return None


class _Sample(msgspec.Struct):
    metric: dict[str, str] = msgspec.field(default_factory=dict)
    value: tuple[float, str] | None = None


class _Data(msgspec.Struct):
    resultType: str = ""
    result: list[msgspec.Raw] = msgspec.field(default_factory=list)


class _Response(msgspec.Struct):
    status: str = ""
    data: _Data | None = None
    error: str = ""


_response = msgspec.json.Decoder(_Response)
_sample = msgspec.json.Decoder(_Sample)

Samples = dict[tuple[str, str], tuple[float, float]]


def parse_container_vector(body: bytes) -> Samples:
    """(namespace/pod, container) -> (sample time, value) of an instant vector; SourceError
    when the answer is not a successful vector. A sample without the labels, or whose
    value is not a number, is skipped (a NaN value is kept, for ``parse_pod_vectors`` to
    refuse its pod)."""
    what = "Prometheus pod usage: a query response"
    count = count_results(body, what, DEFAULT_MAX_CONTAINERS)
    if count is not None and count > DEFAULT_MAX_CONTAINERS:  # before any sample is built
        raise SourceError(
            f"Prometheus pod usage: {count} series, over {DEFAULT_MAX_CONTAINERS} "
            "(four containers a pod at the most pods a cluster may have)"
        )
    try:
        doc = _response.decode(body)
    except msgspec.DecodeError as exc:
        raise SourceError(f"Prometheus pod usage: not a query response: {exc}") from None
    if doc.status != "success" or doc.data is None:
        raise SourceError(f"Prometheus pod usage query failed: {doc.error or doc.status}")
    if doc.data.resultType != "vector":
        raise SourceError(f"Prometheus pod usage query returned {doc.data.resultType}")
    out: Samples = {}
    for raw in doc.data.result:
        try:
            sample = _sample.decode(raw)
        except msgspec.DecodeError:
            continue
        labels = sample.metric
        ns, pod, container = labels.get("namespace"), labels.get("pod"), labels.get("container")
        if not ns or not pod or not container or container == "POD" or sample.value is None:
            continue
        stamp, text = sample.value
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        out[(f"{ns}/{pod}", container)] = (stamp, value)
    return out


class PrometheusPodUsageSource:
    """cAdvisor's per-container CPU rate and working set, summed per pod; read as the
    load source reads Prometheus (``http.HTTPReader``: its credentials, a bounded body,
    no redirects)."""

    name = "prometheus"

    def __init__(
        self,
        url: str,
        *,
        cpu_query: str = CPU_QUERY,
        memory_query: str = MEMORY_QUERY,
        timeout: float = 10.0,
        credentials: Credentials | None = None,
        max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self._http = HTTPReader(
            url.rstrip("/") + "/api/v1/query",
            what="Prometheus pod usage",
            timeout=timeout,
            max_bytes=max_bytes,
            credentials=credentials,
        )
        self.url = self._http.shown_url
        self.cpu_query = cpu_query
        self.memory_query = memory_query

    async def fetch(self) -> PodUsageReading:
        # one answer parsed before the next is read: one body in memory at a time
        cpu = parse_container_vector(bytes(await self._http.get({"query": self.cpu_query})))
        memory = parse_container_vector(bytes(await self._http.get({"query": self.memory_query})))
        return parse_pod_vectors(cpu, memory)

    async def close(self) -> None:
        await self._http.close()
