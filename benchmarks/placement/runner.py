"""Runs a scenario against a contender on the lab: the I/O half of the benchmark.

For each (scenario, contender): the scenario's kwok nodes are (re)created with their
background usage, the pods of earlier runs deleted, and the run waits until metrics-server
shows every node back at its background and load-watcher (restarted, so that it collects
at once instead of up to a minute later) reports them all: every contender starts from the
same observed state. Then the contender's scheduler starts, the pods are created as bare
pods with its schedulerName (their actual usage as kwok usage annotations) at the
scenario's pace, and a watch on the pods records, on this process's clock, when each pod
is first seen bound. A node that joins does so once the given number of pods are bound.

Pods and nodes carry the label BENCH_LABEL (the scenario's name) and pods select nodes by
it, so the lab's own nodes (lab/fakenodes.py DEFAULT_NODES) stay as they are and get no
benchmark pod: the smoke test shares the lab with the other end-to-end tests.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from benchmarks.placement.exceptions import RunError
from benchmarks.placement.scenario import Node, Scenario, Workload
from extender import kubeobjects
from lab import Lab, LabError
from lab.components import start_load_watcher
from lab.fakenodes import USAGE_CPU, USAGE_MEMORY, NodeSpec, node_object, plain_number
from lab.processes import wait_for

BENCH_LABEL = "loadwise.dev/bench"
NAMESPACE = "default"
CREATORS = 8  # concurrent pod creations for "all at once"
# How close to its background a node must read before a run starts: memory is a gauge,
# exact; CPU is a rate over metrics-server's 15 s window (lab/cluster.py set_background).
SETTLE_MEMORY = 0.01
SETTLE_CPU = 0.03


class Starter(Protocol):
    """What the runner needs of a contender (benchmarks/placement/contenders.py)."""

    @property
    def name(self) -> str: ...

    @property
    def scheduler_name(self) -> str: ...

    def start(self, lab: Lab, workdir: Path) -> Any: ...


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
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunResult:
        return cls(**d)


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


def pod_doc(name: str, w: Workload, scenario: str, scheduler_name: str) -> dict[str, Any]:
    res = {"cpu": plain_number(w.requests.cpu), "memory": plain_number(w.requests.memory)}
    lim = (
        {"cpu": plain_number(w.limits.cpu), "memory": plain_number(w.limits.memory)}
        if w.limits
        else None
    )
    doc = kubeobjects.pod(
        name,
        namespace=NAMESPACE,
        containers=[
            kubeobjects.container("app", image="registry.invalid/app:1", requests=res, limits=lim)
        ],
        node_selector={BENCH_LABEL: scenario},
        labels={BENCH_LABEL: scenario, "app": w.name},
        annotations={
            USAGE_CPU: plain_number(w.usage.cpu),
            USAGE_MEMORY: plain_number(w.usage.memory),
        },
        extra={"schedulerName": scheduler_name, "terminationGracePeriodSeconds": 0},
    )
    del doc["metadata"]["uid"]  # the API server assigns it
    doc.pop("status", None)
    return {"apiVersion": "v1", "kind": "Pod", **doc}


# ------------------------------------------------------------------ the lab's state


def _bench_pods(lab: Lab) -> list[Any]:
    return list(lab.core().list_namespaced_pod(NAMESPACE, label_selector=BENCH_LABEL).items)


def delete_pods(lab: Lab, timeout: float = 300) -> None:
    """Delete every benchmark pod (grace 0) and wait until they are gone."""
    core = lab.core()
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
    """Leave the lab as found: no benchmark pod or node."""
    delete_pods(lab)
    delete_nodes(lab)


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
        got = {m["type"]: m["value"] for m in (nmm.get(n.name) or {}).get("metrics", [])}
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


def restart_load_watcher(lab: Lab) -> None:
    """load-watcher collects once a minute (paypal/load-watcher pkg/watcher/watcher.go,
    FifteenMinutes/TenMinutes/FiveMinutes windows refreshed every minute) and once at
    start: a restart makes it collect now instead of up to a minute later."""
    lab.stop("load-watcher")
    binary = lab.binaries(["load-watcher"])["load-watcher"]
    start_load_watcher(lab.procs, lab.kubeconfig, binary, lab.watcher)


def reset(lab: Lab, scenario: Scenario, log: Callable[[str], None] = log_line) -> None:
    """The scenario's initial state, observed as such by metrics-server and load-watcher."""
    t0 = time.monotonic()
    delete_pods(lab)
    ensure_nodes(lab, scenario, log)
    timeout = 120 + len(scenario.nodes) / 5
    wait_for(
        "metrics.k8s.io at background", lambda: settled_metrics(lab, scenario.nodes), timeout, 2
    )
    for attempt in range(3):
        restart_load_watcher(lab)
        try:
            wait_for(
                "load-watcher at background", lambda: settled_watcher(lab, scenario.nodes), 20, 2
            )
            break
        except LabError:
            if attempt == 2:
                raise
    log(f"{scenario.name}: reset in {time.monotonic() - t0:.0f}s")


