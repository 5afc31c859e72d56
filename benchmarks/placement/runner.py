"""Runs a scenario against a contender on the lab: the I/O half of the benchmark.

For each (scenario, contender): the scenario's kwok nodes are (re)created with their
background usage, the pods of earlier runs deleted, and the run waits until metrics-server
shows every node back at its background and load-watcher (restarted, so that it collects
at once instead of up to a minute later) reports them all: every contender starts from the
same observed state. Then the contender's scheduler starts, the pods are created as bare
pods with its schedulerName (their actual usage as kwok usage annotations) at the
scenario's pace, and a watch on the pods records, on this process's clock, when each pod
is first seen bound. A node that joins does so once the given number of pods are bound.

Two variants, chosen by the scenario:

- ``backlog: true``: every pod is created before the contender's scheduler starts, so
  pods/s is the scheduler draining its queue (measures.timing with ``started``), not the
  benchmark's own creation rate.
- ``descheduler:``: each workload is a ReplicaSet (the descheduler's DefaultEvictor never
  evicts a bare pod) scaled up at the workload's pace, and the lab's descheduler runs with
  the Ansible role's policy (descheduler_policy) from the first pod until a while after
  the last is bound; the watch records every eviction (pod, node, when), and the
  replacements the ReplicaSets create are waited for and timed like the others.
- ``steady:``: a stream of ReplicaSet pods, each deleted at the end of its lifetime and
  replaced, for a fixed duration, with the descheduler only for a contender that brings
  it (benchmarks/placement/steady.py).

Pods and nodes carry the label BENCH_LABEL (the scenario's name) and pods select nodes by
it, so the lab's own nodes (lab/fakenodes.py DEFAULT_NODES) stay as they are and get no
benchmark pod: the smoke test shares the lab with the other end-to-end tests.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import random
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from benchmarks.placement.exceptions import RunError
from benchmarks.placement.scenario import Node, Scenario, Workload
from benchmarks.procstat import cpu_seconds
from lab import Lab, LabError, prometheus, rendered
from lab.components import start_load_watcher
from lab.fakenodes import USAGE_CPU, USAGE_MEMORY, NodeSpec, node_object, plain_number
from lab.processes import stop_child, wait_for
from loadwise.extender import kubeobjects

BENCH_LABEL = "loadwise.dev/bench"
NAMESPACE = "default"
CREATORS = 8  # concurrent pod creations for "all at once"
# How close to its background a node must read before a run starts: memory is a gauge,
# exact; CPU is a rate over metrics-server's 15 s window (lab/cluster.py set_background).
SETTLE_MEMORY = 0.01
SETTLE_CPU = 0.03
REPO = Path(__file__).resolve().parents[2]
# What the Ansible role writes, so that the benchmark runs the descheduler an operator gets.
# How long the replacements of evicted pods may take to be bound once the descheduler stops.
REPLACEMENT_SECONDS = 60.0
T = TypeVar("T")


@dataclass(frozen=True)
class Launched:
    """What a contender's ``start`` yields: when its scheduler was launched (monotonic) and
    the pids of the processes that decide, the scheduler's first (then its extender's)."""

    at: float
    pids: tuple[int, ...]


class Starter(Protocol):
    """What the runner needs of a contender (benchmarks/placement/contenders.py)."""

    @property
    def name(self) -> str: ...

    @property
    def scheduler_name(self) -> str: ...

    @property
    def descheduler(self) -> bool:
        """The contender runs the lab's descheduler beside its scheduler (steady runs)."""
        ...

    def start(self, lab: Lab, workdir: Path, *, source: str = "metrics-server") -> Any:
        """Start the scheduler (and extender) against ``lab``, reading load as a scenario
        whose load source is ``source`` does (``steady.source``)."""
        ...


