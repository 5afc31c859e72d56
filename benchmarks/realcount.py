"""What the kernel and the kubelet did to pods on the real-node cluster, counted the same way
by each benchmark that runs there (benchmarks/realplacement.py: one burst beside a hog;
benchmarks/realchurn.py: a stream of pods that come and go).

The counting (docs/placement.md "On real kubelets" says what each figure means): pods bound
per node, OOM kills (container terminations the kubelet reports with reason OOMKilled and
exit code 137, each counted once), the kernel's own OOM kills in each node (this machine's
kernel log, by the killed task), kubelet evictions (Events reason Evicted, pods with the
DisruptionTarget condition the kubelet's eviction sets, and pods whose status.reason is
Evicted), MemoryPressure seconds per node (sampled), container restarts, pod startup (creation
to the first Ready condition) and each worker's peak memory working set and mean CPU, read
from its container's cgroup on this machine. Pure parts (Seen.look, tally, percentile,
summary, markdown_table) take plain values; the rest reads the cluster or this machine.
"""

from __future__ import annotations

import calendar
import json
import math
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.placement.formatting import spread
from benchmarks.placement.runner import provenance
from lab import EXTENDER_HEALTH_URL, realnodes
from lab.fakenodes import parse_quantity
from lab.peek import Container
from lab.processes import wait_for
from lab.workloads import delete

R = TypeVar("R")  # a benchmark's Run class (recorded)

MIB = 2**20
CONTENDERS = ("stock", "loadwise")
HOT = realnodes.WORKERS[0]  # the worker the hog runs on


@dataclass
class Seen:
    """One pod as the samples saw it."""

    name: str
    node: str = ""
    created: float = 0.0
    startup: float | None = None  # creation to the first Ready seen, from its condition
    oom_killed: set[str] = field(default_factory=set)  # terminated containers' ids
    evicted: bool = False  # by the kubelet
    api_evicted: bool = False  # through the Eviction API: the descheduler, a drain
    restarts: int = 0
    running: bool = False

    def look(self, pod: Any) -> None:
        self.node = pod.spec.node_name or self.node
        self.created = pod.metadata.creation_timestamp.timestamp()
        self.running = pod.status.phase == "Running"
        for cond in pod.status.conditions or []:
            if cond.type == "Ready" and cond.status == "True" and self.startup is None:
                self.startup = cond.last_transition_time.timestamp() - self.created
            # the kubelet's eviction marks the pod so (PodDisruptionConditions, GA in 1.31);
            # its phase may still end Succeeded, not Failed with reason Evicted: the burner
            # exits 0 on SIGTERM (seen here 2026-11-27, Kubernetes 1.36.4)
            if cond.type == "DisruptionTarget" and cond.reason == "TerminationByKubelet":
                self.evicted = True
            # the Eviction API's reason (the descheduler evicts through it; a pod the churn
            # deletes gets no DisruptionTarget): no kubelet eviction, counted apart
            if cond.type == "DisruptionTarget" and cond.reason == "EvictionByEvictionAPI":
                self.api_evicted = True
        self.evicted |= pod.status.reason == "Evicted"
        for cs in pod.status.container_statuses or []:
            self.restarts = max(self.restarts, cs.restart_count)
            for state in (cs.last_state, cs.state):
                term = state.terminated if state else None
                # 137: killed by SIGKILL; containerd also names OOMKilled a container that got
                # an OOM event and later ended otherwise, which this leaves out
                if term and term.reason == "OOMKilled" and term.exit_code == 137:
                    self.oom_killed.add(term.container_id or str(term.finished_at))


@dataclass
class Tally:
    """What happened to a set of pods (Seen), per node where it is per node."""

    bound: dict[str, int]  # every pod seen bound, by node
    running_at_end: dict[str, int]
    oom_kills: dict[str, int]
    evicted_pods: dict[str, int]
    api_evicted: dict[str, int]
    restarts: int
    startup_seconds: list[float]
    never_ready: int


