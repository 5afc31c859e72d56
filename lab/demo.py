"""`scripts/lab demo`: the whole product on one machine, no cluster needed.

On real nodes when they can start (`run_real`): the real-node kubeadm cluster
(lab/realnodes.py: containerd, kubelet, kube-proxy in podman containers), site.yml on its
control-plane node exactly as an operator would run it, a worker made hot by the lab's burner
(real CPU, measured by metrics-server from its cgroups), a workload placed by the kubelet's
own kube-scheduler, and where the pods went and why.

Otherwise on the lab's stand-ins (`run`): the lab's control plane with kwok nodes, a
kubeadm-flavoured host whose static-pod stand-in runs the real kube-scheduler (lab/hosts.py),
and a memory hog declared on a kwok node. Each says which it is. Everything keeps running for
the dashboard until `scripts/lab down` / `scripts/lab realnodes down`.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

from lab import realnodes
from lab.cluster import Lab
from lab.hosts import EXTENDER_HEALTH_URL, ControlPlaneHost, node_image
from lab.playbook_stream import run_playbook
from lab.prepare import prepare
from lab.processes import LabError
from lab.progress import clock
from lab.workloads import (
    Cluster,
    create_deployment,
    deploy,
    placements,
    scored_events,
    wait_ready,
)

FLAVOUR = "kubeadm"


class Phases:
    """How long each phase of the demo took, printed as one line at the end."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self._mark = self.started
        self.done: list[tuple[str, float]] = []

    def end(self, name: str) -> float:
        now = time.monotonic()
        self.done.append((name, now - self._mark))
        self._mark = now
        return now - self.started

    def summary(self) -> str:
        parts = ", ".join(f"{name} {clock(s)}" for name, s in self.done)
        return f"took {clock(time.monotonic() - self.started)} in all: {parts}"


def run(lab: Lab, replicas: int = 24) -> int:
    phases = Phases()
    try:
        return _run(lab, replicas, phases)
    finally:
        lab.log(phases.summary())


def _run(lab: Lab, replicas: int, phases: Phases) -> int:
    lab.log("on the lab's stand-in nodes: kwok nodes, a static-pod stand-in host (docs/lab.md)")
    built = prepare("lab")
    phases.end("first build" if built else "build check")
    if not lab.running().get("kube-apiserver"):
        lab.up()
    phases.end("lab up")
    lab.stop("kube-scheduler")  # the host's scheduler takes over
    host = ControlPlaneHost(FLAVOUR, node_image(), lab, lab.run)
    lab.log(f"booting {host.name}: podman, {FLAVOUR} flavour, the real kube-scheduler")
    host.create()
    prepared = host.prepare(lab.binaries(["kube-scheduler"])["kube-scheduler"])
    if prepared.rc != 0:
        lab.log(f"preparing the host failed:\n{prepared.tail(30)}")
        return 1
    lab.log("running playbooks/site.yml on it, one line per task as it ends:")
    phases.end("host ready")
    site = run_playbook(host, "playbooks/site.yml", _show)
    phases.end("site.yml")
    if site.rc != 0:
        lab.log(f"site.yml failed:\n{site.tail(40)}")
        return 1
    lab.log("waiting for the extender's first load snapshot (load-watcher collects once a minute)")
    try:
        lab.log(f"extender ready: {wait_ready(EXTENDER_HEALTH_URL)}")
    except TimeoutError as exc:
        lab.log(str(exc))
        return 1

    from kubernetes.client.exceptions import ApiException

    name = f"demo-{int(time.time()) % 100000}"
    try:
        deploy(lab, name, replicas)
    except ApiException as exc:
        lab.log(f"could not create the workload: {exc.reason}")
        return 1
    where = placements(lab, name, replicas)
    phases.end("workload placed")
    print(f"\n{replicas} pods of deployment/{name}, placed by the real kube-scheduler:")
    for node in sorted(set(where) | {"lab-small", "lab-medium", "lab-large", "lab-hog"}):
        note = "  <- memory hog: 75% used by nothing any pod requests" if node == "lab-hog" else ""
        print(f"  {node:12} {where.get(node, 0):3} pods{note}")
    _why_and_next_steps(
        lab, name, lab.kubeconfig, host.inventory,
        "Lab status:    scripts/lab status\n"
        "Stop it all:   scripts/lab down   (removes the host container too)",
    )  # fmt: skip
    return 0 if not Counter(where).get("lab-hog") else 2