@dataclass
class RunResult:
    scenario: str
    contender: str
    bindings: dict[str, str] = field(default_factory=dict)  # pod -> node
    created: dict[str, float] = field(default_factory=dict)  # pod -> monotonic seconds
    bound_at: dict[str, float] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)  # pods deleted during the run
    error: str | None = None
    seconds: float = 0.0
    # pod -> workload, for pods named by a ReplicaSet (bare pods carry it in their name)
    workloads: dict[str, str] = field(default_factory=dict)
    placed: dict[str, str] = field(default_factory=dict)  # pod -> node it was first bound to
    # Evictions in the order seen: {"pod", "node", "at"} (monotonic seconds).
    evictions: list[dict[str, Any]] = field(default_factory=list)
    # When the contender's scheduler was launched (monotonic), for backlog runs.
    scheduler_started: float | None = None
    # Pods left unbound at the end: their PodScheduled condition's message -> how many.
    pending: dict[str, int] = field(default_factory=dict)
    # Provenance: None in results written before it was recorded ("unknown").
    commit: str | None = None  # full hash of HEAD when the run started
    clean: bool | None = None  # `git status --porcelain` printed nothing
    ran_at: str | None = None  # UTC start, ISO 8601
    load_start: list[float] | None = None  # os.getloadavg() at the start: 1, 5, 15 min
    load_end: list[float] | None = None
    # Which of the invocation's repeats this run was (0-based) and the order's seed.
    repeat: int | None = None
    seed: int | None = None
    # From the contender's own /metrics (DecisionWatch): when it had decided every pod
    # (monotonic, None if it never did or was not sampled), and its scheduling-algorithm
    # time (filter and score, extenders included) over the pods it decided.
    decided_at: float | None = None
    # The first sample that saw a decision: [monotonic time, pods decided by then].
    first_decided: list[float] | None = None
    # CPU seconds the scheduler and its extender (if any) used together from that first
    # sample to the one that saw the last decision: the cost of deciding, which the
    # machine's other load barely changes (wall time it does).
    decide_cpu_seconds: float | None = None
    # Of which the extender's own process (None: a contender without one).
    extender_cpu_seconds: float | None = None
    algorithm_seconds: float | None = None
    algorithm_pods: int | None = None
    # Steady runs: the stream's span (monotonic), when each pod was first seen going,
    # the pods the runner deleted at the end of their lifetime (the rest of the deleted
    # were evicted), and the background changes as applied ({"node", "memory", "at"}).
    stream: list[float] | None = None
    gone_at: dict[str, float] = field(default_factory=dict)
    expired: list[str] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)
    # Steady runs: the run's trace (trace.Trace.to_json: the key every draw follows from,
    # and the ramp's arrivals; None before traces were drawn per run) and the stream's
    # duration as run (`--duration` overrides the scenario's; None: the scenario's).
    trace: dict[str, Any] | None = None
    duration: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "contender": self.contender,
            "bindings": self.bindings,
            "created": self.created,
            "bound_at": self.bound_at,
            "deleted": self.deleted,
            "error": self.error,
            "seconds": self.seconds,
            "workloads": self.workloads,
            "placed": self.placed,
            "evictions": self.evictions,
            "scheduler_started": self.scheduler_started,
            "pending": self.pending,
            "commit": self.commit,
            "clean": self.clean,
            "ran_at": self.ran_at,
            "load_start": self.load_start,
            "load_end": self.load_end,
            "repeat": self.repeat,
            "seed": self.seed,
            "decided_at": self.decided_at,
            "first_decided": self.first_decided,
            "decide_cpu_seconds": self.decide_cpu_seconds,
            "extender_cpu_seconds": self.extender_cpu_seconds,
            "algorithm_seconds": self.algorithm_seconds,
            "algorithm_pods": self.algorithm_pods,
            "stream": self.stream,
            "gone_at": self.gone_at,
            "expired": self.expired,
            "changes": self.changes,
            "trace": self.trace,
            "duration": self.duration,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunResult:
        # Keys missing from older files take the dataclass defaults (None: unknown).
        return cls(**d)


@dataclass(frozen=True)
class Provenance:
    """What a run was measured on: the checkout and when, not the machine's load."""

    commit: str | None
    clean: bool | None
    ran_at: str


def _git(*args: str) -> str | None:
    try:
        p = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def provenance() -> Provenance:
    """HEAD and whether the whole tree is clean (untracked files count: a new module the
    benchmark imports changes what ran as much as an edit does)."""
    status = _git("status", "--porcelain")
    return Provenance(
        commit=_git("rev-parse", "HEAD"),
        clean=None if status is None else status == "",
        ran_at=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def stamp(result: RunResult, prov: Provenance, load_start: list[float]) -> RunResult:
    """Record where and when `result` ran, with the load average now as its end."""
    result.commit, result.clean, result.ran_at = prov.commit, prov.clean, prov.ran_at
    result.load_start, result.load_end = load_start, list(os.getloadavg())
    return result


def run_order(pairs: Sequence[T], repeats: int, seed: int) -> list[tuple[T, int]]:
    """`repeats` rounds, each every pair once in an order shuffled by `seed`: the pair and
    its round. Rounds rather than one shuffle of everything: a slow spell of the shared
    machine then falls on every contender's n runs alike instead of on one's."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    rng = random.Random(seed)
    out: list[tuple[T, int]] = []
    for k in range(repeats):
        round_ = list(pairs)
        rng.shuffle(round_)
        out += [(p, k) for p in round_]
    return out


def log_line(msg: str) -> None:
    """One progress line of the benchmark on stdout."""
    print(f"placement: {msg}", flush=True)


# ------------------------------------------------------------------ objects


def node_spec(node: Node, scenario: str) -> dict[str, Any]:
    spec = NodeSpec(
        node.name,
        cpu=plain_number(node.capacity.cpu),
        memory=plain_number(node.capacity.memory),
        pods=node.pods,
        background_cpu=plain_number(node.background.cpu),
        background_memory=plain_number(node.background.memory),
        labels={BENCH_LABEL: scenario},
    )
    return node_object(spec)


def _pod_parts(w: Workload, scenario: str, scheduler_name: str) -> dict[str, Any]:
    """What every pod of workload `w` is, bare or in a ReplicaSet's template."""
    res = {"cpu": plain_number(w.requests.cpu), "memory": plain_number(w.requests.memory)}
    lim = (
        {"cpu": plain_number(w.limits.cpu), "memory": plain_number(w.limits.memory)}
        if w.limits
        else None
    )
    return {
        "containers": [
            kubeobjects.container("app", image="registry.invalid/app:1", requests=res, limits=lim)
        ],
        "node_selector": {BENCH_LABEL: scenario},
        "labels": {BENCH_LABEL: scenario, "app": w.name},
        "annotations": {
            USAGE_CPU: plain_number(w.usage.cpu),
            USAGE_MEMORY: plain_number(w.usage.memory),
        },
        "extra": {"schedulerName": scheduler_name, "terminationGracePeriodSeconds": 0},
    }


def pod_doc(name: str, w: Workload, scenario: str, scheduler_name: str) -> dict[str, Any]:
    doc = kubeobjects.pod(name, namespace=NAMESPACE, **_pod_parts(w, scenario, scheduler_name))
    del doc["metadata"]["uid"]  # the API server assigns it
    doc.pop("status", None)
    return {"apiVersion": "v1", "kind": "Pod", **doc}


def replicaset_doc(
    w: Workload, scenario: str, scheduler_name: str, replicas: int
) -> dict[str, Any]:
    """A ReplicaSet named after the workload whose pods are `w`'s (label app=<workload>)."""
    labels = {BENCH_LABEL: scenario, "app": w.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": w.name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": kubeobjects.pod_template(**_pod_parts(w, scenario, scheduler_name)),
        },
    }


