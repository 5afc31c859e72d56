"""What a pod will use before any measurement can show it.

Two estimators, each matching a published implementation so their test vectors
apply:

- :func:`estimate_usage` follows Koordinator's default estimator
  (pkg/scheduler/plugins/loadaware/estimator/default_estimator.go): the larger of
  limit and request, scaled by a factor (cpu 85 %, memory 70 %), capped at the
  limit; a pod that declares nothing is assumed to use 250m and 200Mi. Its
  request and limit are the pod's as Kubernetes computes them (:func:`pod_amounts`:
  sidecars, init containers, pod-level resources, overhead).
- :func:`filter_usage` is what the *filter* counts for a pod the measurement cannot
  show yet: CPU at its request (never more than the estimate), memory at the estimate
  (see its docstring for why).
- :func:`predict_tlp_cpu` is Trimaran TargetLoadPacking's PredictUtilisation:
  the CPU limit, else the request times a multiplier (1.5), else 1000m, per
  container of ``spec.containers`` (Trimaran reads no init container), plus the
  pod overhead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import msgspec

from .exceptions import QuantityError
from .model import NodeState, PodLoad, ResourceLoad, Usage
from .quantity import cpu_millis, memory_bytes
from .wire import Container, Pod, QuantityValue

__all__ = [
    "CPU_FACTOR",
    "DEFAULT_CPU_MILLIS",
    "DEFAULT_MEMORY_BYTES",
    "MEMORY_FACTOR",
    "PEAK_SIGMAS",
    "REQUEST_RULE",
    "TLP_DEFAULT_CPU_MILLIS",
    "TLP_REQUESTS_MULTIPLIER",
    "TLP_TARGET_UTILIZATION",
    "Amounts",
    "Demand",
    "check_pod",
    "demand_after",
    "used_after",
    "EstimatorArgs",
    "GUESSED",
    "PodFacts",
    "TLPArgs",
    "estimate_usage",
    "filter_usage",
    "go_round",
    "pod_amounts",
    "pod_facts",
    "peak_percent",
    "pod_limits",
    "pod_requests",
    "pod_load",
    "predict_tlp_cpu",
]

DEFAULT_CPU_MILLIS = 250
DEFAULT_MEMORY_BYTES = 200 * 1024 * 1024


def go_round(x: float) -> int:
    """Go's math.Round: half away from zero (Python's round() is half-to-even)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


Amounts = dict[str, int]
"""Parsed cpu (millicores) and memory (bytes); a resource not declared is absent."""

RESOURCES = ("cpu", "memory")
RESTART_ALWAYS = "Always"


def _parse(values: Mapping[str, QuantityValue] | None, path: str) -> Amounts:
    """The cpu and memory in a requests/limits/overhead map, each checked by
    ``cpu_millis``/``memory_bytes``; a QuantityError names the field (``path.cpu``)."""
    out: Amounts = {}
    if not values:
        return out
    for resource in RESOURCES:
        if resource in values:
            parse = cpu_millis if resource == "cpu" else memory_bytes
            try:
                out[resource] = parse(values[resource])
            except QuantityError as exc:
                raise QuantityError(f"{path}.{resource}: {exc}") from None
    return out


def _add(into: Amounts, more: Amounts) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _max(into: Amounts, other: Amounts) -> None:
    for name, value in other.items():
        if name not in into or value > into[name]:
            into[name] = value


def _container(container: Container, kind: str, path: str) -> Amounts:
    res = container.resources
    if res is None:
        return {}
    return _parse(res.requests if kind == "requests" else res.limits, f"{path}.resources.{kind}")


def pod_amounts(pod: Pod, kind: str) -> Amounts:
    """The pod's effective ``requests`` or ``limits`` of cpu and memory, computed as
    Kubernetes does (k8s.io/component-helpers/resource helpers.go ``PodRequests`` and
    ``PodLimits``, the rule the scheduler's NodeResourcesFit uses; the Kubernetes docs
    "Sidecar containers", section "Resource sharing within containers", state it):

    1. Sum over ``spec.containers``.
    2. Init containers in order. A native sidecar (``restartPolicy: Always``) keeps
       running, so it is added to that sum *and* to a running total of the sidecars
       started so far. While init container *i* runs, the pod uses its own amount
       plus every sidecar started before it (a sidecar's own step counts the sidecars
       up to and including it). The pod's amount is the larger of the sum and the
       largest of these steps, per resource.
    3. Pod-level ``spec.resources`` (PodLevelResources): a cpu or memory value set there
       replaces the container total for that resource (limits likewise).
    4. ``spec.overhead`` is added: to requests always, to limits only where the pod
       has a non-zero limit for that resource.

    A resource nobody declares is absent from the result (no limit is not 0).
    Raises QuantityError naming the field (``pod.spec.containers[0].resources.requests.cpu``)
    for an amount that is garbage, negative, not finite or beyond int64.
    """
    spec = pod.spec
    total: Amounts = {}
    for i, container in enumerate(spec.containers or ()):
        _add(total, _container(container, kind, f"pod.spec.containers[{i}]"))
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for i, container in enumerate(spec.initContainers or ()):
        own = _container(container, kind, f"pod.spec.initContainers[{i}]")
        if container.restartPolicy == RESTART_ALWAYS:
            _add(total, own)
            _add(sidecars, own)
            step = dict(sidecars)
        else:
            step = dict(own)
            _add(step, sidecars)
        _max(init_peak, step)
    _max(total, init_peak)
    if spec.resources is not None:
        pod_level = spec.resources.requests if kind == "requests" else spec.resources.limits
        total.update(_parse(pod_level, f"pod.spec.resources.{kind}"))
    overhead = _parse(spec.overhead, "pod.spec.overhead")
    for name, value in overhead.items():
        if kind == "requests" or total.get(name):
            total[name] = total.get(name, 0) + value
    return total