def tally(seen: Iterable[Seen], evicted: Iterable[str] = ()) -> Tally:
    """Count the pods `seen`; `evicted`: names of pods the kubelet's Evicted Events name (an
    evicted pod whose status the samples missed still counts)."""
    pods, evicted_names = list(seen), set(evicted)
    return Tally(
        bound=dict(Counter(p.node for p in pods if p.node)),
        running_at_end=dict(Counter(p.node for p in pods if p.running)),
        oom_kills=dict(Counter(p.node for p in pods for _ in p.oom_killed)),
        evicted_pods=dict(Counter(p.node for p in pods if p.evicted or p.name in evicted_names)),
        api_evicted=dict(Counter(p.node for p in pods if p.api_evicted)),
        restarts=sum(p.restarts for p in pods),
        startup_seconds=[p.startup for p in pods if p.startup is not None],
        never_ready=sum(1 for p in pods if p.startup is None),
    )


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) of `values` by the nearest-rank method (always one of the
    values: with 1 s timestamps an interpolated figure would claim a precision there is not);
    None for no values."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0-100")
    ordered = sorted(values)
    return ordered[max(math.ceil(q / 100 * len(ordered)), 1) - 1]


class Sampler:
    """The samples of one run: MemoryPressure seconds and peak working set per worker, every
    pod matching a label selector (Seen, by uid). sample() once per interval; the pressure
    seconds are the time between samples that found the condition True."""

    def __init__(self, workers: Sequence[str] = realnodes.WORKERS) -> None:
        self.workers = tuple(workers)
        self.peak = dict.fromkeys(self.workers, 0)
        self.pressure = dict.fromkeys(self.workers, 0.0)
        self.seen: dict[str, Seen] = {}
        self.pods: list[Any] = []  # the last sample's pods, for a caller acting on them
        self._last: float | None = None

    def sample(self, kube: realnodes.Cluster, selector: str, namespace: str = "default") -> None:
        now = time.monotonic()
        conds = conditions(kube)
        for n in self.workers:
            if self._last is not None and conds[n].get("MemoryPressure") == "True":
                self.pressure[n] += now - self._last
            self.peak[n] = max(self.peak[n], realnodes.working_set_bytes(n))
        self._last = now
        self.pods = kube.core().list_namespaced_pod(namespace, label_selector=selector).items
        for pod in self.pods:
            self.seen.setdefault(pod.metadata.uid, Seen(pod.metadata.name)).look(pod)

    def peak_mib(self) -> dict[str, float]:
        return {n: round(v / MIB, 1) for n, v in self.peak.items()}

    def pressure_seconds(self) -> dict[str, float]:
        return {n: round(v, 1) for n, v in self.pressure.items()}


@dataclass(kw_only=True)
class Counted:
    """What one run's window did on the workers, as each benchmark's Run records it (a Run
    derives from this; keyword-only, so a Run's own fields come first in its constructor)."""

    bound: dict[str, int] = field(default_factory=dict)  # every pod seen, by node
    running_at_end: dict[str, int] = field(default_factory=dict)
    oom_kills: dict[str, int] = field(default_factory=dict)  # by node
    kernel_oom: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> task -> kills
    evicted_events: int = 0
    evicted_pods: dict[str, int] = field(default_factory=dict)  # by node: the kubelet's
    api_evicted: dict[str, int] = field(default_factory=dict)  # by node: the descheduler's
    pressure_seconds: dict[str, float] = field(default_factory=dict)
    restarts: int = 0
    startup_seconds: list[float] = field(default_factory=list)  # creation to Ready
    never_ready: int = 0
    peak_mib: dict[str, float] = field(default_factory=dict)
    cpu_millicores: dict[str, float] = field(default_factory=dict)


