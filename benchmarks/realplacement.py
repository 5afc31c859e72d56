#!/usr/bin/env python3
"""Placement on real kubelets, with the consequences counted (day-2 evidence).

    make bench-realplacement      # about 25 min with the defaults (3 runs of each contender)
    flock /tmp/loadwise-lab.lock .venv/bin/python -m benchmarks.realplacement --help

The placement benchmark (benchmarks/placement) runs on kwok nodes, where a pod sent to a full
node costs only a number. Here the nodes are the lab's real kubeadm cluster
(lab/realnodes.py), each worker a node of ``--worker-memory`` (a cgroup limit on its
container, its /proc/meminfo saying so, the kubelet evicting at memory.available < 100Mi), and
what a placement costs is what the kernel and the kubelet do about it:

- the hog: HOT runs a process outside Kubernetes (the lab's burner as a systemd unit of the
  node, lab/realnodes.py start_hog) holding ``--hog-memory`` MiB and burning ``--hog-cpu``
  millicores, which no pod requests;
- the burst: one Deployment of ``--pods`` burner pods created at once, each requesting
  ``--pod-request`` of memory (and 10m CPU) and holding ``--pod-memory`` MiB, more than it
  requests. All of them fit on COOL alone; on HOT, beside the hog, only a few.

Contenders: ``stock`` (the kubelet's kube-scheduler as kubeadm left it, or as rollback.yml
leaves it) and ``loadwise`` (after site.yml). Each run counts, over ``--window`` seconds from
the burst: pods bound per node (replacements of evicted pods included), OOM kills (container
terminations the kubelet reports with reason OOMKilled and exit code 137, each counted once),
the kernel's own OOM kills in each node (this machine's kernel log, by the killed task),
kubelet evictions (Events reason Evicted, pods with the DisruptionTarget condition the
kubelet's eviction sets, and pods whose status.reason is Evicted),
MemoryPressure seconds per node (sampled every ``--every`` s; the kubelets keep the condition
30 s after the signal clears, lab/realnodes.py MEMORY_EVICTION), container restarts, pod
startup latency (creation to the Ready condition), and each worker's memory working set
(peak, from its container's cgroup, as the kubelet computes it) and CPU (mean over the window,
from cpuacct). The runs are in blocks: every stock run, then site.yml, then every loadwise
run (each run starts from no burst pod, no hog and no node under MemoryPressure).

It is a measurement: the exit code is non-zero only when something is broken. The results go
to ``--out`` (results.json) and the table to stdout.
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.placement.formatting import spread
from benchmarks.placement.runner import provenance
from lab import EXTENDER_HEALTH_URL, realnodes
from lab.fakenodes import parse_quantity
from lab.peek import Container
from lab.processes import wait_for
from lab.workloads import create_deployment, delete, scored_events

HOT, COOL = realnodes.WORKERS
NAME = "realplace"
CONTENDERS = ("stock", "loadwise")
MIB = 2**20


@dataclass
class Run:
    """One contender's run: what the cluster did with the burst."""

    contender: str
    repeat: int
    started: str  # UTC
    load_average: tuple[float, float, float]
    before_mib: dict[str, float]  # each worker's working set just before the burst
    bound: dict[str, int] = field(default_factory=dict)  # every pod seen, by node
    first_bound: dict[str, int] = field(default_factory=dict)  # the burst's own pods
    running_at_end: dict[str, int] = field(default_factory=dict)
    oom_kills: dict[str, int] = field(default_factory=dict)  # by node
    kernel_oom: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> task -> kills
    evicted_events: int = 0
    evicted_pods: dict[str, int] = field(default_factory=dict)  # by node
    pressure_seconds: dict[str, float] = field(default_factory=dict)
    restarts: int = 0
    startup_seconds: list[float] = field(default_factory=list)  # creation to Ready
    never_ready: int = 0
    peak_mib: dict[str, float] = field(default_factory=dict)
    cpu_millicores: dict[str, float] = field(default_factory=dict)
    why_hot: list[str] = field(default_factory=list)  # the extender's Events, pods on HOT