def _why_and_next_steps(
    cluster: Cluster, name: str, kubeconfig: str, inventory: Path, stop: str
) -> None:
    """Why the last pod of `name` went where it did, then the commands to watch and undo."""
    mine = scored_events(cluster, name, timeout=10)
    if mine:
        decision = json.loads(mine[-1].metadata.annotations["loadwise.dev/decision"])
        print(f"\nwhy, for pod {mine[-1].involved_object.name}: {mine[-1].message}")
        print(f"  (decision annotation: policy {decision['policy']}, source {decision['source']})")
    print(f"""
See it live:   .venv/bin/loadwise-tui --kubeconfig {kubeconfig}
Undo it:       K8S_AUTH_KUBECONFIG={kubeconfig} \\
                 .venv/bin/ansible-playbook -i {inventory} playbooks/rollback.yml
{stop}
""")


# The real-node demo's hot worker and how much CPU the burner spends there: 800m is 67% of a
# worker's 1.2 cores allocatable (lab/realnodes.py), while the burner requests 10m.
HOT, COOL = realnodes.WORKERS
BURN_MILLICORES = 800


def _say(msg: str) -> None:
    print(f"demo: {msg}", flush=True)


def _show(line: str) -> None:
    """A line of site.yml's progress (lab/playbook_stream.py), on screen at once."""
    print(line, flush=True)


def run_real(replicas: int = 12) -> int:
    """The demo on the real-node cluster; raises LabError when the nodes cannot start or a
    step on them fails (the caller then falls back to `run`)."""
    phases = Phases()
    try:
        return _run_real(replicas, phases)
    finally:
        _say(phases.summary())


def _run_real(replicas: int, phases: Phases) -> int:
    _say("on real kubeadm nodes: containerd, kubelet, kube-proxy (python -m lab realnodes)")
    built = prepare("realnodes")
    phases.end("first build" if built else "build check")
    up = realnodes.up()
    phases.end("cluster up")
    _say(f"cluster up in {up.seconds:.0f}s: {', '.join(realnodes.nodes())}")
    cluster = realnodes.Cluster(up.kubeconfig)
    host = realnodes.control_plane_host(up.kubeconfig.parent, up.kubeconfig)
    _say(f"running playbooks/site.yml on {host.name} over SSH ({host.address}),")
    _say("one line per task as it ends (its outcome, its seconds):")
    site = run_playbook(host, "playbooks/site.yml", _show)
    phases.end("site.yml")
    if site.rc != 0:
        _say(f"site.yml failed (log: {host.workdir}):\n{site.tail(40)}")
        return 1
    _say(f"making {HOT} hot: the burner spends {BURN_MILLICORES}m of real CPU, requesting 10m")
    _say("(metrics-server scrapes every 15 s, load-watcher once a minute: about two minutes)")
    hot = realnodes.make_hot(cluster, HOT, BURN_MILLICORES, EXTENDER_HEALTH_URL)
    phases.end("real load measured")
    cool = realnodes.node_cpu_millicores(cluster, COOL)
    name = f"demo-{int(time.time()) % 100000}"
    create_deployment(cluster, name, replicas, realnodes.workload())
    where = placements(cluster, name, replicas)
    phases.end("workload placed")
    print(f"\n{replicas} pods of deployment/{name}, placed by the kubelet's own kube-scheduler:")
    for node, cpu in ((HOT, hot), (COOL, cool)):
        note = "  <- the burner: real load no pod requested" if node == HOT else ""
        print(f"  {node:18} {where.get(node, 0):3} pods   cpu {cpu:5.0f}m measured{note}")
    _why_and_next_steps(
        cluster, name, str(up.kubeconfig), host.inventory,
        "Stop it all:   scripts/lab realnodes down",
    )  # fmt: skip
    return 0 if not where.get(HOT) else 2


def run_auto(lab: Lab, replicas: int, nodes: str = "auto") -> int:
    """nodes: real (fail if they cannot start), lab (the stand-ins), auto (real, else lab)."""
    if nodes in ("real", "auto"):
        try:
            return run_real(replicas)
        except LabError as exc:
            if nodes == "real":
                raise
            reason = str(exc).strip().splitlines()[0]
            _say(f"the real-node demo failed ({reason}); falling back to the stand-ins")
            realnodes.down()
    return run(lab, replicas)