class Window:
    """One run's measuring window on the workers: opened just before the run creates its
    pods, sampled once per interval, counted into the run's Counted fields at the end."""

    def __init__(self, workers: Sequence[str] = realnodes.WORKERS) -> None:
        self.workers = tuple(workers)
        self.since, self.boot_seconds = time.time(), uptime()
        self.cpu0 = {n: cpu_ns(n) for n in self.workers}
        self.t0 = time.monotonic()
        self.sampler = Sampler(self.workers)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def count(self, kube: realnodes.Cluster, run: Counted) -> list[Seen]:
        """Fill `run`'s Counted fields from the samples, the kubelet's Events and this
        machine's kernel log; returns the pods seen, oldest first."""
        elapsed = self.elapsed()
        run.cpu_millicores = {
            n: round((cpu_ns(n) - self.cpu0[n]) / 1e6 / elapsed, 1) for n in self.workers
        }
        run.peak_mib = self.sampler.peak_mib()
        run.pressure_seconds = self.sampler.pressure_seconds()
        pods = sorted(self.sampler.seen.values(), key=lambda p: p.created)
        evicted = evicted_names(kube, self.since, pods)
        run.evicted_events = len(evicted)
        counted = tally(pods, evicted)
        run.bound = counted.bound
        run.running_at_end = counted.running_at_end
        run.oom_kills = counted.oom_kills
        run.evicted_pods = counted.evicted_pods
        run.api_evicted = counted.api_evicted
        run.restarts = counted.restarts
        run.startup_seconds = counted.startup_seconds
        run.never_ready = counted.never_ready
        run.kernel_oom = kernel_oom_kills(self.boot_seconds)
        return pods


def settle(kube: realnodes.Cluster, contender: str, hog: tuple[int, int] | None) -> None:
    """Start the hog on HOT (`hog`: millicores, MiB; None: no hog) and settle: loadwise waits
    until the extender holds a load with the hog in it, stock gets the same settling at the
    least (one metrics-server scrape)."""
    if hog is not None:
        base = realnodes.working_set_bytes(HOT)
        realnodes.start_hog(HOT, cpu=hog[0], memory=hog[1])
        if contender == "loadwise":
            hog_seen(kube, HOT, hog[1], base, time.time())
            return
    time.sleep(15)


def cgroup_file(node: str, controller: str, name: str) -> Path:
    return Path("/sys/fs/cgroup") / controller / Container(node).cgroup.lstrip("/") / name


def cpu_ns(node: str) -> int:
    """The node container's CPU time so far (cgroup v1 cpuacct, this machine's hierarchy)."""
    return int(cgroup_file(node, "cpuacct", "cpuacct.usage").read_text())


def uptime() -> float:
    """Seconds since this machine booted: the kernel log's clock."""
    return float(Path("/proc/uptime").read_text().split()[0])


def kernel_oom_kills(after: float) -> dict[str, dict[str, int]]:
    """The kernel's OOM kills since `after` (uptime()) inside each worker, by the killed
    task's name, from this machine's kernel log (`dmesg`: the nodes are containers, so their
    kernel is this machine's). Each kill logs one "oom-kill:" line naming the memory cgroup
    that ran out (oom_memcg) and the victim's (task_memcg) and task; a node's kills are the
    lines whose task_memcg lies in its container's cgroup. The kubelet's own SystemOOM Events
    do not count these: it records only kills in the root cgroup (pkg/kubelet/oom)."""
    log = subprocess.run(["dmesg"], capture_output=True, text=True, check=True).stdout
    groups = {n: Container(n).cgroup for n in realnodes.WORKERS}
    out: dict[str, dict[str, int]] = {}
    for line in log.splitlines():
        stamp, _, rest = line.partition("]")
        if not rest.lstrip().startswith("oom-kill:") or float(stamp.strip("[ ")) < after:
            continue
        fields = dict(f.split("=", 1) for f in rest.split(":", 1)[1].split(",") if "=" in f)
        for node, group in groups.items():
            if fields.get("task_memcg", "").startswith(group):
                task = fields.get("task", "?")
                out.setdefault(node, {})[task] = out.get(node, {}).get(task, 0) + 1
    return out


def conditions(kube: realnodes.Cluster) -> dict[str, dict[str, str]]:
    return {
        n.metadata.name: {c.type: c.status for c in n.status.conditions or []}
        for n in kube.core().list_node().items
    }


def event_at(e: Any) -> float:
    """When an Event last happened (unix seconds): its lastTimestamp, else its eventTime
    (events.k8s.io writers set only that), else when the object was created."""
    return float((e.last_timestamp or e.event_time or e.metadata.creation_timestamp).timestamp())


