"""`scripts/lab demo`: the whole product on one machine, no cluster needed.

Brings the lab up (building the real components from Go modules the first time),
starts loadwise-extender on loopback fed by the lab's load-watcher, restarts the
real kube-scheduler with a config that calls it, places a workload, and shows where
the pods went and why. Everything keeps running for the dashboard until
`scripts/lab down`. (The Ansible installer is not in this loop yet: the extender
and the scheduler config are started here the way the roles configure them.)
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import yaml
from cluster import Lab
from e2e import EXTENDER_PORT, WEIGHT, deploy, placements, scheduler_config

EXTENDER = Path(sys.executable).parent / "loadwise-extender"


def _ready() -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{EXTENDER_PORT}/readyz", timeout=2) as r:
            return r.status == 200, r.read().decode().strip()
    except OSError as exc:
        return False, str(exc)


def run(lab: Lab, replicas: int = 24) -> int:
    if not lab.running().get("kube-apiserver"):
        lab.up()
    if not lab.pid("loadwise-extender"):
        config = lab.run / "loadwise-extender.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "listen": f"127.0.0.1:{EXTENDER_PORT}",
                    "kubeconfig": lab.kubeconfig,
                    "source": {
                        "kind": "load-watcher",
                        "url": lab.load_watcher_url,
                        "refresh_seconds": 10,
                    },
                }
            )
        )
        lab._spawn("loadwise-extender", [str(EXTENDER), "--config", str(config)])
    lab.log("waiting for the extender's first load snapshot (load-watcher collects once a minute)")
    deadline = time.monotonic() + 150
    while not (state := _ready())[0]:
        if time.monotonic() > deadline:
            lab.log(f"extender not ready: {state[1]}; log: {lab.logs / 'loadwise-extender.log'}")
            return 1
        time.sleep(2)
    lab.log(f"extender ready: {state[1]}")
    lab.stop("kube-scheduler")
    lab.start_scheduler(scheduler_config(lab.run, with_extender=True))
    lab.log(f"kube-scheduler restarted with the extender (weight {WEIGHT}, ignorable)")

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
    events = lab.core().list_namespaced_event("default", field_selector="reason=LoadwiseScored")
    mine = [e for e in events.items if e.involved_object.name.startswith(name)]
    if mine:
        decision = json.loads(mine[-1].metadata.annotations["loadwise.dev/decision"])
        print(f"\nwhy, for pod {mine[-1].involved_object.name}: {mine[-1].message}")
        print(f"  (decision annotation: policy {decision['policy']}, source {decision['source']})")
    kube = lab.kubeconfig
    print(f"""
See it live:   .venv/bin/loadwise-tui --kubeconfig {kube}
Lab status:    scripts/lab status
Stop it all:   scripts/lab down
""")
    return 0 if not Counter(where).get("lab-hog") else 2
