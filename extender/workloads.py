"""Which workload a pod belongs to, and what that workload's pods really use.

A workload is one revision of one controller: the pod's controller
ownerReference (``controller: true``; its uid, else kind/name) and its revision
label, ``pod-template-hash`` (a Deployment's ReplicaSet) or
``controller-revision-hash`` (StatefulSet, DaemonSet). Pods of one revision run
the same template, so their use is the best guess for a new sibling's (Katalyst's
load-aware plugin predicts a new pod from its owner workload's history for the
same reason). Pods without a controller are siblings when their namespace and their
containers (names, images, requests and limits) are the same: pods made from one
template by a script or a tool that sets no ownerReference (the placement benchmark's
one-shot scenarios create theirs so).

``LearnedUsage`` keeps, per workload, its pods' recent measured use and answers a
high percentile of it (p90 by default, nearest rank) over a recent window; memory
is bounded (workloads, samples per workload) and a workload nobody measured within
the window is forgotten.

Before any of a workload's pods is measured on its own (metrics-server lists a pod from
its second scrape, 15-30 s after it starts), what node readings say of its pods can
stand in: ``Learner.imply`` keeps one such figure (``inflight.implied``), answered only
while the workload has no measurement of its own and dropped at its first one.
"""

from __future__ import annotations

import hashlib
import math
from collections import deque

import msgspec

from .model import Usage
from .wire import Pod

__all__ = [
    "MAX_SAMPLES",
    "MAX_WORKLOADS",
    "REVISION_LABELS",
    "LearnedUsage",
    "Learner",
    "owner_key",
    "percentile",
    "template_key",
    "workload_key",
]

REVISION_LABELS = ("pod-template-hash", "controller-revision-hash")
# A Deployment of 100 replicas measured every 15 s fills this in under 40 s; the
# percentile then reads its latest 512 samples, which is plenty for a p90.
MAX_SAMPLES = 512
MAX_WORKLOADS = 10_000


def owner_key(pod: Pod) -> str | None:
    """The pod's controller, ``namespace/uid`` (``namespace/kind/name`` without a uid);
    None for a pod without one."""
    meta = pod.metadata
    for ref in meta.ownerReferences or ():
        if ref.controller:
            ident = ref.uid or f"{ref.kind}/{ref.name}"
            return f"{meta.namespace}/{ident}" if ident != "/" else None
    return None


_template_encoder = msgspec.json.Encoder()


def template_key(pod: Pod) -> str:
    """A pod without a controller's workload: ``namespace/~`` and a digest of its
    containers and init containers as the extender reads them (name, image, resources)."""
    spec = pod.spec
    shape = _template_encoder.encode((spec.initContainers, spec.containers, spec.resources))
    digest = hashlib.blake2b(shape, digest_size=8).hexdigest()
    return f"{pod.metadata.namespace}/~{digest}"


