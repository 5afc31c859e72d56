#!/usr/bin/env python3
"""A stream of pods that come and go on real kubelets, workers of different sizes, with the
consequences counted (day-2 evidence).

    make bench-realchurn          # about 80 min with the defaults (5 runs of each contender)
    flock /tmp/loadwise-lab.lock .venv/bin/python -m benchmarks.realchurn --help

benchmarks/realplacement.py places one burst beside a memory hog. Here the same real-node
cluster (lab/realnodes.py) gets a stream instead: each worker a node of its own size
(``--worker-memory``, one size per worker: a cgroup limit on its container, its /proc/meminfo
saying so, the kubelet evicting at memory.available < 100Mi; two workers, WORKERS: a third
would be a third kubelet and containerd on this 2-core machine, and the layout is a constant
every real-node test reads), and on it

- a few Deployments (WORKLOADS) of the lab's burner pods, each workload's pods holding more
  memory than they request (2-4x) or less, as real workloads do;
- the churn: every pod is deleted once it has lived a lifetime drawn from its workload's range
  (the i-th pod of a workload, in creation order, gets the i-th lifetime of that workload's
  seeded draw, lifetimes()), and its ReplicaSet makes a replacement the scheduler places; for
  ``--duration`` seconds, then ``--tail`` seconds more without deletions so that the last
  replacements start;
- the hog for part of the stream: a process outside Kubernetes on the first worker (the lab's
  burner as a systemd unit, realnodes.start_hog) holding ``--hog-memory`` MiB, from before
  the stream starts until ``--hog-seconds`` into it (0: no hog). By requests the first worker
  (the largest by default) has the most room; by what it really holds, the least.

Every random choice comes from ``--seed``: run k of each contender uses the seed
"<seed>/<k>", so stock's and loadwise's k-th runs get the same lifetimes. Counted per run
(benchmarks/realcount.py, as realplacement counts): pods bound per node, OOM kills (kubelet-
reported and the kernel's), kubelet evictions, MemoryPressure seconds per node, container
restarts, pod startup (creation to Ready) p50 and p99, each worker's peak working set and mean
CPU. Contenders as realplacement runs them, in blocks: rollback.yml (nothing to undo on a new
cluster) and every stock run, then site.yml and every loadwise run. Not interleaved: each
switch is a playbook run of 3-6 min here (site.yml took 192 s and 381 s in
docs/placement.md's runs), two per pair. Each run starts from no churn pod, no hog and no
worker under MemoryPressure.

It is a measurement: the exit code is non-zero only when something is broken (an exception, a
run where no pod was bound at all or the churn deleted none). Each run's record goes to stderr
as it ends and to ``--out``/results.json (written again after every run), the table to stdout.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import realcount
from benchmarks.realcount import (
    CONTENDERS,
    HOT,
    MIB,
    Column,
    Counted,
    commit,
    markdown_table,
    percentile,
    tally,
)
from lab import realnodes
from lab.workloads import create_deployment

# every churn pod carries it: one list call finds them all (create_deployment adds app=<name>)
LABEL = "loadwise-bench"
PREFIX = "churn-"


@dataclass(frozen=True)
class Workload:
    """A Deployment of burner pods each requesting `request_mib` and holding `hold_mib`
    (burning `cpu` millicores, requesting 10m), deleted after a lifetime in `lifetime`
    (seconds, uniform)."""

    name: str
    replicas: int
    request_mib: int
    hold_mib: int
    lifetime: tuple[float, float]
    cpu: int = 0

    @property
    def deployment(self) -> str:
        return PREFIX + self.name


# The stream's workloads: 12 pods holding 1024 MiB and requesting 672 Mi, about 1.2 GiB of
# the node's working set with each pod's runtime overhead (in realplacement's runs 10 pods of
# 128 MiB raised a worker's working set by about 1420 MiB: some 14 MiB a pod beyond what it
# holds). That fits on the 2 GiB worker alone (1948 MiB allocatable, idling at 160-430 MiB,
# docs/lab.md); beside the hog on the 3 GiB worker only a part does. Stock split the stream
# evenly in the smoke run (2026-11-28, 6/6 at the start, 19/19 over 150 s): half of it, some
# 570 MiB, on the 3 GiB worker. With a 2100 MiB hog that worker held 2246 MiB before the
# stream and peaked at 2814 MiB, under its 2972 MiB allocatable: no pressure for either
# contender. The default hog is 2400 MiB so that stock's half crosses the eviction threshold
# and the 3072 MiB limit (146 + 2400 + 570 MiB), while the worker still reads 83 %, under the
# extender's 90 % filter threshold (roles/loadwise/defaults/main.yml). Not yet run so.
WORKLOADS = (
    Workload("cache", 4, request_mib=40, hold_mib=128, lifetime=(60, 150)),  # 3.2x its request
    Workload("api", 4, request_mib=32, hold_mib=96, lifetime=(30, 90), cpu=20),  # 3x
    Workload("batch", 4, request_mib=96, hold_mib=32, lifetime=(20, 60)),  # a third
)


def run_seed(seed: int, repeat: int) -> str:
    """The seed of each contender's `repeat`-th run (1-based): the same for every contender,
    so their k-th runs are paired."""
    return f"{seed}/{repeat}"


def lifetimes(workloads: Sequence[Workload], duration: float, seed: str) -> dict[str, list[float]]:
    """Each workload's lifetimes, in the order its pods are created, drawn uniformly from its
    range (0.1 s steps) with a generator of its own seeded by `seed` and its name (adding a
    workload leaves the others' draws as they were). Enough for twice the pods that could
    come and go in `duration` if every pod lived its shortest lifetime (evicted or killed pods
    take lifetimes too); Churn reuses them from the start should a run need more."""
    out: dict[str, list[float]] = {}
    for w in workloads:
        lo, hi = w.lifetime
        if not 0 < lo <= hi:
            raise ValueError(f"{w.name}: lifetime range {w.lifetime} is not 0 < low <= high")
        rng = random.Random(f"{seed}/{w.name}")
        count = 2 * w.replicas * (math.ceil(duration / lo) + 1)
        out[w.name] = [round(rng.uniform(lo, hi), 1) for _ in range(count)]
    return out


@dataclass(frozen=True)
class Pod:
    """What the churn needs of a pod: its uid, name, workload and creation (epoch s)."""

    uid: str
    name: str
    workload: str
    created: float


class Churn:
    """Which pods to delete when: each new pod of a workload, in order of creation (then of
    name: creation times have 1 s resolution), takes its workload's next lifetime, and is due
    once it has lived it. Pure: it is fed pods and a clock."""

    def __init__(self, plan: Mapping[str, Sequence[float]]) -> None:
        self.plan = plan
        self.used: Counter[str] = Counter()  # lifetimes taken per workload
        self.deadline: dict[str, float] = {}  # uid -> when it is due
        self.lifetime: dict[str, float] = {}  # uid -> the lifetime it took
        self.done: set[str] = set()  # uids already returned as due

    def due(self, pods: Sequence[Pod], now: float) -> list[Pod]:
        """The pods of `pods` due for deletion at `now` and not returned before (the caller
        deletes them)."""
        for pod in sorted(pods, key=lambda p: (p.created, p.name)):
            if pod.uid in self.deadline:
                continue
            drawn = self.plan[pod.workload]
            life = drawn[self.used[pod.workload] % len(drawn)]
            self.used[pod.workload] += 1
            self.lifetime[pod.uid] = life
            self.deadline[pod.uid] = pod.created + life
        out = [p for p in pods if p.uid not in self.done and self.deadline[p.uid] <= now]
        self.done.update(p.uid for p in out)
        return out


@dataclass
class Run(Counted):
    """One contender's run: what the cluster did with the stream."""

    contender: str
    repeat: int
    seed: str
    started: str  # UTC
    load_average: tuple[float, float, float]
    before_mib: dict[str, float]  # each worker's working set just before the stream
    pods: int = 0  # pods seen (the first ones and every replacement)
    deleted: int = 0  # pods the churn deleted
    lifetimes_used: dict[str, int] = field(default_factory=dict)  # by workload
    bound_by_workload: dict[str, dict[str, int]] = field(default_factory=dict)


def template(w: Workload) -> dict[str, Any]:
    """The realnodes burner pod for `w`, labelled for the sampler."""
    tpl = realnodes.workload(cpu="10m", memory=f"{w.request_mib}Mi", burn_cpu=w.cpu,
                             hold_memory=w.hold_mib)  # fmt: skip
    meta = tpl.setdefault("metadata", {})
    meta["labels"] = {**meta.get("labels", {}), LABEL: "realchurn", "workload": w.name}
    return tpl


def quiet(kube: realnodes.Cluster, workloads: Sequence[Workload]) -> None:
    realcount.quiet(kube, [w.deployment for w in workloads])


def delete_pod(kube: realnodes.Cluster, name: str) -> None:
    """Delete a pod now (its template's grace period, 1 s); gone already is fine."""
    from kubernetes.client.exceptions import ApiException

    try:
        kube.core().delete_namespaced_pod(name, "default")
    except ApiException as exc:
        if exc.status != 404:
            raise


def churn_pods(pods: Sequence[Any]) -> list[Pod]:
    """The sampled pods the churn acts on: not being deleted already (by it or by the kubelet's
    eviction, whose pods end Failed and stay until deleted)."""
    return [
        Pod(
            p.metadata.uid,
            p.metadata.name,
            p.metadata.labels["workload"],
            p.metadata.creation_timestamp.timestamp(),
        )  # fmt: skip
        for p in pods
        if p.metadata.deletion_timestamp is None
    ]


def evidence_path(out: str, contender: str, repeat: int) -> Path:
    """Where a run's Events and extender journal are kept (``realcount.evidence``): beside
    the results, one file per run, replaced when the same run is made again."""
    return Path(out) / "evidence" / f"{contender}-{repeat}.json.gz"


def one_run(
    kube: realnodes.Cluster,
    contender: str,
    repeat: int,
    args: argparse.Namespace,
    workloads: Sequence[Workload] = WORKLOADS,
) -> Run:
    seed = run_seed(args.seed, repeat)
    churn = Churn(lifetimes(workloads, args.duration, seed))
    quiet(kube, workloads)
    realcount.settle(
        kube, contender, (args.hog_cpu, args.hog_memory) if args.hog_seconds > 0 else None
    )
    run = Run(
        contender,
        repeat,
        seed,
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        os.getloadavg(),
        {n: round(realnodes.working_set_bytes(n) / MIB, 1) for n in realnodes.WORKERS},
    )
    window = realcount.Window()
    for w in workloads:
        create_deployment(kube, w.deployment, w.replicas, template(w))
    hog_on = args.hog_seconds > 0
    while True:
        window.sampler.sample(kube, f"{LABEL}=realchurn")
        elapsed = window.elapsed()
        if hog_on and elapsed >= args.hog_seconds:
            realnodes.stop_hog(HOT)
            hog_on = False
        if elapsed < args.duration:
            for pod in churn.due(churn_pods(window.sampler.pods), time.time()):
                delete_pod(kube, pod.name)
                run.deleted += 1
        if elapsed >= args.duration + args.tail:
            break
        time.sleep(args.every)
    pods = window.count(kube, run)
    kept = evidence_path(args.out, contender, repeat)
    kept.parent.mkdir(parents=True, exist_ok=True)
    try:
        found: dict[str, Any] = realcount.evidence(kube, window.since)
    except Exception as exc:  # the run's figures are counted already: keep them, say why not this
        found = {"since": window.since, "error": f"{type(exc).__name__}: {exc}"}
    with gzip.open(kept, "wt") as f:
        json.dump(found, f)
    run.pods = len(pods)
    run.lifetimes_used = dict(churn.used)
    run.bound_by_workload = {
        w.name: tally(p for p in pods if p.name.startswith(w.deployment + "-")).bound
        for w in workloads
    }
    # from the last sample: a pod the churn deleted was Running when last seen
    last = {p.metadata.uid for p in window.sampler.pods if p.metadata.deletion_timestamp is None}
    seen = window.sampler.seen
    run.running_at_end = tally(s for uid, s in seen.items() if uid in last).running_at_end
    realcount.clear(kube, [w.deployment for w in workloads])
    return run


def columns(workers: Sequence[str] = realnodes.WORKERS) -> list[Column]:
    """The table's columns, per worker where per node (named by the worker's last part: w1)."""

    def short(n: str) -> str:
        return n.rsplit("-", 1)[-1]

    def per_node(title: str, key: str) -> list[Column]:
        def pick(n: str) -> Callable[[Any], float | None]:
            return lambda r: getattr(r, key).get(n, 0)

        return [(f"{title} {short(n)}", pick(n)) for n in workers]

    return [
        *per_node("pods on", "bound"),
        ("OOM kills", lambda r: sum(r.oom_kills.values())),
        ("kernel OOM kills", lambda r: sum(sum(t.values()) for t in r.kernel_oom.values())),
        ("evicted", lambda r: sum(r.evicted_pods.values())),
        ("API-evicted", lambda r: sum(r.api_evicted.values())),
        *per_node("pressure s", "pressure_seconds"),
        ("restarts", lambda r: r.restarts),
        ("start p50 s", lambda r: percentile(r.startup_seconds, 50)),
        ("start p99 s", lambda r: percentile(r.startup_seconds, 99)),
        ("never ready", lambda r: r.never_ready),
        *per_node("peak MiB", "peak_mib"),
        ("pods", lambda r: r.pods),
    ]


def broken(runs: Sequence[Run]) -> list[str]:
    """What says the benchmark itself failed, not a contender: a run where no pod was bound
    (the scheduler or the cluster did nothing) or where the churn deleted nothing (the stream
    did not run)."""
    out = []
    for r in runs:
        if not r.bound:
            out.append(f"{r.contender} run {r.repeat}: no pod bound")
        elif r.deleted == 0:
            out.append(f"{r.contender} run {r.repeat}: the churn deleted no pod")
    return out


def write(out: Path, meta: dict[str, Any], runs: Sequence[Run]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        **meta,
        "runs": [asdict(r) for r in runs],
        "summary": realcount.summary(runs, columns()),
    }
    (out / "results.json").write_text(json.dumps(doc, indent=1))


def recorded(path: Path) -> list[Run]:
    """The runs a results.json (``write``) holds."""
    return realcount.recorded(path, Run)


def run(args: argparse.Namespace) -> int:
    # the tree the runs used: read before them, not after (a commit made meanwhile)
    started, at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit()
    wanted = realnodes.worker_limits(args.worker_memory)
    meta: dict[str, Any] = {
        "args": vars(args),
        "commit": at,
        "started": started,
        "worker_memory_mib": {n: v // MIB for n, v in wanted.items()},
        "hog_node": HOT,
        "workloads": [asdict(w) for w in WORKLOADS],
    }
    kubeconfig = (
        Path(os.environ.get("LOADWISE_REALNODES_RUN", "/tmp/loadwise-realnodes")) / "admin.conf"
    )
    if not args.reuse:
        up = realnodes.up(worker_memory=args.worker_memory)
        kubeconfig = up.kubeconfig
        print(f"cluster up in {up.seconds:.0f} s", file=sys.stderr)
    limits = {n: realnodes.memory_limit(n) for n in realnodes.WORKERS}
    if limits != wanted:
        raise RuntimeError(f"workers' memory limits {limits}, not {wanted} (up --worker-memory)")
    runs: list[Run] = []
    out = Path(args.out)
    try:
        host = realnodes.control_plane_host(
            Path(tempfile.mkdtemp(prefix="loadwise-realchurn-")), kubeconfig
        )
        kube = realnodes.Cluster(kubeconfig)
        realcount.in_blocks(
            host, kube, args.contenders, args.repeats,
            lambda k, c, i: one_run(k, c, i, args), runs,
            lambda done: write(out, meta, done), args.first_repeat,
        )  # fmt: skip
        quiet(kube, WORKLOADS)
    finally:
        write(out, meta, runs)
        if not args.keep and not args.reuse:
            realnodes.down()
    sizes = ", ".join(f"{n} {v // MIB} MiB" for n, v in wanted.items())
    hog = (
        f"hog on {HOT}: {args.hog_memory} MiB, {args.hog_cpu}m CPU, the stream's first "
        f"{args.hog_seconds:g} s"
        if args.hog_seconds > 0
        else "no hog"
    )
    mix = ", ".join(f"{w.name} {w.replicas} x {w.hold_mib}/{w.request_mib}Mi" for w in WORKLOADS)
    print(
        f"Started {started}, commit {at}; load average at the end "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; workers {sizes}; {hog}; "
        f"workloads {mix} (held MiB/requested); churn {args.duration:g} s + {args.tail:g} s "
        f"without deletions; seed {args.seed}.\n"
    )
    print(markdown_table(runs, columns()))
    problems = broken(runs)
    for p in problems:
        print(f"BROKEN: {p}", file=sys.stderr)
    return 1 if problems else 0


def worker_memory(text: str) -> str:
    """argparse's check of --worker-memory (realnodes.worker_limits), the text kept as given."""
    try:
        realnodes.worker_limits(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per contender (default 5)")
    parser.add_argument(
        "--first-repeat",
        type=int,
        default=1,
        help="the first run's number; run N replays trace SEED/N (default 1)",
    )
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--worker-memory",
        type=worker_memory,
        default="3Gi,2Gi",
        help=f"one size for all workers or one each, in order {', '.join(realnodes.WORKERS)} "
        "(default 3Gi,2Gi)",
    )
    parser.add_argument("--duration", type=float, default=360.0, help="churn, s (default 360)")
    parser.add_argument(
        "--tail", type=float, default=20.0, help="sampling after the churn, s (default 20)"
    )
    parser.add_argument("--hog-memory", type=int, default=2400, help="MiB (default 2400)")
    parser.add_argument("--hog-cpu", type=int, default=300, help="millicores (default 300)")
    parser.add_argument(
        "--hog-seconds",
        type=float,
        default=240.0,
        help="the hog runs for the stream's first SECONDS (default 240; 0: no hog)",
    )
    parser.add_argument("--every", type=float, default=2.0, help="sampling, s (default 2)")
    parser.add_argument("--out", default="/tmp/loadwise-realchurn")
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
    p = parser()
    args = p.parse_args(argv)
    if args.table is not None:
        print(markdown_table(recorded(args.table), columns()))
        return 0
    hot_mib = realnodes.worker_limits(args.worker_memory)[HOT] // MIB
    if args.hog_seconds > 0 and args.hog_memory >= hot_mib:
        p.error(f"--hog-memory {args.hog_memory} MiB does not fit on {HOT} ({hot_mib} MiB)")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