def descheduler_policy(scenario: str) -> dict[str, Any]:
    """The DeschedulerPolicy roles/loadwise_descheduler renders for Kubernetes 1.36 at the
    roles' defaults (lab/rendered.py renders the role's own template), restricted by
    `nodeSelector` to the scenario's nodes so that the lab's own nodes are left alone."""
    return {"nodeSelector": f"{BENCH_LABEL}={scenario}", **rendered.descheduler_policy(36)}


# ------------------------------------------------------------------ the lab's state


def _bench_pods(lab: Lab) -> list[Any]:
    return list(lab.core().list_namespaced_pod(NAMESPACE, label_selector=BENCH_LABEL).items)


def _apps(lab: Lab) -> Any:
    from kubernetes import client

    return client.AppsV1Api(lab.api_client())


# The contenders' schedulers connect as this user (lab.scheduler_kubeconfig).
SCHEDULER_USER = "system:kube-scheduler"
QUEUED = "loadwise-benchmark-schedulers"
# Longer than any backlog's requests at once: a binding and an Event per pod.
QUEUE_LENGTH = 10_000


def queue_scheduler_requests(lab: Lab) -> None:
    """Give the contenders' requests an API Priority and Fairness level that queues them
    all instead of answering 429.

    The contenders run at 500 QPS (contenders.py), and a backlog run starts 2,000 async
    bindings at once. Measured on the lab (2026-11-27, scale-100, stock alone, API server
    and scheduler /metrics every second): the built-in FlowSchema "kube-scheduler" puts
    them in priority level workload-high, 393 executing and 300 queued (6 queues of 50),
    the rest answered 429 (pods/binding and events); client-go retries those after a
    wait, so bindings came back in waves with 10-30 s of nothing between them, and the
    same stock scheduler drained in 9.9 s in one run and 55.1 s in a later one, although
    it had decided every pod within 4.5 s each time. The exempt level is no better: with
    no limit, 900 bindings in flight starved the 2 cores (the scheduler's own cycle took
    twice as long) and stock drained in 22-25 s. This level has workload-high's share of
    seats and one queue long enough for a whole backlog, so the API server works at its
    pace and nothing is refused."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    # Any: the bodies are plain dicts, which the client sends as they are; its annotations
    # name only its model classes (V1FlowSchema, ...).
    api: Any = client.FlowcontrolApiserverV1Api(lab.api_client())
    level = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": QUEUED},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 40,  # workload-high's (the built-in default)
                "limitResponse": {
                    "type": "Queue",
                    "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": QUEUE_LENGTH},
                },
            },
        },
    }
    schema = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": QUEUED},
        "spec": {
            # Before the built-in "kube-scheduler" schema (800): the lowest value matches.
            "matchingPrecedence": 50,
            "priorityLevelConfiguration": {"name": QUEUED},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": SCHEDULER_USER}}],
                    "resourceRules": [
                        {
                            "verbs": ["*"],
                            "apiGroups": ["*"],
                            "resources": ["*"],
                            "namespaces": ["*"],
                            "clusterScope": True,
                        }
                    ],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                }
            ],
        },
    }
    # Made anew each run: a lab kept from an earlier version of this code may hold others.
    # The schema goes first and comes back last, so it never names a missing level.
    for delete in (api.delete_flow_schema, api.delete_priority_level_configuration):
        try:
            delete(QUEUED)
        except ApiException as exc:
            if exc.status != 404:
                raise
    api.create_priority_level_configuration(level)
    api.create_flow_schema(schema)


def delete_replicasets(lab: Lab, timeout: float = 120) -> None:
    """Delete the benchmark's ReplicaSets (their pods are then deleted like bare ones)."""
    apps = _apps(lab)

    def left() -> list[Any]:
        return list(apps.list_namespaced_replica_set(NAMESPACE, label_selector=BENCH_LABEL).items)

    if not left():
        return
    apps.delete_collection_namespaced_replica_set(
        NAMESPACE, label_selector=BENCH_LABEL, propagation_policy="Background"
    )
    wait_for("benchmark ReplicaSets deleted", lambda: not left(), timeout, interval=1)


