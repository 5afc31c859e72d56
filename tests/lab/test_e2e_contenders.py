"""The placement benchmark's contenders (benchmarks/placement/contenders.py) against the lab:
each binds a pod addressed to its own schedulerName and leaves a pod addressed to another
alone, and the Trimaran ones score with load-watcher's data.

The Trimaran scheduler is scheduler-plugins v0.34.7 (Kubernetes 1.34) against the lab's 1.36
API server (lab/VERSIONS.md); the first run builds it (`lab/build trimaran-scheduler`).
"""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any

import pytest
import yaml

from benchmarks.placement.contenders import CONTENDERS, scheduler_config
from lab import DEFAULT_NODES
from lab.components import build_binaries
from lab.fakenodes import parse_quantity
from tests.lab.e2e import HOT

pytestmark = pytest.mark.lab

HOG = next(n for n in DEFAULT_NODES if n.name == HOT)
# What Trimaran's collector and plugins log when they have no data for a node
# (pkg/trimaran/collector.go, targetloadpacking.go, loadvariationriskbalancing.go at v0.34.7).
NO_DATA = (
    "Load watcher client failed",
    "Metrics not available from watcher",
    "Unable to find metrics for node",
    "Failed to get metrics for node",
)


def _pod(name: str, scheduler_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "contender-check"}},
        "spec": {
            "schedulerName": scheduler_name,
            "nodeSelector": {"type": "kwok"},
            "containers": [
                {
                    "name": "app",
                    "image": "registry.invalid/app:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ],
        },
    }


def _node_of(lab, name: str) -> str | None:
    node: str | None = lab.core().read_namespaced_pod(name, "default").spec.node_name
    return node


def _wait_bound(lab, name: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while (node := _node_of(lab, name)) is None:
        assert time.monotonic() < deadline, f"{name} not bound after {timeout:.0f} s"
        time.sleep(0.5)
    return node


def _log_fields(log: str, message: str) -> list[dict[str, str]]:
    """key=value pairs of every klog line with ``message`` (kube-scheduler's text format)."""
    out = []
    for line in log.splitlines():
        if f'"{message}"' in line:
            out.append(dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line.split(f'"{message}"', 1)[1])))
    return [{k: v.strip('"') for k, v in f.items()} for f in out]


@pytest.mark.parametrize("name", sorted(CONTENDERS))
def test_contender_binds_its_own_pods_only(lab, tmp_path, name):
    c = CONTENDERS[name]
    # by its schedulerName: a contender's name may hold what a pod's may not ("+")
    mine, other = f"contender-{c.scheduler_name}", f"contender-not-{c.scheduler_name}"
    core = lab.core()
    with c.start(lab, tmp_path, verbosity=6 if c.kind == "trimaran" else 0):
        core.create_namespaced_pod("default", _pod(other, f"not-{c.scheduler_name}"))
        core.create_namespaced_pod("default", _pod(mine, c.scheduler_name))
        try:
            node = _wait_bound(lab, mine)
            time.sleep(2)
            stray = _node_of(lab, other)
        finally:
            for p in (mine, other):
                core.delete_namespaced_pod(p, "default", grace_period_seconds=0)
    nodes = {n.metadata.name for n in core.list_node(label_selector="type=kwok").items}
    assert node in nodes
    assert stray is None, f"{name} bound a pod addressed to another scheduler to {stray}"
    if c.kind != "trimaran":
        return
    log = (tmp_path / f"{name}.scheduler.log").read_text()
    missing = [m for m in NO_DATA if m in log]
    assert not missing, f"{name} had no load-watcher data: {missing}\n{log[-3000:]}"
    if c.policy == "TargetLoadPacking":
        # logged only after a node's CPU percentage was found in load-watcher's document
        seen = _log_fields(log, "Calculating CPU utilization and capacity")
        util = {f["nodeName"]: float(f["cpuUtilMillis"]) for f in seen}
        assert set(util) == nodes, f"TLP scored {sorted(util)} with data\n{log[-3000:]}"
        # the hog's background CPU (500m of 4 cores) shows in what TLP read
        assert util[HOG.name] >= 0.8 * parse_quantity(HOG.background_cpu) * 1000, util
    else:
        seen = _log_fields(log, "Resource usage statistics for node")
        mem = {f["node"]: float(f["usedAvg"]) for f in seen if f["resource"] == "memory"}
        assert set(mem) == nodes, f"LVRB scored {sorted(mem)} with data\n{log[-3000:]}"
        # usedAvg is in MiB (resourcestats.go MegaFactor); the hog's background memory shows
        assert mem[HOG.name] >= 0.9 * parse_quantity(HOG.background_memory) / 2**20, mem


# A kubeconfig for an API server that is not there: --write-config-to exits after
# validating the config and building the profiles (plugins included), before any request.
_NOWHERE = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


@pytest.mark.parametrize("name", sorted(CONTENDERS))
def test_the_real_scheduler_accepts_the_config(tmp_path, name):
    """The binary each contender runs validates its config and builds its one profile with
    the plugin arguments the benchmark means (Trimaran: the defaults, the watcher address)."""
    c = CONTENDERS[name]
    binary = build_binaries([c.binary])[c.binary]
    kubeconfig = tmp_path / "nowhere.kubeconfig"
    kubeconfig.write_text(_NOWHERE)
    config, out = tmp_path / "in.yaml", tmp_path / "out.yaml"
    watcher = "http://127.0.0.1:2020"
    config.write_text(yaml.safe_dump(scheduler_config(c, watcher, str(kubeconfig))))
    res = subprocess.run(
        [binary, f"--config={config}", f"--write-config-to={out}", "--secure-port=0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    effective = yaml.safe_load(out.read_text())
    assert effective["clientConnection"]["qps"] == 500
    [profile] = effective["profiles"]
    assert profile["schedulerName"] == c.scheduler_name
    score = profile["plugins"]["score"]
    if c.kind != "trimaran":
        assert not score.get("enabled") and not score.get("disabled")
        return
    assert [p["name"] for p in score["enabled"]] == [c.policy]
    [args] = [p["args"] for p in profile["pluginConfig"] if p["name"] == c.policy]
    assert args["watcherAddress"] == watcher
    if c.policy == "TargetLoadPacking":
        # scheduler-plugins' defaults (apis/config/v1/defaults.go)
        assert args["targetUtilization"] == 40
        assert args["defaultRequestsMultiplier"] == "1.5"
        assert args["defaultRequests"] == {"cpu": "1"}
    else:
        assert (args["safeVarianceMargin"], args["safeVarianceSensitivity"]) == (1, 1)
