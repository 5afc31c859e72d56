"""The lab's real kubeadm cluster (lab/realnodes.py): containerd and kubelet in podman nodes.

What the stand-ins cannot show: the kubelet runs the control plane from the static pod
manifests kubeadm wrote, restarts a component when its manifest changes, and a pod bound by
the real scheduler really starts in containerd on the worker, with an address from the CNI.
Marked `lab` (the lab's xdist group, tests/conftest.py); runs alone too:
`flock /tmp/loadwise-lab.lock .venv/bin/python -m pytest tests/lab/test_real_nodes.py`.
"""

from __future__ import annotations

import ipaddress
import time

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from lab import realnodes

pytestmark = pytest.mark.lab

WORKER = realnodes.WORKERS[0]
SCHEDULER_POD = f"kube-scheduler-{realnodes.CONTROL_PLANE}"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"


@pytest.fixture(scope="module")
def cluster():
    try:
        res = realnodes.up()
    except BaseException:
        realnodes.down()  # the error names the step and carries its log's tail
        raise
    try:
        yield res
    finally:
        realnodes.down()


@pytest.fixture(scope="module")
def core(cluster):
    api = config.new_client_from_config(str(cluster.kubeconfig))
    yield client.CoreV1Api(api)
    api.close()


def wait_for(what, probe, timeout=120.0, interval=1.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def scheduler_cmdlines() -> list[str]:
    """kube-scheduler command lines running inside the control-plane node (in containerd)."""
    out = realnodes.sh(
        realnodes.CONTROL_PLANE,
        "for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null) || continue;"
        ' case "$c" in kube-scheduler\\ *) echo "$c";; esac; done',
    )
    return out.splitlines()


def test_both_nodes_registered_and_ready(cluster, core):
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert set(nodes) == {realnodes.CONTROL_PLANE, WORKER}
    for name, node in nodes.items():
        ready = {c.type: c.status for c in node.status.conditions}["Ready"]
        assert ready == "True", f"{name} not Ready"
        # a real kubelet and a real runtime report themselves, unlike kwok's stand-in
        assert node.status.node_info.kubelet_version == realnodes.K8S_VERSION
        assert node.status.node_info.container_runtime_version.startswith("containerd://2.3.")
    print(f"real-node cluster up in {cluster.seconds:.0f}s (budget 180s)")


def test_scheduler_is_the_kubelets_static_pod_and_follows_its_manifest(cluster, core):
    pod = core.read_namespaced_pod(SCHEDULER_POD, "kube-system")
    assert pod.status.phase == "Running"
    assert pod.spec.node_name == realnodes.CONTROL_PLANE
    # a mirror pod: the kubelet runs it from a file, the API only reflects it
    assert pod.metadata.annotations.get("kubernetes.io/config.source") == "file"
    assert "kubernetes.io/config.mirror" in pod.metadata.annotations
    before = scheduler_cmdlines()
    assert len(before) == 1 and "--v=" not in before[0], before

    # Edit the manifest as an operator (or loadwise's role) would: the kubelet must notice,
    # stop the old container and start one with the new command line.
    realnodes.sh(
        realnodes.CONTROL_PLANE,
        "sed -i 's|^    - --leader-elect=true$|&\\n    - --v=3|' "
        + MANIFEST
        + f" && grep -q -- '--v=3' {MANIFEST}",
    )
    after = wait_for(
        "the kubelet to restart kube-scheduler with --v=3",
        lambda: [c for c in scheduler_cmdlines() if "--v=3" in c],
        timeout=120,
    )
    assert len(after) == 1
    wait_for(
        "the mirror pod to show the new command and run",
        lambda: (
            (p := core.read_namespaced_pod(SCHEDULER_POD, "kube-system")).status.phase == "Running"
            and "--v=3" in p.spec.containers[0].command
        ),
        timeout=120,
        interval=2,
    )


def test_pod_with_a_local_image_runs_on_the_worker(cluster, core):
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="real-pod"),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="main",
                    # imported into containerd by lab/realnodes.py; there is no registry
                    image="registry.k8s.io/pause:3.10.2",
                    image_pull_policy="Never",
                )
            ],
            termination_grace_period_seconds=1,
        ),
    )

    def create():
        try:
            core.create_namespaced_pod("default", pod)
        except ApiException as e:
            # the service account controller creates "default" a moment after init
            if e.status == 403 and "serviceaccount" in str(e.body):
                return False
            raise
        return True

    wait_for("the default service account", create, timeout=60)
    running = wait_for(
        "real-pod Running",
        lambda: (
            (p := core.read_namespaced_pod("real-pod", "default")).status.phase == "Running" and p
        ),
        timeout=120,
    )
    # the control plane keeps kubeadm's NoSchedule taint, so the scheduler must pick the worker
    assert running.spec.node_name == WORKER
    ip = ipaddress.ip_address(running.status.pod_ip)
    assert ip in ipaddress.ip_network(realnodes.node_subnet(1)), ip
    # and containerd on the worker really runs it
    tasks = realnodes.sh(WORKER, "ctr -n k8s.io tasks ls")
    assert tasks.count("RUNNING") >= 2, tasks  # the pod's sandbox and its container