def delete_pods(lab: Lab, timeout: float = 300) -> None:
    """Delete every benchmark ReplicaSet and pod (grace 0) and wait until they are gone."""
    core = lab.core()
    delete_replicasets(lab)
    if not _bench_pods(lab):
        return
    core.delete_collection_namespaced_pod(
        NAMESPACE, label_selector=BENCH_LABEL, grace_period_seconds=0
    )
    wait_for("benchmark pods deleted", lambda: not _bench_pods(lab), timeout, interval=1)


def delete_nodes(lab: Lab, keep: Collection[str] = ()) -> None:
    core = lab.core()
    names = [n.metadata.name for n in core.list_node(label_selector=BENCH_LABEL).items]
    gone = [n for n in names if n not in keep]
    for n in gone:
        core.delete_node(n)
    if gone:
        wait_for(
            "benchmark nodes deleted",
            lambda: (
                not {x.metadata.name for x in core.list_node(label_selector=BENCH_LABEL).items}
                & set(gone)
            ),
            120,
            interval=1,
        )


def cleanup(lab: Lab) -> None:
    """Leave the lab as found: no benchmark pod or node, no Prometheus of a scenario's and
    load-watcher reading metrics.k8s.io, as `up` starts it."""
    delete_pods(lab)
    delete_nodes(lab)
    if lab.stop("prometheus"):
        restart_load_watcher(lab)


def ensure_nodes(lab: Lab, scenario: Scenario, log: Callable[[str], None]) -> None:
    """The scenario's initial nodes and nothing else labelled BENCH_LABEL; nodes that
    already exist with this scenario's label are kept (same spec: nothing changes them)."""
    core = lab.core()
    have = {
        n.metadata.name: (n.metadata.labels or {}).get(BENCH_LABEL)
        for n in core.list_node(label_selector=BENCH_LABEL).items
    }
    want = {n.name for n in scenario.nodes}
    keep = {n for n, sc in have.items() if n in want and sc == scenario.name}
    delete_nodes(lab, keep)
    new = [n for n in scenario.nodes if n.name not in keep]
    if new:
        log(f"{scenario.name}: creating {len(new)} nodes")
        for n in new:
            core.create_node(node_spec(n, scenario.name))
        lab.wait_nodes_ready([n.name for n in new], timeout=60 + len(new) / 5)


def settled_metrics(lab: Lab, nodes: tuple[Node, ...]) -> bool:
    """True when metrics.k8s.io shows each node at its background usage (no pod's usage
    left over from an earlier run); raises naming the nodes that are not."""
    nm = lab.node_metrics()
    bad = []
    for n in nodes:
        m = nm.get(n.name)
        if m is None:
            bad.append(f"{n.name}: no NodeMetrics")
        elif (
            abs(m["memory"] - n.background.memory) > SETTLE_MEMORY * n.capacity.memory
            or abs(m["cpu"] - n.background.cpu) > SETTLE_CPU * n.capacity.cpu
        ):
            bad.append(f"{n.name}: cpu {m['cpu']:.3f} memory {m['memory'] / 2**30:.2f}Gi")
    if bad:
        raise RunError(f"{len(bad)} nodes not at their background: {'; '.join(bad[:5])}")
    return True


def settled_watcher(lab: Lab, nodes: tuple[Node, ...]) -> bool:
    """True when load-watcher reports every node at its background (percent of capacity)."""
    nmm = lab.watcher().get("data", {}).get("NodeMetricsMap") or {}
    bad = []
    for n in nodes:
        # the metrics-server provider's latest values, or the Prometheus provider's
        # averages (its STD entries share the type)
        got = {
            m["type"]: m["value"]
            for m in (nmm.get(n.name) or {}).get("metrics", [])
            if m.get("operator", "") in ("", "Latest", "AVG")
        }
        want = {
            "CPU": 100 * n.background.cpu / n.capacity.cpu,
            "Memory": 100 * n.background.memory / n.capacity.memory,
        }
        if "CPU" not in got or "Memory" not in got:
            bad.append(f"{n.name}: not reported")
        elif (
            abs(got["Memory"] - want["Memory"]) > 100 * SETTLE_MEMORY
            or abs(got["CPU"] - want["CPU"]) > 100 * SETTLE_CPU
        ):
            bad.append(f"{n.name}: {got}")
    if bad:
        raise RunError(f"load-watcher: {len(bad)} nodes not at background: {'; '.join(bad[:5])}")
    return True


