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
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import realcount
from benchmarks.realcount import (
    CONTENDERS,
    MIB,
    Column,
    Counted,
    commit,
    markdown_table,
    tally,
)
from lab import realnodes
from lab.workloads import create_deployment, scored_events

HOT, COOL = realnodes.WORKERS
NAME = "realplace"


@dataclass
class Run(Counted):
    """One contender's run: what the cluster did with the burst."""

    contender: str
    repeat: int
    started: str  # UTC
    load_average: tuple[float, float, float]
    before_mib: dict[str, float]  # each worker's working set just before the burst
    first_bound: dict[str, int] = field(default_factory=dict)  # the burst's own pods
    why_hot: list[str] = field(default_factory=list)  # the extender's Events, pods on HOT


def burst_template(args: argparse.Namespace) -> dict[str, Any]:
    """A burner pod holding --pod-memory MiB while requesting --pod-request (and 10m CPU): the
    realnodes workload, with the memory it holds above what it asks for."""
    return realnodes.workload(cpu="10m", memory=args.pod_request, hold_memory=args.pod_memory)


def clear(kube: realnodes.Cluster) -> None:
    """The burst and the hog gone (realcount.clear)."""
    realcount.clear(kube, [NAME])


def quiet(kube: realnodes.Cluster) -> None:
    """No burst pod, no hog, no worker under MemoryPressure: where every run starts."""
    realcount.quiet(kube, [NAME])


def one_run(kube: realnodes.Cluster, contender: str, repeat: int, args: argparse.Namespace) -> Run:
    quiet(kube)
    realcount.settle(kube, contender, (args.hog_cpu, args.hog_memory))
    run = Run(
        contender,
        repeat,
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        os.getloadavg(),
        {n: round(realnodes.working_set_bytes(n) / MIB, 1) for n in realnodes.WORKERS},
    )
    window = realcount.Window()
    create_deployment(kube, NAME, args.pods, burst_template(args))
    while True:
        window.sampler.sample(kube, f"app={NAME}")
        if window.elapsed() >= args.window:
            break
        time.sleep(args.every)
    pods = window.count(kube, run)
    run.first_bound = tally(pods[: args.pods]).bound
    if contender == "loadwise":
        on_hot = {p.name for p in pods if p.node == HOT}
        run.why_hot = [
            e.message
            for e in scored_events(kube, NAME, since=window.since, at_least=0, timeout=0)
            if e.involved_object.name in on_hot
        ]
    clear(kube)
    return run


# The table's columns (startup: "-" in a run where no pod became Ready).
COLUMNS: list[Column] = [
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
        lambda r: statistics.median(r.startup_seconds) if r.startup_seconds else None,
    ),
    ("startup max s", lambda r: max(r.startup_seconds, default=None)),
    ("never ready", lambda r: r.never_ready),
    ("peak MiB hot", lambda r: r.peak_mib.get(HOT, 0.0)),
    ("peak MiB cool", lambda r: r.peak_mib.get(COOL, 0.0)),
    ("CPU m hot", lambda r: r.cpu_millicores.get(HOT, 0.0)),
    ("CPU m cool", lambda r: r.cpu_millicores.get(COOL, 0.0)),
]


def table(runs: list[Run]) -> str:
    return markdown_table(runs, COLUMNS)


def recorded(path: Path) -> list[Run]:
    """The runs a results.json (``run``'s ``--out``) holds."""
    return realcount.recorded(path, Run)


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
        realcount.in_blocks(
            host, kube, args.contenders, args.repeats,
            lambda k, c, i: one_run(k, c, i, args), runs,
        )  # fmt: skip
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
    parser.add_argument(
        "--table",
        type=Path,
        metavar="RESULTS",
        help="print the table of a results.json and stop (no cluster)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.table is not None:
        print(table(recorded(args.table)))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