# ------------------------------------------------------------------ the pod watch


class BindingWatch:
    """Watches the benchmark's pods and records when each is first seen bound (this
    process's monotonic clock) and which pods get deleted (evicted) meanwhile."""

    def __init__(self, lab: Lab, scenario: str) -> None:
        self.lab = lab
        self.selector = f"{BENCH_LABEL}={scenario}"
        self.bound_at: dict[str, float] = {}
        self.node: dict[str, str] = {}
        self.deleted: list[str] = []
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

    def _seen(self, pod: dict[str, Any], now: float) -> None:
        name = pod["metadata"]["name"]
        node = (pod.get("spec") or {}).get("nodeName")
        if node and name not in self.bound_at:
            with self._cond:
                self.bound_at[name] = now
                self.node[name] = node
                self._cond.notify_all()

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
                        if ev.get("type") == "DELETED":
                            with self._cond:
                                self.deleted.append(obj["metadata"]["name"])
                        elif ev.get("type") in ("ADDED", "MODIFIED"):
                            self._seen(obj, now)
            except (OSError, ValueError, KeyError) as exc:
                self.error = f"watch: {exc}"
                time.sleep(0.5)

    def wait_bound(self, count: int, deadline: float) -> bool:
        with self._cond:
            return self._cond.wait_for(
                lambda: len(self.bound_at) >= count, max(0.0, deadline - time.monotonic())
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


def place(
    lab: Lab, scenario: Scenario, scheduler_name: str, log: Callable[[str], None] = log_line
) -> RunResult:
    """Create the scenario's pods (and join its nodes) with a scheduler already running;
    wait until every pod is bound or the scenario's timeout passes."""
    result = RunResult(scenario.name, scheduler_name)
    watch = BindingWatch(lab, scenario.name)
    watch.start()
    t0 = time.monotonic()
    deadline = t0 + scenario.timeout_seconds
    try:
        pods = [(w, p) for w in scenario.workloads for p in w.pod_names()]
        joins = list(scenario.joins)
        i = 0
        while i < len(pods):
            end = joins[0].after_pods if joins else len(pods)
            while i < end:
                w = pods[i][0]
                stop = i
                while stop < end and pods[stop][0] is w:
                    stop += 1
                docs = [pod_doc(p, w, scenario.name, scheduler_name) for _, p in pods[i:stop]]
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
        if not watch.wait_bound(len(pods), deadline):
            result.error = (
                f"{len(pods) - len(watch.bound_at)} of {len(pods)} pods not bound after "
                f"{scenario.timeout_seconds:.0f}s"
            )
    except (RunError, LabError) as exc:
        result.error = str(exc)
    finally:
        watch.stop()
    result.seconds = time.monotonic() - t0
    # The final truth of where pods are (a pod could in principle be rebound after an
    # eviction; the watch's first binding gives the timing).
    result.bindings = {
        p.metadata.name: p.spec.node_name
        for p in _bench_pods(lab)
        if p.spec.node_name and not p.metadata.deletion_timestamp
    }
    result.bound_at = dict(watch.bound_at)
    result.deleted = list(watch.deleted)
    if watch.error and result.error is None and len(result.bound_at) < len(pods):
        result.error = watch.error
    return result


def run(
    lab: Lab,
    scenario: Scenario,
    contender: Starter,
    workdir: Path,
    log: Callable[[str], None] = log_line,
) -> RunResult:
    """One scenario against one contender, from a freshly reset lab."""
    reset(lab, scenario, log)
    wd = workdir / f"{scenario.name}-{contender.name}"
    wd.mkdir(parents=True, exist_ok=True)
    log(f"{scenario.name}: starting {contender.name}")
    try:
        with contender.start(lab, wd):
            result = place(lab, scenario, contender.scheduler_name, log)
    except Exception as exc:  # a contender that fails is a result, not the end of the run
        result = RunResult(scenario.name, contender.name, error=f"{type(exc).__name__}: {exc}")
    result.contender = contender.name
    bound = len(result.bindings)
    log(
        f"{scenario.name} x {contender.name}: {bound}/{scenario.pod_count} bound in "
        f"{result.seconds:.1f}s" + (f"; {result.error}" if result.error else "")
    )
    return result