def restart_load_watcher(lab: Lab, prometheus_url: str | None = None) -> None:
    """load-watcher collects once a minute (paypal/load-watcher pkg/watcher/watcher.go,
    FifteenMinutes/TenMinutes/FiveMinutes windows refreshed every minute) and once at
    start: a restart makes it collect now instead of up to a minute later. It reads
    metrics.k8s.io, or the lab's Prometheus at `prometheus_url`."""
    lab.stop("load-watcher")
    binary = lab.binaries(["load-watcher"])["load-watcher"]
    start_load_watcher(lab.procs, lab.kubeconfig, binary, lab.watcher, prometheus_url)


def start_prometheus(lab: Lab, nodes: tuple[Node, ...]) -> str:
    """A new Prometheus for the scenario's nodes (lab/prometheus.py start_for_kwok), once
    both recording rules have a sample for every node; its URL."""
    binary = lab.binaries(["prometheus"])["prometheus"]
    names = [n.name for n in nodes]
    api = prometheus.start_for_kwok(lab.procs, names, binary)
    prometheus.ratios(api, names, timeout=60, proc_check=lab.procs.check_running("prometheus"))
    return api.url


def reset(lab: Lab, scenario: Scenario, log: Callable[[str], None] = log_line) -> None:
    """The scenario's initial state, observed as such by metrics-server and load-watcher."""
    t0 = time.monotonic()
    delete_pods(lab)
    ensure_nodes(lab, scenario, log)
    timeout = 120 + len(scenario.nodes) / 5
    wait_for(
        "metrics.k8s.io at background", lambda: settled_metrics(lab, scenario.nodes), timeout, 2
    )
    # A scenario reading load through Prometheus gets a new one (its averages and deviations
    # then cover this run alone; start_for_kwok stops the last one first); the others none,
    # and load-watcher back on metrics.k8s.io.
    url = None
    if scenario.steady is not None and scenario.steady.source == "prometheus":
        url = start_prometheus(lab, scenario.nodes)
    else:
        lab.stop("prometheus")
    # load-watcher collects once at start and then every minute (pkg/watcher/watcher.go sleeps
    # time.Minute per window): a first collection that read metrics.k8s.io on a loaded machine
    # can miss, and waiting past the next one covers it; three restarts cover a process that
    # came up broken.
    watcher_timeout = 75 + len(scenario.nodes) / 5
    for attempt in range(3):
        restart_load_watcher(lab, url)
        try:
            wait_for(
                "load-watcher at background",
                lambda: settled_watcher(lab, scenario.nodes),
                watcher_timeout,
                2,
            )
            break
        except LabError:
            if attempt == 2:
                raise
    log(f"{scenario.name}: reset in {time.monotonic() - t0:.0f}s")


# ------------------------------------------------------------------ the pod watch


# kube-scheduler observes this histogram once per scheduling cycle, right after the
# algorithm (filter and score, extenders included) chose a node and before the binding,
# which runs asynchronously (pkg/scheduler/schedule_one.go): its count is the pods decided,
# its sum their algorithm time.
ALGORITHM_METRIC = "scheduler_scheduling_algorithm_duration_seconds"


def algorithm_totals(text: str) -> tuple[float, float] | None:
    """(count, sum) of ALGORITHM_METRIC over its series in a /metrics text; None when the
    text has none."""
    from prometheus_client.parser import text_string_to_metric_families

    count = total = 0.0
    seen = False
    for family in text_string_to_metric_families(text):
        if family.name != ALGORITHM_METRIC:
            continue
        for sample in family.samples:
            if sample.name == f"{ALGORITHM_METRIC}_count":
                count += sample.value
                seen = True
            elif sample.name == f"{ALGORITHM_METRIC}_sum":
                total += sample.value
    return (count, total) if seen else None


class DecisionWatch:
    """Samples the running contender's /metrics (every INTERVAL s) and records when it had
    decided `target` pods (monotonic) and its algorithm time over them.

    In a backlog run the drain (the last binding) also waits on the API server writing
    2,000 bindings on the same 2 cores; when the scheduler decided the last pod is its own
    pace, the figure the extender's cost changes directly."""

    INTERVAL = 0.2

    def __init__(self, lab: Lab, target: int, pids: Sequence[int] = ()) -> None:
        self.lab = lab
        self.target = target
        self.pids = tuple(pids)
        # CPU seconds of `pids` together at the first sample with a decision and at the
        # sample that saw the last one; the same of the extender alone (`pids[1:]`).
        self.cpu_first: float | None = None
        self.cpu_decided: float | None = None
        self.extender_cpu_first: float | None = None
        self.extender_cpu_decided: float | None = None
        self.decided_at: float | None = None
        self.first: tuple[float, float] | None = None  # the first sample with a decision
        self.count = 0.0
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="decision-watch")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._sample()  # the last figures, the scheduler still running

    def _sample(self) -> None:
        try:
            got = algorithm_totals(self.lab.scheduler_metrics())
        except (OSError, ValueError):
            return  # not up yet, or busy: the next sample counts
        if got is None:
            return
        self.count, self.seconds = got
        if self.first is None and self.count > 0:
            self.first = (time.monotonic(), self.count)
            self.cpu_first, self.extender_cpu_first = self._cpu()
        if self.decided_at is None and self.count >= self.target:
            self.decided_at = time.monotonic()
            self.cpu_decided, self.extender_cpu_decided = self._cpu()

    def _cpu(self) -> tuple[float | None, float | None]:
        """CPU seconds of all the pids and of the extender's (``pids[1:]``), from one
        read of each process."""
        try:
            each = [cpu_seconds(p) for p in self.pids]
        except (OSError, ValueError, IndexError):
            return None, None  # a process gone: no figure rather than a wrong one
        return (sum(each) if each else None), (sum(each[1:]) if each[1:] else None)

    def _run(self) -> None:
        while not self._stop.wait(self.INTERVAL):
            self._sample()


