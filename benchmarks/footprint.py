#!/usr/bin/env python3
"""The extender's footprint where an operator runs it: a systemd service on a kubeadm
control-plane node, beside the kubelet's kube-scheduler, fed by load-watcher.

    flock /tmp/loadwise-lab.lock .venv/bin/python -m benchmarks.footprint    # ~12 min

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
- after the pods are deleted and the watch has caught up: resident memory again.

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
        kube.close()
        return 0
    finally:
        if not args.keep:
            realnodes.down()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rest", type=float, default=120.0, help="idle seconds (default 120)")
    parser.add_argument("--pods", type=int, default=200, help="pods in the burst (default 200)")
    parser.add_argument("--keep", action="store_true", help="leave the cluster up")
    args = parser.parse_args(argv)
    if args.rest <= 0 or args.pods < 1:
        parser.error("--rest must be > 0 and --pods >= 1")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