def events_since(
    kube: realnodes.Cluster, since: float, namespace: str, reason: str | None = None
) -> list[Any]:
    """The Events in `namespace` (of `reason` only, when given) that happened at or after
    `since` (a second's slack: the API server keeps whole seconds)."""
    selector = {"field_selector": f"reason={reason}"} if reason else {}
    items = kube.core().list_namespaced_event(namespace, **selector).items
    return [e for e in items if event_at(e) >= since - 1]


def evidence(kube: realnodes.Cluster, since: float) -> dict[str, Any]:
    """What explains one run's placements, kept beside its figures: every Event in the
    default namespace since `since` (unix seconds: the kubelet's Evicted and pressure
    Events, the scheduler's Scheduled, the extender's LoadwiseScored with its scores and the
    pods it counted in flight), the extender's journal on the control plane over the same
    span (a watchdog restart shows there) and kube-scheduler's log lines that name the
    extender (a call it gave up on: the extender is ignorable, so the pod was then placed by
    the stock scores alone). A run that went wrong on a cluster torn down after it is
    otherwise unexplained.
    Events are kept an hour by the API server and sampled by the extender, so the journal
    is read too; a node without the unit gives an empty journal, not an error."""
    events = sorted(
        (
            {
                "at": event_at(e),
                "reason": e.reason,
                "object": f"{e.involved_object.kind}/{e.involved_object.name}",
                "count": e.count,
                "message": e.message,
            }
            for e in events_since(kube, since, "default")
        ),
        key=lambda e: e["at"],
    )
    journal = realnodes.sh(
        realnodes.CONTROL_PLANE,
        f"journalctl -u loadwise-extender --since @{int(since)} --no-pager -o short-iso",
        check=False,
    )
    core = kube.core()
    scheduler = {
        pod.metadata.name: [
            line
            for line in core.read_namespaced_pod_log(
                pod.metadata.name, "kube-system", since_seconds=max(1, int(time.time() - since))
            ).splitlines()
            if "extender" in line.lower()
        ]
        for pod in core.list_namespaced_pod(
            "kube-system", label_selector="component=kube-scheduler"
        ).items
    }
    return {
        "since": since,
        "events": events,
        "journal": journal.splitlines(),
        "scheduler": scheduler,
    }


def evicted_names(kube: realnodes.Cluster, since: float, pods: Iterable[Seen]) -> set[str]:
    """Those of `pods` the kubelet's Evicted Events since `since` name."""
    names = {p.name for p in pods}
    return {
        e.involved_object.name
        for e in events_since(kube, since, "default", "Evicted")
        if e.involved_object.name in names
    }


def clear(kube: realnodes.Cluster, deployments: Iterable[str]) -> None:
    """The deployments and every hog gone (at the end of each run: none may load the machine
    through a playbook run or the next run's settling)."""
    for name in deployments:
        delete(kube, name)
    for node in realnodes.WORKERS:
        realnodes.stop_hog(node)


def quiet(kube: realnodes.Cluster, deployments: Iterable[str]) -> None:
    """No pod of the deployments, no hog, no worker under MemoryPressure: where every run
    starts."""
    clear(kube, deployments)
    wait_for(
        "no worker under MemoryPressure",
        lambda: all(
            conditions(kube)[n].get("MemoryPressure") == "False" for n in realnodes.WORKERS
        ),
        300,
        3,
    )


def hog_seen(
    kube: realnodes.Cluster, node: str, memory_mib: float, base: float, since: float
) -> None:
    """Wait until a NodeMetrics sample of `node` taken after `since` (the hog holding its
    `memory_mib`) shows most of it above `base` (the node's working set before, bytes), then
    until the extender holds a load read after that (realnodes.wait_load_after). A sample from
    before `since` does not do: in a trial run the previous run's hog was stopped and started
    again here, metrics-server's last sample still showed the old one, and the extender's next
    load was read from a scrape in between (the hot node at 9 % memory and 35 % CPU: memory is
    a gauge, CPU a rate over two scrapes), so the burst was placed on a reading of a node
    without its hog."""
    from kubernetes import client

    def measured() -> bool:
        try:
            doc: Any = client.CustomObjectsApi(kube.api_client()).get_cluster_custom_object(
                "metrics.k8s.io", "v1beta1", "nodes", node
            )
        except Exception:  # no sample for the node yet: ask again
            return False
        taken = calendar.timegm(time.strptime(doc["timestamp"], "%Y-%m-%dT%H:%M:%SZ"))
        hog = float(memory_mib) * MIB
        return taken > since and parse_quantity(doc["usage"]["memory"]) >= base + 0.75 * hog

    wait_for(f"metrics-server to measure the hog on {node}", measured, 180, 3)
    realnodes.wait_load_after(time.time(), EXTENDER_HEALTH_URL, "the hog")


