"""`scripts/lab demo`: the whole product on one machine, no cluster needed.

Brings the lab up (building the real components from Go modules the first time), boots a
kubeadm-flavoured control-plane host (a podman container whose static-pod stand-in runs
the real kube-scheduler against the lab; lab/hosts.py), runs playbooks/site.yml on
it exactly as an operator would, places a workload and shows where the pods went and why.
Everything keeps running for the dashboard until `scripts/lab down`.
"""

from __future__ import annotations

import json
import time
from collections import Counter

from lab.cluster import Lab
from lab.hosts import EXTENDER_URL, ControlPlaneHost, node_image
from lab.workloads import deploy, placements, scored_events, wait_ready

FLAVOUR = "kubeadm"


def run(lab: Lab, replicas: int = 24) -> int:
    if not lab.running().get("kube-apiserver"):
        lab.up()
    lab.stop("kube-scheduler")  # the host's scheduler takes over
    host = ControlPlaneHost(FLAVOUR, node_image(), lab, lab.run)
    lab.log(f"booting {host.name}: podman, {FLAVOUR} flavour, the real kube-scheduler")
    host.create()
    prepared = host.prepare(lab.binaries(["kube-scheduler"])["kube-scheduler"])
    if prepared.rc != 0:
        lab.log(f"preparing the host failed:\n{prepared.tail(30)}")
        return 1
    lab.log(f"running playbooks/site.yml on it (log: {host.workdir}/{FLAVOUR}-*-site.log)")
    site = host.playbook("playbooks/site.yml")
    recap = site.stdout[site.stdout.rfind("PLAY RECAP") :].strip()
    print(recap, flush=True)
    if site.rc != 0:
        lab.log(f"site.yml failed:\n{site.tail(40)}")
        return 1
    lab.log("waiting for the extender's first load snapshot (load-watcher collects once a minute)")
    try:
        lab.log(f"extender ready: {wait_ready(EXTENDER_URL)}")
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
    print(f"\n{replicas} pods of deployment/{name}, placed by the real kube-scheduler:")
    for node in sorted(set(where) | {"lab-small", "lab-medium", "lab-large", "lab-hog"}):
        note = "  <- memory hog: 75% used by nothing any pod requests" if node == "lab-hog" else ""
        print(f"  {node:12} {where.get(node, 0):3} pods{note}")
    mine = scored_events(lab, name, timeout=0)
    if mine:
        decision = json.loads(mine[-1].metadata.annotations["loadwise.dev/decision"])
        print(f"\nwhy, for pod {mine[-1].involved_object.name}: {mine[-1].message}")
        print(f"  (decision annotation: policy {decision['policy']}, source {decision['source']})")
    kube = lab.kubeconfig
    print(f"""
See it live:   .venv/bin/loadwise-tui --kubeconfig {kube}
Undo it:       K8S_AUTH_KUBECONFIG={kube} \\
                 .venv/bin/ansible-playbook -i {host.inventory} playbooks/rollback.yml
Lab status:    scripts/lab status
Stop it all:   scripts/lab down   (removes the host container too)
""")
    return 0 if not Counter(where).get("lab-hog") else 2
