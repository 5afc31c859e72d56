"""What a pod will use before any measurement can show it.

Two estimators, each matching a published implementation so their test vectors
apply:

- :func:`estimate_usage` follows Koordinator's default estimator
  (pkg/scheduler/plugins/loadaware/estimator/default_estimator.go): the larger of
  limit and request, scaled by a factor (cpu 85 %, memory 70 %), capped at the
  limit; a pod that declares nothing is assumed to use 250m and 200Mi.
- :func:`predict_tlp_cpu` is Trimaran TargetLoadPacking's PredictUtilisation:
  the CPU limit, else the request times a multiplier (1.5), else 1000m, per
  container, plus the pod overhead.
"""

from __future__ import annotations

import math

import msgspec

from .model import NodeState, Usage
from .quantity import cpu_millis, memory_bytes
from .wire import Container, Pod

__all__ = [
    "CPU_FACTOR",
    "DEFAULT_CPU_MILLIS",
    "DEFAULT_MEMORY_BYTES",
    "MEMORY_FACTOR",
    "TLP_DEFAULT_CPU_MILLIS",
    "TLP_REQUESTS_MULTIPLIER",
    "TLP_TARGET_UTILIZATION",
    "Demand",
    "demand_after",
    "EstimatorArgs",
    "PodFacts",
    "TLPArgs",
    "estimate_usage",
    "go_round",
    "pod_facts",
    "pod_limits",
    "pod_requests",
    "predict_tlp_cpu",
]

DEFAULT_CPU_MILLIS = 250
DEFAULT_MEMORY_BYTES = 200 * 1024 * 1024


def go_round(x: float) -> int:
    """Go's math.Round: half away from zero (Python's round() is half-to-even)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def _container_value(container: Container, kind: str, resource: str) -> int:
    res = container.resources
    if res is None:
        return 0
    values = res.requests if kind == "requests" else res.limits
    if not values or resource not in values:
        return 0
    parse = cpu_millis if resource == "cpu" else memory_bytes
    return parse(values[resource])


def _overhead(pod: Pod, resource: str) -> int:
    overhead = pod.spec.overhead or {}
    if resource not in overhead:
        return 0
    return (cpu_millis if resource == "cpu" else memory_bytes)(overhead[resource])


def pod_requests(pod: Pod, resource: str) -> int:
    """The pod's effective request: sum over containers, at least each init
    container's, plus overhead (kube-scheduler's computation)."""
    total = sum(_container_value(c, "requests", resource) for c in pod.spec.containers or ())
    for init in pod.spec.initContainers or ():
        total = max(total, _container_value(init, "requests", resource))
    return total + _overhead(pod, resource)


def pod_limits(pod: Pod, resource: str) -> int:
    total = sum(_container_value(c, "limits", resource) for c in pod.spec.containers or ())
    for init in pod.spec.initContainers or ():
        total = max(total, _container_value(init, "limits", resource))
    return total + (_overhead(pod, resource) if total else 0)


# Koordinator's estimator defaults: a pod uses this percentage of its request/limit.
CPU_FACTOR = 85.0
MEMORY_FACTOR = 70.0
# Trimaran TargetLoadPacking's defaults (pkg/apis/config/v1 defaults.go).
TLP_TARGET_UTILIZATION = 40.0
TLP_DEFAULT_CPU_MILLIS = 1000
TLP_REQUESTS_MULTIPLIER = 1.5


class EstimatorArgs(msgspec.Struct, frozen=True):
    cpu_factor: float = CPU_FACTOR
    memory_factor: float = MEMORY_FACTOR
    default_cpu_millis: int = DEFAULT_CPU_MILLIS
    default_memory_bytes: int = DEFAULT_MEMORY_BYTES


def _estimate_one(request: int, limit: int, factor: float, default: int) -> int:
    quantity = limit if limit > request else request
    if quantity == 0:
        return default
    estimate = go_round(quantity * factor / 100)
    if limit > 0:
        estimate = min(estimate, limit)
    return estimate


def estimate_usage(pod: Pod, args: EstimatorArgs | None = None) -> Usage:
    args = args or EstimatorArgs()
    return Usage(
        cpu_millis=_estimate_one(
            pod_requests(pod, "cpu"),
            pod_limits(pod, "cpu"),
            args.cpu_factor,
            args.default_cpu_millis,
        ),
        memory_bytes=_estimate_one(
            pod_requests(pod, "memory"),
            pod_limits(pod, "memory"),
            args.memory_factor,
            args.default_memory_bytes,
        ),
    )


class TLPArgs(msgspec.Struct, frozen=True):
    default_cpu_millis: int = TLP_DEFAULT_CPU_MILLIS
    requests_multiplier: float = TLP_REQUESTS_MULTIPLIER
    target_utilization: float = TLP_TARGET_UTILIZATION


def predict_tlp_cpu(pod: Pod, args: TLPArgs | None = None) -> int:
    args = args or TLPArgs()
    total = 0
    for container in pod.spec.containers or ():
        limit = _container_value(container, "limits", "cpu")
        request = _container_value(container, "requests", "cpu")
        if limit:
            total += limit
        elif request:
            total += go_round(request * args.requests_multiplier)
        else:
            total += args.default_cpu_millis
    return total + _overhead(pod, "cpu")


class PodFacts(msgspec.Struct, frozen=True):
    """A pod's numbers, computed once per request and shared by every node."""

    key: str
    name: str
    namespace: str
    usage: Usage
    tlp_cpu_millis: int
    cpu_request_millis: int
    memory_request_bytes: int


def pod_facts(
    pod: Pod, estimator: EstimatorArgs | None = None, tlp: TLPArgs | None = None
) -> PodFacts:
    return PodFacts(
        key=pod.key,
        name=pod.metadata.name,
        namespace=pod.metadata.namespace,
        usage=estimate_usage(pod, estimator),
        tlp_cpu_millis=predict_tlp_cpu(pod, tlp),
        cpu_request_millis=pod_requests(pod, "cpu"),
        memory_request_bytes=pod_requests(pod, "memory"),
    )


class Demand(msgspec.Struct, frozen=True):
    """A node's use of one resource with the pod on it, against what it can give.

    Absolute (millicores, bytes) when the node's size is known; when it is not,
    only the measured percentage is, so ``used`` is that percentage of 100.
    """

    used: float
    allocatable: float

    @property
    def percent(self) -> float:
        return 100 * self.used / self.allocatable if self.allocatable else 100.0


def demand_after(resource: str, pod: PodFacts, node: NodeState) -> Demand | None:
    """Measured use (a percentage of capacity, as sources report it) plus pods
    not yet measured plus this pod, for ``cpu`` or ``memory``; None without data."""
    load = node.load.cpu if resource == "cpu" else node.load.memory
    if load.avg is None:
        return None
    info = node.info
    if info is None:
        return Demand(load.avg, 100.0)
    if resource == "cpu":
        capacity, allocatable = info.cpu_capacity_millis, info.cpu_allocatable_millis
        extra = node.pending.cpu_millis + pod.usage.cpu_millis
    else:
        capacity, allocatable = info.memory_capacity_bytes, info.memory_allocatable_bytes
        extra = node.pending.memory_bytes + pod.usage.memory_bytes
    return Demand(load.avg * capacity / 100 + extra, allocatable)
