"""What each pod really uses: the second stream beside the nodes' load.

Two shapes of reading, both parsed here into one ``PodUsageReading`` (pod
``namespace/name`` -> ``PodUsage``):

- ``metrics.k8s.io/v1beta1`` PodMetrics (``GET /apis/metrics.k8s.io/v1beta1/pods``),
  one item per pod with a ``usage`` per container, a ``timestamp`` and a
  ``window``; metrics-server computes them from the kubelets' resource metrics every
  ``--metric-resolution`` (15 s by default).
- Prometheus instant vectors of cAdvisor's per-container series (a CPU rate and the
  memory working set), labelled ``namespace``, ``pod`` and ``container``; the
  pod-level (``container=""``) and sandbox (``container="POD"``) series are left
  out by the queries, so the containers add up to the pod.

Cluster data is untrusted: a pod with a usage that is not a quantity, negative or
beyond int64 (``quantity.cpu_millis`` / ``memory_bytes``) is left out alone and
named in ``invalid``; the other pods are kept. The store holds at most
``max_pods`` pods (the least recently measured go first), so a cluster of any
size costs bounded memory.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

import msgspec

from .exceptions import QuantityError
from .quantity import cpu_millis, memory_bytes, shown
from .wire import timestamp

__all__ = [
    "MAX_PODS",
    "PodUsage",
    "PodUsageReading",
    "PodUsageStore",
    "parse_pod_metrics",
    "parse_pod_vectors",
]

# A cluster of 5,000 nodes at 110 pods each (the upstream limits, "Considerations for
# large clusters") holds 550,000 pods at most; past this many, the least recently
# measured pods are dropped. About 150 bytes a pod: some 30 MB when full.
MAX_PODS = 200_000


class PodUsage(msgspec.Struct, frozen=True):
    """One pod's measured use: CPU millicores, memory bytes, and ``at``, the time the
    figure covers up to (unix seconds), ``window`` the seconds it is a rate over."""

    cpu_millis: float
    memory_bytes: float
    at: float
    window: float = 0.0


class PodUsageReading(msgspec.Struct, frozen=True):
    """One poll's pods (``namespace/name`` -> use) and those refused (-> why)."""

    pods: Mapping[str, PodUsage]
    invalid: Mapping[str, str] = msgspec.field(default_factory=dict)
    fetched_at: float = 0.0