class BindingWatch:
    """Watches the benchmark's pods and records when each is first seen (its creation, for
    pods a ReplicaSet creates) and first seen bound (this process's monotonic clock), the
    node it was bound to, which pods get deleted (evicted) meanwhile, and where each pod is
    now (``live``: pod -> node or "", without the pods being deleted)."""

    def __init__(self, lab: Lab, scenario: str) -> None:
        self.lab = lab
        self.selector = f"{BENCH_LABEL}={scenario}"
        self.seen_at: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        self.node: dict[str, str] = {}
        self.workload: dict[str, str] = {}
        self.live: dict[str, str] = {}
        self.gone_at: dict[str, float] = {}
        self.deleted: list[str] = []
        self.evictions: list[dict[str, Any]] = []
        self.error: str | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="binding-watch")
        ctx = ssl.create_default_context(cafile=str(lab.pki / "ca.crt"))
        ctx.load_cert_chain(str(lab.pki / "admin.crt"), str(lab.pki / "admin.key"))
        self._ctx = ctx
        self._rv = ""

    def _url(self, **params: str) -> str:
        q = urllib.parse.urlencode({"labelSelector": self.selector, **params})
        return f"{self.lab.server}/api/v1/namespaces/{NAMESPACE}/pods?{q}"

    def _list(self) -> None:
        with urllib.request.urlopen(self._url(), context=self._ctx, timeout=30) as r:
            doc = json.loads(r.read())
        now = time.monotonic()
        for item in doc.get("items", []):
            self._seen(item, now)
        self._rv = doc["metadata"]["resourceVersion"]

    def _seen(self, pod: dict[str, Any], now: float, *, deleted: bool = False) -> None:
        meta = pod["metadata"]
        name = meta["name"]
        node = (pod.get("spec") or {}).get("nodeName") or ""
        with self._cond:
            self.seen_at.setdefault(name, now)
            self.workload.setdefault(name, (meta.get("labels") or {}).get("app", ""))
            if node and name not in self.bound_at:
                self.bound_at[name] = now
                self.node[name] = node
            gone = deleted or bool(meta.get("deletionTimestamp"))
            if gone and name in self.live:
                # The first sign of its end: a ReplicaSet replaces the pod from here on.
                del self.live[name]
                self.deleted.append(name)
                self.gone_at[name] = now
                if node:
                    self.evictions.append({"pod": name, "node": node, "at": now})
            elif not gone:
                self.live[name] = node
            self._cond.notify_all()

    def snapshot(self) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
        """Copies of ``live``, ``bound_at`` and ``workload``, taken together."""
        with self._cond:
            return dict(self.live), dict(self.bound_at), dict(self.workload)

    def bound_now(self) -> int:
        """Pods bound and not being deleted."""
        with self._cond:
            return sum(1 for n in self.live.values() if n)

    def start(self) -> None:
        self._list()
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            url = self._url(
                watch="1", resourceVersion=self._rv, timeoutSeconds="5", allowWatchBookmarks="true"
            )
            try:
                with urllib.request.urlopen(url, context=self._ctx, timeout=30) as r:
                    for line in r:
                        ev = json.loads(line)
                        now = time.monotonic()
                        obj = ev.get("object") or {}
                        if ev.get("type") == "ERROR":
                            # 410 Gone: the resource version is too old; list again.
                            self._list()
                            break
                        self._rv = obj.get("metadata", {}).get("resourceVersion", self._rv)
                        if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                            self._seen(obj, now, deleted=ev["type"] == "DELETED")
            except (OSError, ValueError, KeyError) as exc:
                self.error = f"watch: {exc}"
                time.sleep(0.5)

    def wait_bound(self, count: int, deadline: float) -> bool:
        """Until `count` pods have been bound (each counted once, evicted or not)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: len(self.bound_at) >= count, max(0.0, deadline - time.monotonic())
            )

    def wait_bound_now(self, count: int, deadline: float) -> bool:
        """Until `count` pods are bound at once (the replacements of evicted pods too)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: sum(1 for n in self.live.values() if n) >= count,
                max(0.0, deadline - time.monotonic()),
            )

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


# ------------------------------------------------------------------ one run


