"""Smoke tests of the lab itself: the real programs start, fake nodes work, metrics flow.

kwok -> metrics-server (metrics.k8s.io) -> load-watcher (/watcher), with the background
usage declared on each node visible at every step.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from lab import DEFAULT_NODES, USAGE_CPU, USAGE_MEMORY, build_binaries, parse_quantity
from lab.fakenodes import BG_CPU

pytestmark = pytest.mark.lab

NODES = {n.name: n for n in DEFAULT_NODES}
GI = 2**30


def _poll(fn, timeout=90, interval=2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except AssertionError as e:
            last = e
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s: {last}")


@pytest.fixture
def namespace(lab):
    from kubernetes import client

    name = f"smoke-{uuid.uuid4().hex[:6]}"
    core = lab.core()
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


def _pod(name, *, node=None, cpu="100m", memory="128Mi", usage_cpu=None, usage_memory=None):
    ann = {}
    if usage_cpu:
        ann[USAGE_CPU] = usage_cpu
    if usage_memory:
        ann[USAGE_MEMORY] = usage_memory
    spec = {
        "containers": [
            {
                "name": "app",
                "image": "registry.invalid/never-pulled:0",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": ann},
        "spec": spec,
    }


def test_nodes_ready_with_declared_capacity(lab):
    nodes = {n.metadata.name: n for n in lab.core().list_node().items}
    for name, spec in NODES.items():
        assert name in nodes, f"{name} not registered"
        n = nodes[name]
        ready = [c for c in n.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True", f"{name} not Ready: {n.status.conditions}"
        assert parse_quantity(n.status.allocatable["cpu"]) == parse_quantity(spec.cpu)
        assert parse_quantity(n.status.allocatable["memory"]) == parse_quantity(spec.memory)


def test_node_metrics_reflect_background_usage(lab):
    nm = lab.wait_node_metrics(NODES)
    for name, spec in NODES.items():
        mem = nm[name]["memory"]
        # Background memory is a gauge: exact, plus whatever pods on the node use.
        assert mem >= parse_quantity(spec.background_memory), (name, mem)
    hog = nm["lab-hog"]["memory"] / parse_quantity(NODES["lab-hog"].memory)
    others = [nm[n]["memory"] / parse_quantity(NODES[n].memory) for n in NODES if n != "lab-hog"]
    assert hog > 0.7 and all(o < 0.2 for o in others), (hog, others)
    # Background CPU is a counter growing at the declared rate; metrics-server reports the rate.
    cpu = _poll(lambda: (c := lab.node_metrics()["lab-hog"]["cpu"]) > 0 and c)
    assert 0.35 <= cpu <= 0.65, cpu


def test_pod_goes_running_and_its_usage_is_measured(lab, namespace):
    core = lab.core()
    core.create_namespaced_pod(
        namespace, _pod("busy", node="lab-large", usage_cpu="1500m", usage_memory="2Gi")
    )

    def running():
        p = core.read_namespaced_pod("busy", namespace)
        assert p.status.phase == "Running", p.status.phase
        return p

    pod = _poll(running, timeout=60, interval=1)
    assert pod.status.pod_ip, "kwok gives running pods an IP"

    def pod_metrics():
        doc = lab.api_get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/busy")
        usage = doc["containers"][0]["usage"]
        return parse_quantity(usage["cpu"]), parse_quantity(usage["memory"])

    def measured():
        try:
            cpu, mem = pod_metrics()
        except Exception as e:  # 404 until metrics-server has scraped twice
            raise AssertionError(str(e)) from e
        assert mem == 2 * GI and 1.2 <= cpu <= 1.8, (cpu, mem)
        return True

    _poll(measured, timeout=120)
    # The node's usage is its pods' plus its background.
    bg = parse_quantity(NODES["lab-large"].background_memory)
    _poll(lambda: lab.node_metrics()["lab-large"]["memory"] >= 2 * GI + bg, timeout=60)


def _node_cpu_seconds(lab, node):
    """kwok's node_cpu_usage_seconds_total for `node`, read as metrics-server reads it."""
    import ssl
    import urllib.request

    from lab import PORTS

    ctx = ssl.create_default_context(cafile=str(lab.pki / "ca.crt"))
    url = f"https://127.0.0.1:{PORTS['kwok']}/metrics/nodes/{node}/metrics/resource"
    with urllib.request.urlopen(url, context=ctx, timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("node_cpu_usage_seconds_total"):
                return float(line.split()[-1])
    raise AssertionError(f"no node_cpu_usage_seconds_total for {node}")


def test_a_node_cpu_counter_holds_a_pod_that_came_and_went_between_reads(lab, namespace):
    """kwok grows a node's CPU counter only when it is read, by the pods there at the read
    (lab/kwokclock.py): a pod that ran between two of metrics-server's scrapes would count
    nothing, where a real kubelet's counter holds its CPU time. The lab reads every node's
    counter each second, so a 2-core pod on the node for some 5-8 s shows as twice that in
    core-seconds, to within the reads' second at either end."""
    node = "lab-large"
    bg = parse_quantity(lab.core().read_node(node).metadata.annotations[BG_CPU])
    core = lab.core()

    def others() -> dict[str, float]:  # the lab is shared: other tests' pods count too
        pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        return {
            f"{p.metadata.namespace}/{p.metadata.name}": len(p.spec.containers)
            * parse_quantity((p.metadata.annotations or {}).get(USAGE_CPU, "1m"))
            for p in pods
            if not p.metadata.name.startswith("brief-")
        }

    seen = []
    for attempt in range(3):
        name = f"brief-{attempt}"
        around = others()
        before, t0 = _node_cpu_seconds(lab, node), time.monotonic()
        core.create_namespaced_pod(namespace, _pod(name, node=node, usage_cpu="2"))
        _poll(
            lambda name=name: core.read_namespaced_pod(name, namespace).status.phase == "Running",
            timeout=60,
            interval=0.2,
        )
        time.sleep(5)
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        there = time.monotonic() - t0  # the longest the pod can have been on the node
        time.sleep(3)
        steady = bg + sum(around.values())  # the node's use without this pod
        pod_seconds = _node_cpu_seconds(lab, node) - before - steady * (time.monotonic() - t0)
        seen.append((pod_seconds, there, sorted(around)))
        if others() == around:  # the same other pods throughout (as far as a list shows)
            # kwok counts the pod from when it lists it on the node until it sees it
            # deleted; the reads move either end by up to a second
            assert 8.0 <= pod_seconds <= 2 * (there + 2.0), seen
            return
    raise AssertionError(f"the pods on {node} kept changing: {seen}")


def test_load_watcher_serves_every_node(lab):
    def complete():
        nmm = lab.watcher()["data"]["NodeMetricsMap"]
        for name in NODES:
            assert name in nmm, f"{name} missing from load-watcher: {sorted(nmm)}"
            kinds = {(m["type"], m["operator"]) for m in nmm[name]["metrics"]}
            assert {("CPU", "Latest"), ("Memory", "Latest")} <= kinds, (name, kinds)
        return nmm

    nmm = _poll(complete, timeout=90)
    mem = {
        n: next(m["value"] for m in v["metrics"] if m["type"] == "Memory")
        for n, v in nmm.items()
        if n in NODES
    }
    assert max(mem, key=mem.get) == "lab-hog", mem
    assert mem["lab-hog"] > 70, mem


def test_real_kube_scheduler_binds_a_pod(lab, namespace):
    lab.start_scheduler()
    try:
        core = lab.core()
        core.create_namespaced_pod(namespace, _pod("scheduled"))

        def bound():
            p = core.read_namespaced_pod("scheduled", namespace)
            assert p.spec.node_name in NODES, p.spec.node_name
            assert p.status.phase == "Running", p.status.phase
            return p

        _poll(bound, timeout=60, interval=1)
    finally:
        lab.stop("kube-scheduler")


def test_descheduler_binary_runs():
    path = build_binaries(["descheduler"])["descheduler"]
    r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--policy-config-file" in r.stdout


def test_lab_listens_on_loopback_only(lab):
    """Every lab listener is on 127.0.0.1, except load-watcher's hard-coded :2020."""
    pids = {pid: name for name, pid in lab.running().items()}
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    seen = set()
    for line in out.splitlines():
        fields = line.split()
        local, procs = fields[3], " ".join(fields[5:])
        for pid, name in pids.items():
            if f"pid={pid}," not in procs:
                continue
            seen.add(name)
            addr, _, port = local.rpartition(":")
            if name == "load-watcher":
                assert port == "2020", local
            else:
                assert addr == "127.0.0.1", f"{name} listens on {local}"
    assert {"etcd", "kube-apiserver", "kwok", "metrics-server", "load-watcher"} <= seen, seen