def _parse_duration(value: str) -> float:
    """A Go duration as metrics-server writes a window ("15s", "1m0s", "10.5s"); 0 if
    it is not one (the window is informative only)."""
    total, number = 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    i = 0
    while i < len(value):
        ch = value[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = "ms" if value.startswith("ms", i) else ch
        if unit not in units or not number:
            return 0.0
        try:
            total += float(number) * units[unit]
        except ValueError:
            return 0.0
        number = ""
        i += len(unit)
    return total if not number else 0.0


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""


class _Container(msgspec.Struct):
    name: str = ""
    usage: dict[str, str | int | float] = msgspec.field(default_factory=dict)


class _PodMetrics(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    timestamp: str = ""
    window: str = ""
    containers: list[_Container] | None = None


class _List(msgspec.Struct):
    items: list[msgspec.Raw] | None = None  # each decoded alone: a bad one is refused alone


_decoder = msgspec.json.Decoder(_List)
_item = msgspec.json.Decoder(_PodMetrics)


class _Named(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


_name_decoder = msgspec.json.Decoder(_Named)


def _sum_containers(item: _PodMetrics) -> tuple[int, int]:
    cpu = memory = 0
    for i, container in enumerate(item.containers or ()):
        for resource, parse in (("cpu", cpu_millis), ("memory", memory_bytes)):
            value = container.usage.get(resource)
            if value is None:
                continue
            try:
                amount = parse(value)
            except QuantityError as exc:
                raise QuantityError(f"containers[{i}].usage.{resource}: {exc}") from None
            if resource == "cpu":
                cpu += amount
            else:
                memory += amount
    return cpu, memory


def parse_pod_metrics(body: bytes, *, fetched_at: float | None = None) -> PodUsageReading:
    """A PodMetricsList as one reading. ValueError (msgspec.DecodeError) when the body is
    not a list at all; an item of the wrong shape, or with an unusable figure, is refused
    alone (when its name can be read). An item without a timestamp counts as of the
    fetch."""
    now = time.time() if fetched_at is None else fetched_at
    doc = _decoder.decode(body)
    pods: dict[str, PodUsage] = {}
    invalid: dict[str, str] = {}
    for raw in doc.items or ():
        try:
            item = _item.decode(raw)
        except msgspec.DecodeError as exc:
            try:
                meta = _name_decoder.decode(raw).metadata
            except msgspec.DecodeError:
                continue  # not even a name to refuse it under
            if meta.name:
                invalid[f"{meta.namespace}/{meta.name}"] = f"PodMetrics unusable: {exc}"
            continue
        meta = item.metadata
        if not meta.name:
            continue
        key = f"{meta.namespace}/{meta.name}"
        try:
            cpu, memory = _sum_containers(item)
        except QuantityError as exc:
            invalid[key] = str(exc)
            continue
        stamp = timestamp(item.timestamp)
        pods[key] = PodUsage(
            float(cpu),
            float(memory),
            min(stamp, now) if stamp else now,
            _parse_duration(item.window),
        )
    return PodUsageReading(pods, invalid, now)


def parse_pod_vectors(
    cpu: Mapping[tuple[str, str], tuple[float, float]],
    memory: Mapping[tuple[str, str], tuple[float, float]],
    *,
    fetched_at: float | None = None,
) -> PodUsageReading:
    """Per pod sums of per-container samples: ``cpu`` maps (namespace/pod, container) to
    (sample time, cores), ``memory`` to (sample time, bytes). A value that is negative
    or not finite refuses its pod alone."""
    now = time.time() if fetched_at is None else fetched_at
    sums: dict[str, list[float]] = {}
    invalid: dict[str, str] = {}
    for resource, vector in (("cpu", cpu), ("memory", memory)):
        for (pod, container), (stamp, value) in vector.items():
            if pod in invalid:
                continue
            if not (value >= 0.0 and value < 9.2e18):  # NaN fails both
                invalid[pod] = f"container {shown(container)}: {resource} {value!r} unusable"
                sums.pop(pod, None)
                continue
            entry = sums.setdefault(pod, [0.0, 0.0, 0.0])
            if resource == "cpu":
                entry[0] += value * 1000.0
            else:
                entry[1] += value
            entry[2] = max(entry[2], stamp)
    pods = {pod: PodUsage(c, m, min(at, now) if at else now) for pod, (c, m, at) in sums.items()}
    return PodUsageReading(pods, invalid, now)


class PodUsageStore:
    """The latest use of every pod measured, at most ``max_pods`` of them (the least
    recently measured dropped first); a pod absent from a reading keeps its last figure
    until ``forget`` (the pod watch says it is gone) or the cap drops it."""

    def __init__(self, max_pods: int = MAX_PODS) -> None:
        if max_pods < 1:
            raise ValueError(f"max_pods must be >= 1, got {max_pods}")
        self._max = max_pods
        self._pods: dict[str, PodUsage] = {}
        self.last_reading: float | None = None
        """When the last reading was taken (its ``fetched_at``); None before any."""
        self.invalid: Mapping[str, str] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def __iter__(self) -> Iterator[str]:
        return iter(self._pods)

    def get(self, pod: str) -> PodUsage | None:
        return self._pods.get(pod)

    def update(self, reading: PodUsageReading) -> list[str]:
        """Take a reading; the pods whose figure changed, in the reading's order."""
        changed = []
        pods = self._pods
        for key, usage in reading.pods.items():
            old = pods.pop(key, None)
            pods[key] = usage  # re-inserted last: the order is by last measurement
            if old != usage:
                changed.append(key)
        for key in reading.invalid:
            pods.pop(key, None)
        while len(pods) > self._max:
            del pods[next(iter(pods))]
        self.last_reading = reading.fetched_at
        self.invalid = reading.invalid
        return changed

    def forget(self, pod: str) -> None:
        self._pods.pop(pod, None)