@dataclass
class Seen:
    """One pod of the burst as the samples saw it."""

    name: str
    node: str = ""
    created: float = 0.0
    startup: float | None = None  # creation to the first Ready seen, from its condition
    oom_killed: set[str] = field(default_factory=set)  # terminated containers' ids
    evicted: bool = False
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
        self.evicted |= pod.status.reason == "Evicted"
        for cs in pod.status.container_statuses or []:
            self.restarts = max(self.restarts, cs.restart_count)
            for state in (cs.last_state, cs.state):
                term = state.terminated if state else None
                # 137: killed by SIGKILL; containerd also names OOMKilled a container that got
                # an OOM event and later ended otherwise, which this leaves out
                if term and term.reason == "OOMKilled" and term.exit_code == 137:
                    self.oom_killed.add(term.container_id or str(term.finished_at))


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


def burst_template(args: argparse.Namespace) -> dict[str, Any]:
    """A burner pod holding --pod-memory MiB while requesting --pod-request (and 10m CPU): the
    realnodes workload, with the memory it holds above what it asks for."""
    return realnodes.workload(cpu="10m", memory=args.pod_request, hold_memory=args.pod_memory)


def events_since(kube: realnodes.Cluster, reason: str, since: float, namespace: str) -> list[Any]:
    items = kube.core().list_namespaced_event(namespace, field_selector=f"reason={reason}").items
    return [
        e
        for e in items
        if (e.last_timestamp or e.event_time or e.metadata.creation_timestamp).timestamp()
        >= since - 1
    ]


def clear(kube: realnodes.Cluster) -> None:
    """The burst and the hog gone (at the end of each run: neither may load the machine
    through a playbook run or the next run's settling)."""
    delete(kube, NAME)
    for node in realnodes.WORKERS:
        realnodes.stop_hog(node)


def quiet(kube: realnodes.Cluster) -> None:
    """No burst pod, no hog, no worker under MemoryPressure: where every run starts."""
    clear(kube)
    wait_for(
        "no worker under MemoryPressure",
        lambda: all(
            conditions(kube)[n].get("MemoryPressure") == "False" for n in realnodes.WORKERS
        ),
        300,
        3,
    )


def hog_seen(kube: realnodes.Cluster, args: argparse.Namespace, base: float, since: float) -> None:
    """Wait until a NodeMetrics sample of HOT taken after `since` (the hog holding its
    memory) shows most of it, then until the extender holds a load read after that
    (realnodes.wait_load_after). A sample from before `since` does not do: in a trial run the
    previous run's hog was stopped and started again here, metrics-server's last sample still
    showed the old one, and the extender's next load was read from a scrape in between (HOT at
    9 % memory and 35 % CPU: memory is a gauge, CPU a rate over two scrapes), so the burst
    was placed on a reading of a node without its hog."""
    from kubernetes import client

    def measured() -> bool:
        try:
            doc: Any = client.CustomObjectsApi(kube.api_client()).get_cluster_custom_object(
                "metrics.k8s.io", "v1beta1", "nodes", HOT
            )
        except Exception:  # no sample for the node yet: ask again
            return False
        taken = calendar.timegm(time.strptime(doc["timestamp"], "%Y-%m-%dT%H:%M:%SZ"))
        hog = float(args.hog_memory) * MIB
        return taken > since and parse_quantity(doc["usage"]["memory"]) >= base + 0.75 * hog

    wait_for(f"metrics-server to measure the hog on {HOT}", measured, 180, 3)
    realnodes.wait_load_after(time.time(), EXTENDER_HEALTH_URL, "the hog")