def check_pod(pod: Pod) -> None:
    """Parse every cpu and memory amount the estimators read, so that a request
    whose Pod holds an unusable one is refused before any decision (QuantityError
    names the field)."""
    pod_amounts(pod, "requests")
    pod_amounts(pod, "limits")


def pod_requests(pod: Pod, resource: str) -> int:
    """The pod's effective request of ``resource`` (see ``pod_amounts``), 0 if none."""
    return pod_amounts(pod, "requests").get(resource, 0)


def pod_limits(pod: Pod, resource: str) -> int:
    """The pod's effective limit of ``resource`` (see ``pod_amounts``), 0 if none."""
    return pod_amounts(pod, "limits").get(resource, 0)


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
    return _estimate(pod_amounts(pod, "requests"), pod_amounts(pod, "limits"), args)


def filter_usage(requests: Amounts, estimate: Usage) -> Usage:
    """What the filter counts for a pod that is placed but not yet in a measurement
    (and for the pod being filtered): CPU at its request, capped at the estimate (at
    the estimate when it requests none: 250m for a pod that declares nothing);
    memory at the estimate.

    The estimate, max(request, limit) x 85 % cpu / 70 % memory, is built to steer,
    and for CPU it is far off: a pod asking 100m with a 500m limit counts 425m.
    Summed over a stream it can exceed a node that is really half idle, and a
    filter rejection is hard: kube-scheduler parks the pod as unschedulable until a
    cluster event or its periodic flush retries it, minutes later. Measured in the
    placement benchmark (docs/placement.md, strong-weak: 48 pods of 100m requested,
    200m used, 500m limit, at 2 a second): counted at the estimate, the filter
    rejected every node ("cpu 100% > 90%") at 45 % real CPU use and left 21 pods
    Pending. CPU is compressible: a node past the threshold throttles, and the next
    reading shows it. Memory is not: past the node's memory the kernel kills. And
    memory limits sit close to real use, so the estimate is the better figure there
    (hog: 128Mi requested, 256Mi limit, 179Mi estimated, 200Mi used; counted at the
    request, TargetLoadPacking, which scores CPU only, put 9 pods on a node at 75 %
    memory, 97 % after, where the estimate stops it at 7). The scores keep the
    estimate for both and still steer the stream away from the nodes it would fill."""
    cpu = requests.get("cpu", 0)
    return Usage(
        min(cpu, estimate.cpu_millis) if cpu > 0 else estimate.cpu_millis,
        estimate.memory_bytes,
    )


def pod_load(pod: Pod, args: EstimatorArgs | None = None, tlp: TLPArgs | None = None) -> PodLoad:
    """What a bound pod counts on its node until a reading holds it: :func:`estimate_usage`,
    :func:`filter_usage` and :func:`predict_tlp_cpu`."""
    return _load(pod, pod_amounts(pod, "requests"), args, tlp)


def _load(pod: Pod, requests: Amounts, args: EstimatorArgs | None, tlp: TLPArgs | None) -> PodLoad:
    usage = _estimate(requests, pod_amounts(pod, "limits"), args or EstimatorArgs())
    return PodLoad(usage, filter_usage(requests, usage), float(predict_tlp_cpu(pod, tlp)))