def workload_key(pod: Pod) -> str:
    """The pod's workload: its controller and revision label (``owner_key`` plus
    ``@hash``; the controller alone when it sets neither label, as a Job does); for a pod
    without a controller, its template (``template_key``)."""
    owner = owner_key(pod)
    if owner is None:
        return template_key(pod)
    labels = pod.metadata.labels or {}
    for name in REVISION_LABELS:
        value = labels.get(name)
        if value:
            return f"{owner}@{value}"
    return owner


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values`` (not empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


class _Workload:
    __slots__ = ("cached", "implied", "samples")

    def __init__(self) -> None:
        self.samples: deque[tuple[float, float, float]] = deque(maxlen=MAX_SAMPLES)
        self.cached: tuple[float, Usage] | None = None  # (as of, estimate)
        # (as of, figure, whether its CPU was implied too): ``Learner.imply``
        self.implied: tuple[float, Usage, bool] | None = None

    def last(self) -> float:
        """When the workload was last measured or implied; -inf: never."""
        times = [self.samples[-1][0]] if self.samples else []
        if self.implied is not None:
            times.append(self.implied[0])
        return max(times, default=-math.inf)


class LearnedUsage(msgspec.Struct, frozen=True):
    """Settings of the learned estimate (see ``Learner``)."""

    percentile: float = 90.0
    window_seconds: float = 600.0
    max_workloads: int = MAX_WORKLOADS


class Learner:
    """Per workload, its pods' measured use over the last ``window_seconds``."""

    def __init__(self, settings: LearnedUsage | None = None) -> None:
        self.settings = settings or LearnedUsage()
        if not 0 < self.settings.percentile <= 100:
            raise ValueError(f"percentile must be in (0, 100], got {self.settings.percentile}")
        if self.settings.window_seconds <= 0:
            raise ValueError(f"window_seconds must be > 0, got {self.settings.window_seconds}")
        if self.settings.max_workloads < 1:
            raise ValueError(f"max_workloads must be >= 1, got {self.settings.max_workloads}")
        self._table: dict[str, _Workload] = {}

    def __len__(self) -> int:
        return len(self._table)

    def observe(self, workload: str, usage: Usage, at: float) -> None:
        """One measurement of one of ``workload``'s pods."""
        entry = self._table.pop(workload, None)
        if entry is None:
            entry = _Workload()
        self._table[workload] = entry  # last: the table's order is by last measurement
        entry.samples.append((at, usage.cpu_millis, usage.memory_bytes))
        entry.cached = None
        entry.implied = None  # its pods' own figures from now on
        self._bound()

    def imply(self, workload: str, usage: Usage, at: float, *, cpu: bool = True) -> bool:
        """What node readings say one of ``workload``'s pods uses (``inflight.implied``),
        kept only while none of its pods has been measured within the window: True when
        kept. ``cpu``: whether the readings implied its CPU too (else ``usage``'s CPU is
        the request rule's, ``cpu_guessed``): then a CPU figure implied earlier within the
        window is kept beside the new memory. A reading holds a pod's memory from its first
        sample and its CPU only over a 15 s rate window, so a later reading can imply the
        memory of a workload's newest pods alone; taken as it came, it turned the CPU the
        readings had shown back into the request rule's guess."""
        if self.measured(workload, at):
            return False
        entry = self._table.pop(workload, None) or _Workload()
        self._table[workload] = entry
        before = entry.implied
        if not cpu and before is not None and before[2]:
            if before[0] >= at - self.settings.window_seconds:
                usage, cpu = Usage(before[1].cpu_millis, usage.memory_bytes), True
        entry.implied = (at, usage, cpu)
        self._bound()
        return True

    def _bound(self) -> None:
        while len(self._table) > self.settings.max_workloads:
            del self._table[next(iter(self._table))]

    def cpu_guessed(self, workload: str) -> bool:
        """Whether ``workload``'s figure is implied without its CPU (``imply``'s ``cpu``),
        as ``lookup`` last found it."""
        entry = self._table.get(workload)
        return (
            entry is not None
            and not entry.samples
            and entry.implied is not None
            and not entry.implied[2]
        )

    def measured(self, workload: str | None, now: float) -> bool:
        """Whether ``workload``'s estimate comes from its pods' own figures (not implied)."""
        found = self.lookup(workload, now) if workload is not None else None
        return found is not None and found[1]

    def estimate(self, workload: str, now: float) -> Usage | None:
        """The percentile of the workload's samples within the window, else the figure
        implied for it within the window (``imply``); None when it has neither (never
        measured, or not lately)."""
        found = self.lookup(workload, now)
        return None if found is None else found[0]

    def lookup(self, workload: str, now: float) -> tuple[Usage, bool] | None:
        """``estimate`` and whether it is the workload's own figures (True) or implied
        (False), in one look at the table."""
        entry = self._table.get(workload)
        if entry is None:
            return None
        cut = now - self.settings.window_seconds
        samples = entry.samples
        while samples and samples[0][0] < cut:
            samples.popleft()
            entry.cached = None
        if entry.implied is not None and entry.implied[0] < cut:
            entry.implied = None
        if not samples:
            if entry.implied is not None:
                return entry.implied[1], False
            del self._table[workload]
            return None
        if entry.cached is not None:
            return entry.cached[1], True
        q = self.settings.percentile
        usage = Usage(
            percentile([s[1] for s in samples], q), percentile([s[2] for s in samples], q)
        )
        entry.cached = (now, usage)
        return usage, True

    def prune(self, now: float) -> None:
        """Forget the workloads with no sample within the window."""
        cut = now - self.settings.window_seconds
        for name in [n for n, e in self._table.items() if e.last() < cut]:
            del self._table[name]