def one_run(kube: realnodes.Cluster, contender: str, repeat: int, args: argparse.Namespace) -> Run:
    quiet(kube)
    base = realnodes.working_set_bytes(HOT)
    realnodes.start_hog(HOT, cpu=args.hog_cpu, memory=args.hog_memory)
    if contender == "loadwise":
        hog_seen(kube, args, base, time.time())
    else:
        # the same settling the loadwise runs get at the least (one metrics-server scrape)
        time.sleep(15)
    run = Run(
        contender,
        repeat,
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        os.getloadavg(),
        {n: round(realnodes.working_set_bytes(n) / MIB, 1) for n in realnodes.WORKERS},
    )
    since, boot_seconds = time.time(), uptime()
    cpu0 = {n: cpu_ns(n) for n in realnodes.WORKERS}
    t0 = time.monotonic()
    create_deployment(kube, NAME, args.pods, burst_template(args))
    peak = dict.fromkeys(realnodes.WORKERS, 0)
    pressure = dict.fromkeys(realnodes.WORKERS, 0.0)
    seen: dict[str, Seen] = {}
    last = time.monotonic()
    while True:
        now = time.monotonic()
        conds = conditions(kube)
        for n in realnodes.WORKERS:
            if conds[n].get("MemoryPressure") == "True":
                pressure[n] += now - last
            peak[n] = max(peak[n], realnodes.working_set_bytes(n))
        last = now
        for pod in kube.core().list_namespaced_pod("default", label_selector=f"app={NAME}").items:
            seen.setdefault(pod.metadata.uid, Seen(pod.metadata.name)).look(pod)
        if now - t0 >= args.window:
            break
        time.sleep(args.every)
    elapsed = time.monotonic() - t0
    run.cpu_millicores = {
        n: round((cpu_ns(n) - cpu0[n]) / 1e6 / elapsed, 1) for n in realnodes.WORKERS
    }
    run.peak_mib = {n: round(v / MIB, 1) for n, v in peak.items()}
    run.pressure_seconds = {n: round(v, 1) for n, v in pressure.items()}
    evicted_names = {
        e.involved_object.name
        for e in events_since(kube, "Evicted", since, "default")
        if e.involved_object.name in {p.name for p in seen.values()}
    }
    run.evicted_events = len(evicted_names)
    pods = sorted(seen.values(), key=lambda p: p.created)
    run.bound = dict(Counter(p.node for p in pods if p.node))
    run.first_bound = dict(Counter(p.node for p in pods[: args.pods] if p.node))
    run.running_at_end = dict(Counter(p.node for p in pods if p.running))
    run.oom_kills = dict(Counter(p.node for p in pods for _ in p.oom_killed))
    run.evicted_pods = dict(Counter(p.node for p in pods if p.evicted or p.name in evicted_names))
    run.restarts = sum(p.restarts for p in pods)
    run.startup_seconds = [p.startup for p in pods if p.startup is not None]
    run.never_ready = sum(1 for p in pods if p.startup is None)
    run.kernel_oom = kernel_oom_kills(boot_seconds)
    if contender == "loadwise":
        on_hot = {p.name for p in pods if p.node == HOT}
        run.why_hot = [
            e.message
            for e in scored_events(kube, NAME, since=since, at_least=0, timeout=0)
            if e.involved_object.name in on_hot
        ]
    clear(kube)
    return run


def switch(host: Any, contender: str) -> None:
    """site.yml for loadwise, rollback.yml for stock (which changes nothing where site.yml
    never ran)."""
    playbook = "playbooks/site.yml" if contender == "loadwise" else "playbooks/rollback.yml"
    t0 = time.monotonic()
    result = host.playbook(playbook)
    if result.rc != 0:
        raise RuntimeError(f"{playbook} failed:\n{result.tail()}")
    print(f"{playbook} in {time.monotonic() - t0:.0f} s", file=sys.stderr)