def _create(
    lab: Lab, docs: list[dict[str, Any]], created: dict[str, float], rate: float | None
) -> None:
    core = lab.core()

    def one(doc: dict[str, Any]) -> None:
        t = time.monotonic()
        # Raw response: decoding the created Pod into the client's models costs more CPU
        # than the request; read it and hand the connection back to the pool.
        resp = core.create_namespaced_pod(NAMESPACE, doc, _preload_content=False)
        resp.read()
        resp.release_conn()
        created[doc["metadata"]["name"]] = t

    if rate is None:
        with ThreadPoolExecutor(CREATORS) as pool:
            list(pool.map(one, docs))
        return
    t0 = time.monotonic()
    for i, doc in enumerate(docs):
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        one(doc)


def _scale(
    lab: Lab, w: Workload, scenario: str, scheduler_name: str, *, at: Sequence[float] = ()
) -> None:
    """Workload `w` as a ReplicaSet: all its replicas at once, or one more every 1/rate s;
    with `at` (a steady run's trace), replica n at `at[n-1]` seconds after the start."""
    apps = _apps(lab)
    if at:
        if len(at) != w.replicas:
            raise RunError(f"{w.name}: {len(at)} arrivals for {w.replicas} replicas")
        apps.create_namespaced_replica_set(
            NAMESPACE, replicaset_doc(w, scenario, scheduler_name, 0)
        )
        t0 = time.monotonic()
        for n, offset in enumerate(at, 1):
            delay = t0 + offset - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            apps.patch_namespaced_replica_set_scale(w.name, NAMESPACE, {"spec": {"replicas": n}})
        return
    if w.rate is None:
        apps.create_namespaced_replica_set(
            NAMESPACE, replicaset_doc(w, scenario, scheduler_name, w.replicas)
        )
        return
    apps.create_namespaced_replica_set(NAMESPACE, replicaset_doc(w, scenario, scheduler_name, 0))
    t0 = time.monotonic()
    for n in range(1, w.replicas + 1):
        delay = t0 + (n - 1) / w.rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        apps.patch_namespaced_replica_set_scale(w.name, NAMESPACE, {"spec": {"replicas": n}})


DESCHEDULER_PASSED = b'"Number of evictions/requests"'


