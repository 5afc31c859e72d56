#!/usr/bin/env python3
"""The extender's footprint where an operator runs it: a systemd service on a kubeadm
control-plane node, beside the kubelet's kube-scheduler, fed by load-watcher.

    flock /tmp/loadwise-lab.lock .venv/bin/python -m benchmarks.footprint    # ~12 min
    flock /tmp/loadwise-lab.lock .venv/bin/python -m benchmarks.footprint --soak 3600  # ~75 min

What runs: the real-node cluster (lab/realnodes.py: three kubeadm nodes in podman, the real
kubelets) brought up from scratch, and site.yml over SSH with the lab's operator variables
(load-watcher as a Deployment reading metrics-server; the extender with filter and
prioritize, TLS, its Event recorder and its node/pod watch). The extender's process is read
from this machine's /proc (a node container's processes are this machine's, lab/peek.py):

- at rest (``--rest`` seconds, default 120: four reads of load-watcher at the default 30 s,
  the watch, the metrics): resident memory and CPU;
- a burst: one Deployment of ``--pods`` (default 200) pause pods requesting 5m and 16Mi each,
  from its creation until every pod is bound: wall time, the extender's CPU per pod and per
  request, the scheduler's calls (its request counters), resident memory after and the peak
  (VmHWM) so far;
- after the pods are deleted and the watch has caught up: resident memory again;
- with ``--soak SECONDS`` (an hour: 3600), day 2: a Deployment of ``--replicas`` pods whose
  oldest pod is deleted every ``--churn`` seconds, so that its ReplicaSet makes a replacement
  the scheduler places through the extender (filter, prioritize, an Event, the ledger, the
  watch seeing one pod go and one arrive). Every ``--every`` seconds: resident memory, the
  peak, CPU per churned pod and as a share of a core, and the pods not bound (a churn the
  scheduler fell behind on); at the end, the growth of resident memory over the soak's
  second half, the figure a leak would show.

The figures are for this 2-core x86 machine; a Raspberry Pi's cores are slower, so its CPU
per pod is higher by their ratio (docs/benchmarks.md says what is and is not measured). It is a
measurement: the exit code is non-zero only when something is broken.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.procstat import cpu_seconds, memory_bytes
from lab import EXTENDER_HEALTH_URL, realnodes
from lab.peek import Container
from lab.workloads import create_deployment, delete, placements

REQUESTS = "loadwise_extender_request_duration_seconds_count"


def extender_pid() -> int:
    """The extender's main process on the control-plane node (the unit's ExecStart,
    roles/loadwise_extender/templates/loadwise-extender.service.j2)."""
    found = [
        pid
        for pid, cmdline in Container(realnodes.CONTROL_PLANE).processes()
        if "/venv/bin/loadwise-extender " in cmdline
    ]
    if len(found) != 1:
        raise RuntimeError(f"expected one loadwise-extender process, found {found}")
    return found[0]


def requests_served() -> float:
    count = realnodes.extender_metric(realnodes.CONTROL_PLANE, EXTENDER_HEALTH_URL, REQUESTS)
    return count or 0.0


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def run(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    up = realnodes.up()
    try:
        host = realnodes.control_plane_host(
            Path(tempfile.mkdtemp(prefix="loadwise-footprint-")), up.kubeconfig
        )
        site = host.playbook("playbooks/site.yml")
        if site.rc != 0:
            print(site.tail(), file=sys.stderr)
            return 1
        print(f"cluster and site.yml in {time.monotonic() - t0:.0f} s (logs in {host.workdir})")
        pid = extender_pid()
        kube = realnodes.Cluster(up.kubeconfig)

        mem, cpu0 = memory_bytes(pid), cpu_seconds(pid)
        print(f"after site.yml: RSS {mib(mem['VmRSS'])}, peak {mib(mem['VmHWM'])}")
        time.sleep(args.rest)
        rest_cpu = cpu_seconds(pid) - cpu0
        mem = memory_bytes(pid)
        print(
            f"at rest {args.rest:g} s: RSS {mib(mem['VmRSS'])}, CPU {1000 * rest_cpu:.0f} ms "
            f"({100 * rest_cpu / args.rest:.2f} % of a core)"
        )

        served0, cpu0, t_burst = requests_served(), cpu_seconds(pid), time.monotonic()
        create_deployment(kube, "footprint", args.pods, realnodes.workload(cpu="5m"))
        try:
            where = placements(kube, "footprint", args.pods, timeout=900)
            wall, cpu = time.monotonic() - t_burst, cpu_seconds(pid) - cpu0
            calls = requests_served() - served0
            mem = memory_bytes(pid)
            print(
                f"burst of {args.pods} pods bound in {wall:.1f} s ({dict(where)}): extender CPU "
                f"{1000 * cpu:.0f} ms = {1000 * cpu / args.pods:.2f} ms per pod, "
                f"{calls:.0f} scheduler calls ({1000 * cpu / max(calls, 1):.2f} ms each); "
                f"RSS {mib(mem['VmRSS'])}, peak so far {mib(mem['VmHWM'])}"
            )
        finally:
            delete(kube, "footprint")
        time.sleep(30)  # the watch's deletions and one more load read
        mem = memory_bytes(pid)
        print(f"30 s after the pods were deleted: RSS {mib(mem['VmRSS'])}")
        if args.soak:
            soak(kube, pid, args)
        kube.close()
        return 0
    finally:
        if not args.keep:
            realnodes.down()


SOAK = "footprint-soak"


def soak(kube: realnodes.Cluster, pid: int, args: argparse.Namespace) -> None:
    """Churn one pod of a Deployment every args.churn seconds for args.soak seconds, reporting
    the extender's memory and CPU every args.every seconds (see the module's docstring)."""
    core = kube.core()
    create_deployment(kube, SOAK, args.replicas, realnodes.workload(cpu="5m"))
    try:
        placements(kube, SOAK, args.replicas, timeout=300)
        t0 = time.monotonic()
        cpu0, served0 = cpu_seconds(pid), requests_served()
        mark = (t0, cpu0, 0)  # the last report's time, CPU and churn count
        rss: list[tuple[float, int]] = [(0.0, memory_bytes(pid)["VmRSS"])]
        churned = 0
        print(
            f"soak: {args.soak:g} s, one of {args.replicas} pods replaced every {args.churn:g} s; "
            f"RSS {mib(rss[0][1])} at its start"
        )
        print("  t(s)  churned  RSS MiB  peak MiB  CPU ms/pod  % core  unbound")
        while (now := time.monotonic()) - t0 < args.soak:
            live = [
                p
                for p in core.list_namespaced_pod("default", label_selector=f"app={SOAK}").items
                if p.metadata.deletion_timestamp is None
            ]
            unbound = sum(1 for p in live if not p.spec.node_name)
            if not live:  # every pod terminating at once: the ReplicaSet is behind; wait for it
                time.sleep(1)
                continue
            oldest = min(live, key=lambda p: p.metadata.creation_timestamp)
            core.delete_namespaced_pod(oldest.metadata.name, "default", grace_period_seconds=0)
            churned += 1
            if now - mark[0] >= args.every:
                mem, cpu = memory_bytes(pid), cpu_seconds(pid)
                rss.append((now - t0, mem["VmRSS"]))
                pods, secs = churned - mark[2], now - mark[0]
                print(
                    f"{now - t0:6.0f} {churned:8d} {mem['VmRSS'] / 2**20:8.1f} "
                    f"{mem['VmHWM'] / 2**20:9.1f} {1000 * (cpu - mark[1]) / max(pods, 1):11.2f} "
                    f"{100 * (cpu - mark[1]) / secs:7.2f} {unbound:8d}",
                    flush=True,
                )
                mark = (now, cpu, churned)
            time.sleep(max(0.0, args.churn - (time.monotonic() - now)))
        where = placements(kube, SOAK, args.replicas, timeout=120)
        secs, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
        mem = memory_bytes(pid)
        half = [r for t, r in rss if t >= args.soak / 2] or [mem["VmRSS"]]
        print(
            f"soak done: {churned} pods replaced in {secs:.0f} s, all {args.replicas} bound "
            f"({dict(where)}); extender CPU {cpu:.1f} s = {1000 * cpu / max(churned, 1):.2f} ms "
            f"per pod, {100 * cpu / secs:.2f} % of a core; "
            f"{requests_served() - served0:.0f} scheduler calls; RSS {mib(mem['VmRSS'])} "
            f"(start {mib(rss[0][1])}, second half {mib(min(half))}-{mib(max(half))}), "
            f"peak {mib(mem['VmHWM'])}"
        )
    finally:
        delete(kube, SOAK)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rest", type=float, default=120.0, help="idle seconds (default 120)")
    parser.add_argument("--pods", type=int, default=200, help="pods in the burst (default 200)")
    parser.add_argument("--soak", type=float, default=0.0, help="day-2 seconds (default none)")
    parser.add_argument("--replicas", type=int, default=20, help="the soak's pods (default 20)")
    parser.add_argument("--churn", type=float, default=10.0, help="s per pod replaced (10)")
    parser.add_argument("--every", type=float, default=300.0, help="s per soak report (300)")
    parser.add_argument("--keep", action="store_true", help="leave the cluster up")
    args = parser.parse_args(argv)
    if args.rest <= 0 or args.pods < 1:
        parser.error("--rest must be > 0 and --pods >= 1")
    if args.soak < 0 or args.replicas < 1 or args.churn <= 0 or args.every <= 0:
        parser.error("--soak must be >= 0, --replicas >= 1, --churn and --every > 0")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