def _estimate(requests: Amounts, limits: Amounts, args: EstimatorArgs) -> Usage:
    return Usage(
        cpu_millis=_estimate_one(
            requests.get("cpu", 0), limits.get("cpu", 0), args.cpu_factor, args.default_cpu_millis
        ),
        memory_bytes=_estimate_one(
            requests.get("memory", 0),
            limits.get("memory", 0),
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
    for i, container in enumerate(pod.spec.containers or ()):
        path = f"pod.spec.containers[{i}]"
        limit = _container(container, "limits", path).get("cpu", 0)
        request = _container(container, "requests", path).get("cpu", 0)
        if limit:
            total += limit
        elif request:
            total += go_round(request * args.requests_multiplier)
        else:
            total += args.default_cpu_millis
    return total + _parse(pod.spec.overhead, "pod.spec.overhead").get("cpu", 0)


REQUEST_RULE = "request rule"
"""A pod estimated from its own requests and limits (``pod_load``), not from measurements."""
GUESSED = ("cpu", "memory")
"""``PodFacts.guessed`` of a pod estimated by the request rule: every figure."""


class PodFacts(msgspec.Struct, frozen=True):
    """A pod's numbers, computed once per request and shared by every node."""

    key: str
    name: str
    namespace: str
    usage: Usage
    tlp_cpu_millis: int
    cpu_request_millis: int
    memory_request_bytes: int
    load: PodLoad | None = None
    """What the pod counts on a node once placed there (:func:`pod_load`: the herding
    ledger's figures, the filter's among them); None (a hand-built PodFacts): ``usage``
    for both the scores and the filter."""
    how: str = REQUEST_RULE
    """How ``usage`` was estimated: ``REQUEST_RULE`` from the pod's own spec, or as
    ``inflight.InFlight.estimate`` found it (learned, implied), looked up once per request
    and read by the decision log, the herding count and the Event."""
    guessed: tuple[str, ...] = GUESSED
    """The resources (``cpu``, ``memory``) whose figure in ``usage`` is the request rule's,
    not a measurement: both for the request rule, none for a learned figure, ``cpu`` for a
    figure implied from node readings that held too little of a CPU window to imply CPU
    (``inflight.implied``). The scores read it (``policies.least_used.full_by_guess``)."""

    def placed(self) -> PodLoad:
        """``load``, built once per pod shape by :func:`pod_facts`."""
        if self.load is not None:
            return self.load
        return PodLoad(self.usage, self.usage, self.tlp_cpu_millis)


def pod_facts(
    pod: Pod, estimator: EstimatorArgs | None = None, tlp: TLPArgs | None = None
) -> PodFacts:
    requests = pod_amounts(pod, "requests")
    load = _load(pod, requests, estimator, tlp)
    return PodFacts(
        key=pod.key,
        name=pod.metadata.name,
        namespace=pod.metadata.namespace,
        usage=load.usage,
        tlp_cpu_millis=int(load.tlp_cpu_millis),
        cpu_request_millis=requests.get("cpu", 0),
        memory_request_bytes=requests.get("memory", 0),
        load=load,
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


def used_after(measured: float, pending: float, own: float) -> float:
    """A node's use with a pod on it: the measured use and the pods pending, at least 0
    (pods gone since the reading, ``ledger``, can take off more than it held), then the
    pod's own. The one sum both the general path and the fast path make, in this order."""
    before = measured + pending
    return (before if before > 0.0 else 0.0) + own


PEAK_SIGMAS = 1.0
"""How many standard deviations above its mean a node's measured use counts, where the
source reports a deviation (load-watcher's Prometheus and SignalFx providers, over its
15-minute window): ``peak_percent``. One, as Trimaran LoadVariationRiskBalancing's default
(safeVarianceMargin 1, safeVarianceSensitivity 1): for a use that swings between two
levels half the time each, mean + 1 deviation is the upper level exactly. Scored by the
mean alone, a node whose memory swings between 1 and 5 GiB looks like one that holds
3 GiB, and gets as many pods: in the lab's steady-vary scenario least-used's hottest
node sat at 100 % for the whole stream, as the request-counting scheduler's did."""


def peak_percent(load: ResourceLoad, sigmas: float) -> float | None:
    """A reading's use as the scores and the filter count it: its mean plus ``sigmas``
    standard deviations when the source reports one (none: the mean alone); None without
    a mean."""
    if load.avg is None:
        return None
    if not sigmas or not load.std:
        return load.avg
    return load.avg + sigmas * load.std


def demand_after(
    resource: str,
    pod: PodFacts,
    node: NodeState,
    *,
    filtering: bool = False,
    sigmas: float = 0.0,
) -> Demand | None:
    """Measured use (a percentage of capacity, as sources report it; ``sigmas``: plus
    that many standard deviations, :func:`peak_percent`) plus pods not yet measured plus
    this pod, for ``cpu`` or ``memory``; None without data. The pods are counted at their
    estimate, or with ``filtering`` at the filter's figure (:func:`filter_usage`)."""
    load = node.load.cpu if resource == "cpu" else node.load.memory
    measured = peak_percent(load, sigmas)
    if measured is None:
        return None
    info = node.info
    if info is None:
        return Demand(measured, 100.0)
    pending, own = node.pending, pod.usage
    if filtering:
        pending = node.pending_request or pending
        own = pod.load.request if pod.load is not None else own
    if resource == "cpu":
        capacity, allocatable = info.cpu_capacity_millis, info.cpu_allocatable_millis
        waiting, extra = pending.cpu_millis, own.cpu_millis
    else:
        capacity, allocatable = info.memory_capacity_bytes, info.memory_allocatable_bytes
        waiting, extra = pending.memory_bytes, own.memory_bytes
    return Demand(used_after(measured * capacity / 100, waiting, extra), allocatable)