@contextlib.contextmanager
def descheduler(
    lab: Lab, scenario: str, interval_seconds: float, workdir: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """The lab's descheduler (lab/build, v0.36.0) with descheduler_policy for `scenario`'s
    nodes, logging to workdir/descheduler.log, stopped on exit. Yields once it has made its
    first pass (a contender is up before the pods come, as a scheduler is), so that a short
    run cannot end before the descheduler ever looked."""
    cfg = workdir / "descheduler-policy.yaml"
    cfg.write_text(yaml.safe_dump(descheduler_policy(scenario), sort_keys=False))
    binary = lab.binaries(["descheduler"])["descheduler"]
    path = workdir / "descheduler.log"
    start = path.stat().st_size if path.exists() else 0
    with path.open("ab") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--kubeconfig={lab.kubeconfig}",
                f"--policy-config-file={cfg}",
                f"--descheduling-interval={interval_seconds:g}s",
                "--secure-port=0",
                "--v=3",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        def running() -> None:
            if proc.poll() is not None:
                raise RunError(f"the descheduler exited with {proc.returncode} (log: {path})")

        # logged at the end of every descheduling pass (descheduler.go, v0.36.0), about a
        # second after its start on this machine
        with path.open("rb") as out:
            out.seek(start)
            seen = bytearray()

            def passed() -> bool:
                seen.extend(out.read())
                return DESCHEDULER_PASSED in seen

            wait_for(
                "the descheduler's first pass",
                passed,
                60,
                proc_check=running,
            )
        yield proc
    finally:
        stop_child(proc)


def create_all(
    lab: Lab, scenario: Scenario, scheduler_name: str, created: dict[str, float]
) -> None:
    """Every pod of the scenario as a bare pod, as fast as the client can (backlog mode)."""
    docs = [
        pod_doc(p, w, scenario.name, scheduler_name)
        for w in scenario.workloads
        for p in w.pod_names()
    ]
    _create(lab, docs, created, None)


def place(
    lab: Lab,
    scenario: Scenario,
    scheduler_name: str,
    log: Callable[[str], None] = log_line,
    *,
    watch: BindingWatch | None = None,
    workdir: Path | None = None,
    created: dict[str, float] | None = None,
) -> RunResult:
    """Create the scenario's pods (and join its nodes) with a scheduler already running;
    wait until every pod is bound or the scenario's timeout passes. With `created`, the
    pods exist already (backlog mode: their creation times) and are only waited for. With
    a descheduler in the scenario, it runs meanwhile (logs in `workdir`) and for its
    `seconds` after, then the replacements of the pods it evicted are waited for."""
    result = RunResult(scenario.name, scheduler_name)
    if watch is None:
        watch = BindingWatch(lab, scenario.name)
        watch.start()
    if created is not None:
        result.created = dict(created)
    t0 = time.monotonic()
    deadline = t0 + scenario.timeout_seconds
    total = scenario.pod_count
    with contextlib.ExitStack() as stack:
        desched = None
        if scenario.descheduler is not None:
            desched = stack.enter_context(
                descheduler(
                    lab, scenario.name, scenario.descheduler.interval_seconds, workdir or Path(".")
                )
            )
        try:
            pods = [(w, p) for w in scenario.workloads for p in w.pod_names()]
            joins = list(scenario.joins)
            i = 0
            while i < len(pods) and created is None:
                end = joins[0].after_pods if joins else len(pods)
                while i < end:
                    w = pods[i][0]
                    stop = i
                    while stop < end and pods[stop][0] is w:
                        stop += 1
                    if scenario.owned:
                        if stop - i != w.replicas:
                            raise RunError(f"a join splits workload {w.name}: not with ReplicaSets")
                        _scale(lab, w, scenario.name, scheduler_name)
                    else:
                        docs = [
                            pod_doc(p, w, scenario.name, scheduler_name) for _, p in pods[i:stop]
                        ]
                        _create(lab, docs, result.created, w.rate)
                    i = stop
                if joins:
                    j = joins.pop(0)
                    if not watch.wait_bound(j.after_pods, deadline):
                        raise RunError(
                            f"only {len(watch.bound_at)}/{j.after_pods} pods bound before "
                            f"{j.node.name} was to join"
                        )
                    log(f"{scenario.name}: {j.node.name} joins after {j.after_pods} pods")
                    lab.core().create_node(node_spec(j.node, scenario.name))
                    lab.wait_nodes_ready([j.node.name])
            if not watch.wait_bound(total, deadline):
                result.error = (
                    f"{total - len(watch.bound_at)} of {total} pods not bound after "
                    f"{scenario.timeout_seconds:.0f}s"
                )
            elif desched is not None and scenario.descheduler is not None:
                log(
                    f"{scenario.name}: all bound; the descheduler runs "
                    f"{scenario.descheduler.seconds:.0f}s more"
                )
                time.sleep(scenario.descheduler.seconds)
                if desched.poll() is not None:
                    raise RunError(f"the descheduler exited with {desched.returncode}")
                stack.close()  # stop it, then wait for the replacements
                if not watch.wait_bound_now(total, time.monotonic() + REPLACEMENT_SECONDS):
                    result.error = (
                        f"{total - watch.bound_now()} replacements of {len(watch.evictions)} "
                        f"evicted pods not bound {REPLACEMENT_SECONDS:.0f}s after the "
                        "descheduler stopped"
                    )
        except (RunError, LabError) as exc:
            result.error = str(exc)
        finally:
            watch.stop()
    result.seconds = time.monotonic() - t0
    finish(lab, scenario, result, watch)
    return result


def finish(lab: Lab, scenario: Scenario, result: RunResult, watch: BindingWatch) -> None:
    """Fill `result` from the lab's pods as they are now and from the watch."""
    # The final truth of where pods are (a pod could in principle be rebound after an
    # eviction; the watch's first binding gives the timing).
    final = _bench_pods(lab)
    result.bindings = {
        p.metadata.name: p.spec.node_name
        for p in final
        if p.spec.node_name and not p.metadata.deletion_timestamp
    }
    for p in final:
        if not p.spec.node_name and not p.metadata.deletion_timestamp:
            why = next(
                (
                    f"{c.reason}: {c.message}"
                    for c in p.status.conditions or []
                    if c.type == "PodScheduled" and c.status == "False"
                ),
                "no PodScheduled condition",
            )
            result.pending[why] = result.pending.get(why, 0) + 1
    result.bound_at = dict(watch.bound_at)
    result.placed = dict(watch.node)
    result.deleted = list(watch.deleted)
    result.evictions = list(watch.evictions)
    if scenario.owned:
        result.created = dict(watch.seen_at)
        result.workloads = {p: w for p, w in watch.workload.items() if w}
    result.gone_at = dict(watch.gone_at)
    if watch.error and result.error is None and len(result.bound_at) < scenario.pod_count:
        result.error = watch.error


def save_events(lab: Lab, scenario: Scenario, path: Path, since: datetime.datetime) -> None:
    """The Events about the scenario's pods since `since` (the scheduler's
    FailedScheduling, the extender's scores), one line each: time, pod, reason, reporter,
    message. Earlier runs' pods had the same names (or the same ReplicaSets): the time
    tells them apart."""
    prefixes = tuple(f"{w.name}-" for w in scenario.workloads)
    lines = []
    for ev in lab.core().list_namespaced_event(NAMESPACE).items:
        name = ev.involved_object.name or ""
        when = ev.last_timestamp or ev.event_time or ev.metadata.creation_timestamp
        if ev.involved_object.kind != "Pod" or not name.startswith(prefixes):
            continue
        if when is None or when < since:
            continue
        who = ev.reporting_component or (ev.source.component if ev.source else "") or ""
        msg = " ".join((ev.message or "").split())
        lines.append(f"{when} {name} {ev.reason} x{ev.count or 1} {who}: {msg}")
    path.write_text("\n".join(sorted(lines)) + "\n")