def switch(host: Any, contender: str) -> None:
    """site.yml for loadwise, rollback.yml for stock (which changes nothing where site.yml
    never ran)."""
    playbook = "playbooks/site.yml" if contender == "loadwise" else "playbooks/rollback.yml"
    t0 = time.monotonic()
    result = host.playbook(playbook)
    if result.rc != 0:
        raise RuntimeError(f"{playbook} failed:\n{result.tail()}")
    print(f"{playbook} in {time.monotonic() - t0:.0f} s", file=sys.stderr)


def in_blocks(
    host: Any,
    kube: realnodes.Cluster,
    contenders: Sequence[str],
    repeats: int,
    one_run: Callable[[realnodes.Cluster, str, int], Any],
    runs: list[Any],
    recorded: Callable[[list[Any]], None] | None = None,
    first: int = 1,
) -> None:
    """Each contender's `repeats` runs in a block, after switch(host, contender), numbered
    from `first` (a run's number picks its trace, so one recorded run can be replayed alone).
    Each run goes into `runs` (the caller's list, so that what ran is kept if a run fails), its
    record to stderr, and then `recorded(runs)` is called."""
    for contender in contenders:
        switch(host, contender)
        for i in range(first, first + repeats):
            r = one_run(kube, contender, i)
            runs.append(r)
            print(json.dumps(asdict(r)), file=sys.stderr)
            if recorded is not None:
                recorded(runs)


def commit() -> str:
    """HEAD as the placement benchmark records it (runner.provenance: untracked files make
    the tree dirty too)."""
    prov = provenance()
    dirty = " (with uncommitted changes)" if prov.clean is False else ""
    return (prov.commit or "unknown")[:7] + dirty


# A table's column: its heading and the figure it shows of one run (None: not measured there,
# e.g. no pod became Ready, left out of the median).
Column = tuple[str, Callable[[Any], float | None]]


def _by_contender(runs: Sequence[Any]) -> dict[str, list[Any]]:
    """Each contender's runs (each run has a `contender`), in the order of its first run."""
    out: dict[str, list[Any]] = {}
    for r in runs:
        out.setdefault(r.contender, []).append(r)
    return out


def _values(runs: Sequence[Any], f: Callable[[Any], float | None]) -> list[float]:
    return [float(v) for v in (f(r) for r in runs) if v is not None]


def summary(runs: Sequence[Any], cols: Sequence[Column]) -> dict[str, dict[str, dict[str, float]]]:
    """contender -> column -> {n, median, min, max} over that contender's runs; a column no
    run of the contender measured is left out."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for contender, mine in _by_contender(runs).items():
        out[contender] = {}
        for name, f in cols:
            values = _values(mine, f)
            if values:
                out[contender][name] = {
                    "n": len(values),
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                }
    return out


def recorded(path: Path, run: Callable[..., R]) -> list[R]:
    """The runs a benchmark's results.json holds (its ``runs``, each given to ``run``: the
    benchmark's Run class)."""
    doc = json.loads(path.read_text())
    return [run(**r) for r in doc["runs"]]


def markdown_table(runs: Sequence[Any], cols: Sequence[Column]) -> str:
    """One row per contender, each cell "median (min-max)" over its runs (spread); "-" where
    no run measured it."""
    lines = [
        "| contender | n | " + " | ".join(c for c, _ in cols) + " |",
        "|---|---|" + "---|" * len(cols),
    ]
    for contender, mine in _by_contender(runs).items():
        cells = [spread(_values(mine, f), "{:g}".format) for _, f in cols]
        lines.append(f"| {contender} | {len(mine)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
