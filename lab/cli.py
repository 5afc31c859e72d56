"""`python -m lab` (scripts/lab): start, stop and inspect the lab. See docs/lab.md."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from lab.cluster import Lab
from lab.components import PORTS, UP, build_binaries
from lab.hosts import destroy_own
from lab.processes import LabError


def cmd_up(lab: Lab, args: argparse.Namespace) -> int:
    if lab.running():
        print(f"lab already up (run dir {lab.run}); `scripts/lab down` to stop it", file=sys.stderr)
        return cmd_status(lab, args)
    lab.up()
    print(f"export KUBECONFIG={lab.kubeconfig}")
    print(f"# load-watcher: {lab.load_watcher_url}/watcher   logs: {lab.logs}/")
    return 0


def cmd_down(lab: Lab, args: argparse.Namespace) -> int:
    # a control-plane host this run's `demo` left would keep scheduling against nothing;
    # only this run's: another lab's, or a test run's, is not this command's to remove
    destroy_own(lab.run)
    lab.down()
    return 0


def cmd_status(lab: Lab, args: argparse.Namespace) -> int:
    st = lab.status()
    if getattr(args, "json", False):
        print(json.dumps(st, indent=2))
    else:
        print(f"run dir: {st['run_dir']}")
        for name, pid in st["processes"].items():
            port = PORTS.get(name) or PORTS.get(f"{name}-client")
            state = f"running, pid {pid}" if pid else "not running"
            print(f"  {name:24} {state}" + (f", port {port}" if pid and port else ""))
        for check, result in st["checks"].items():
            if isinstance(result, dict):
                print(f"{check}:")
                for k, v in result.items():
                    print(f"  {k:24} {v}")
            else:
                print(f"{check}: {result}")
    return 0 if all(st["processes"][n] for n in UP) else 3


def cmd_scheduler(lab: Lab, args: argparse.Namespace) -> int:
    if args.stop:
        print("stopped" if lab.stop("kube-scheduler") else "no kube-scheduler was running")
        return 0
    if not lab.running().get("kube-apiserver"):
        print("the lab is not up: run `scripts/lab up` first", file=sys.stderr)
        return 1
    if lab.pid("kube-scheduler"):
        lab.stop("kube-scheduler")
    extra = [a for a in args.extra if a != "--"]
    pid = lab.start_scheduler(args.config, extra)
    log = lab.logs / "kube-scheduler.log"
    print(f"kube-scheduler running (pid {pid}), log {log}; `scripts/lab scheduler --stop` stops it")
    if args.foreground:
        try:
            with open(log) as f:
                f.seek(0, os.SEEK_END)
                while lab.pid("kube-scheduler"):
                    line = f.readline()
                    if line:
                        sys.stdout.write(line)
                    else:
                        time.sleep(0.2)
        except KeyboardInterrupt:
            lab.stop("kube-scheduler")
    return 0


def cmd_kubeconfig(lab: Lab, args: argparse.Namespace) -> int:
    print(lab.kubeconfig)
    return 0


def cmd_build(lab: Lab, args: argparse.Namespace) -> int:
    for k, v in build_binaries(args.names).items():
        print(f"{k}={v}")
    return 0


def cmd_prepare(lab: Lab, args: argparse.Namespace) -> int:
    from lab.prepare import prepare

    seconds = prepare(args.purpose)
    print(f"lab prepare {args.purpose}: " + ("everything was built already" if not seconds
          else f"built in {seconds:.0f}s"))  # fmt: skip
    return 0


def cmd_demo(lab: Lab, args: argparse.Namespace) -> int:
    from lab.demo import run_auto

    return run_auto(lab, args.replicas, args.nodes)


def cmd_realnodes(lab: Lab, args: argparse.Namespace) -> int:
    from lab import realnodes

    if args.action == "up":
        res = realnodes.up(previous=args.previous, worker_memory=args.worker_memory)
        version = realnodes.previous_version() if args.previous else realnodes.K8S_VERSION
        print(
            f"real-node cluster (control plane {version}) up in {res.seconds:.0f}s from {res.image}"
        )
        print(f"export KUBECONFIG={res.kubeconfig}")
        return 0
    if args.action == "down":
        realnodes.down()
        return 0
    st = realnodes.status()
    print(json.dumps(st, indent=2))
    ok = st.get("kube_scheduler") == "Running" and all(
        st.get("nodes_ready", {None: False}).values()
    )
    return 0 if ok else 3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="scripts/lab",
        description="The loadwise lab: a real Kubernetes control plane on 127.0.0.1 with "
        "kwok fake nodes, metrics-server and load-watcher (docs/lab.md).",
    )
    p.add_argument(
        "--run-dir", help="state directory (default $LOADWISE_LAB_RUN or /tmp/loadwise-lab)"
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("up", help="build if needed, start everything, register the fake nodes")
    sub.add_parser("down", help="stop every lab process")
    s = sub.add_parser("status", help="what runs, and health of API, nodes, metrics, load-watcher")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("scheduler", help="run the real kube-scheduler against the lab")
    s.add_argument(
        "--config",
        help="KubeSchedulerConfiguration file (clientConnection.kubeconfig "
        "is filled in with the lab's when empty)",
    )
    s.add_argument("--foreground", action="store_true", help="follow its log; Ctrl-C stops it")
    s.add_argument("--stop", action="store_true", help="stop the lab's kube-scheduler")
    s.add_argument("extra", nargs=argparse.REMAINDER, help="-- further kube-scheduler flags")
    sub.add_parser("kubeconfig", help="print the admin kubeconfig path")
    s = sub.add_parser(
        "demo", help="site.yml on real kubeadm nodes (else the lab's stand-ins), a workload"
    )
    s.add_argument("--replicas", type=int, default=12)
    s.add_argument(
        "--nodes",
        choices=["auto", "real", "lab"],
        default="auto",
        help="real: the real-node cluster; lab: the stand-ins; auto: real, else lab (default)",
    )
    s = sub.add_parser("build", help="build (or find cached) binaries: lab/build")
    s.add_argument("names", nargs="*")
    s = sub.add_parser(
        "prepare",
        help="build, with progress, everything a purpose needs (Go programs, node images)",
    )
    s.add_argument("purpose", nargs="?", default="demo", choices=["demo", "lab", "realnodes",
                   "test", "upgrade"])  # fmt: skip
    s = sub.add_parser(
        "realnodes", help="a real kubeadm cluster (containerd, kubelet) in podman containers"
    )
    s.add_argument("action", choices=["up", "down", "status"])
    s.add_argument(
        "--previous",
        action="store_true",
        help="up: control plane at the release before the lab's, to try `kubeadm upgrade apply`",
    )
    s.add_argument(
        "--worker-memory",
        metavar="QUANTITY",
        help="up: each worker a node of this much memory (e.g. 2Gi; 3Gi,2Gi gives one size "
        "per worker): a cgroup limit, its /proc/meminfo and memory eviction (docs/lab.md); "
        "default: unlimited",
    )
    args = p.parse_args(argv)
    lab = Lab(args.run_dir)
    handler = {
        "up": cmd_up,
        "down": cmd_down,
        "status": cmd_status,
        "scheduler": cmd_scheduler,
        "kubeconfig": cmd_kubeconfig,
        "build": cmd_build,
        "prepare": cmd_prepare,
        "demo": cmd_demo,
        "realnodes": cmd_realnodes,
    }[args.cmd]
    try:
        return handler(lab, args)
    except LabError as e:
        print(f"lab: error: {e}", file=sys.stderr)
        return 1