def table(runs: list[Run]) -> str:
    cols: list[tuple[str, Callable[[Run], float]]] = [
        ("pods on hot", lambda r: r.bound.get(HOT, 0)),
        ("pods on cool", lambda r: r.bound.get(COOL, 0)),
        ("OOM kills", lambda r: sum(r.oom_kills.values())),
        ("kernel OOM kills", lambda r: sum(sum(t.values()) for t in r.kernel_oom.values())),
        ("evicted", lambda r: sum(r.evicted_pods.values())),
        ("pressure s hot", lambda r: r.pressure_seconds.get(HOT, 0.0)),
        ("pressure s cool", lambda r: r.pressure_seconds.get(COOL, 0.0)),
        ("restarts", lambda r: r.restarts),
        (
            "startup p50 s",
            lambda r: statistics.median(r.startup_seconds) if r.startup_seconds else -1,
        ),
        ("startup max s", lambda r: max(r.startup_seconds, default=-1)),
        ("never ready", lambda r: r.never_ready),
        ("peak MiB hot", lambda r: r.peak_mib.get(HOT, 0.0)),
        ("peak MiB cool", lambda r: r.peak_mib.get(COOL, 0.0)),
        ("CPU m hot", lambda r: r.cpu_millicores.get(HOT, 0.0)),
        ("CPU m cool", lambda r: r.cpu_millicores.get(COOL, 0.0)),
    ]
    lines = [
        "| contender | n | " + " | ".join(c for c, _ in cols) + " |",
        "|---|---|" + "---|" * len(cols),
    ]
    for contender in dict.fromkeys(r.contender for r in runs):
        mine = [r for r in runs if r.contender == contender]
        cells = [spread([float(f(r)) for r in mine], "{:g}".format) for _, f in cols]
        lines.append(f"| {contender} | {len(mine)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def commit() -> str:
    """HEAD as the placement benchmark records it (runner.provenance: untracked files make
    the tree dirty too)."""
    prov = provenance()
    dirty = " (with uncommitted changes)" if prov.clean is False else ""
    return (prov.commit or "unknown")[:7] + dirty


def run(args: argparse.Namespace) -> int:
    # the tree the runs used: read before them, not after (a commit made meanwhile)
    started, at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit()
    kubeconfig = (
        Path(os.environ.get("LOADWISE_REALNODES_RUN", "/tmp/loadwise-realnodes")) / "admin.conf"
    )
    if not args.reuse:
        up = realnodes.up(worker_memory=args.worker_memory)
        kubeconfig = up.kubeconfig
        print(f"cluster up in {up.seconds:.0f} s", file=sys.stderr)
    limits = {n: realnodes.memory_limit(n) for n in realnodes.WORKERS}
    if not all(limits.values()):
        raise RuntimeError(f"workers without a memory limit: {limits} (up --worker-memory)")
    runs: list[Run] = []
    try:
        host = realnodes.control_plane_host(
            Path(tempfile.mkdtemp(prefix="loadwise-realplace-")), kubeconfig
        )
        kube = realnodes.Cluster(kubeconfig)
        for contender in args.contenders:
            switch(host, contender)
            for i in range(args.repeats):
                r = one_run(kube, contender, i + 1, args)
                runs.append(r)
                print(json.dumps(asdict(r)), file=sys.stderr)
        quiet(kube)
    finally:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(
            json.dumps(
                {
                    "args": vars(args),
                    "commit": at,
                    "started": started,
                    "runs": [asdict(r) for r in runs],
                },
                indent=1,
            )  # fmt: skip
        )
        if not args.keep and not args.reuse:
            realnodes.down()
    print(
        f"Started {started}, commit {at}; load average at the end "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; workers of "
        f"{args.worker_memory}; hog on {HOT}: {args.hog_memory} MiB, {args.hog_cpu}m CPU; "
        f"{args.pods} pods holding {args.pod_memory} MiB, requesting {args.pod_request}; "
        f"window {args.window:g} s.\n"
    )
    print(table(runs))
    return 0


def parser() -> argparse.ArgumentParser:
    """The options; their defaults are the lab's scenario (tests/lab/test_real_placement.py
    runs it with them)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS))
    parser.add_argument("--worker-memory", default="2Gi")
    parser.add_argument("--hog-memory", type=int, default=1200, help="MiB (default 1200)")
    parser.add_argument("--hog-cpu", type=int, default=400, help="millicores (default 400)")
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--pod-memory", type=int, default=128, help="MiB held (default 128)")
    parser.add_argument("--pod-request", default="64Mi")
    parser.add_argument("--window", type=float, default=120.0, help="seconds (default 120)")
    parser.add_argument("--every", type=float, default=2.0, help="sampling, s (default 2)")
    parser.add_argument("--out", default="/tmp/loadwise-realplacement")
    parser.add_argument("--reuse", action="store_true", help="use the cluster that is up")
    parser.add_argument("--keep", action="store_true", help="leave the cluster up")
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
