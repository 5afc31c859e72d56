"""The lab's real kubeadm cluster (lab/realnodes.py): containerd and kubelet in podman nodes.

What the stand-ins cannot show: the kubelet runs the control plane from the static pod
manifests kubeadm wrote, restarts a component when its manifest changes, and a pod bound by
the real scheduler really starts in containerd on the worker, with an address from the CNI;
and roles/loadwise_rollout, run through ansible-playbook, reads what the kubelet reports for
an image it cannot pull, an image for another architecture, and one it can run.
Marked `lab`, but in the xdist group "realnodes" (see pytestmark); runs alone too:
`flock /tmp/loadwise-lab.lock .venv/bin/python -m pytest tests/lab/test_real_nodes.py`.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from lab import peek, realnodes
from lab.processes import wait_for

# Its nodes are podman containers with networks of their own: no lab port or process is
# touched, so these run in a group of their own beside the lab's (tests/conftest.py); one
# real-node cluster at a time, as its container names are fixed.
pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("realnodes")]

WORKER = realnodes.WORKERS[0]
SCHEDULER_POD = f"kube-scheduler-{realnodes.CONTROL_PLANE}"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"


@pytest.fixture(scope="module")
def core(real_cluster):
    api = config.new_client_from_config(str(real_cluster.kubeconfig))
    yield client.CoreV1Api(api)
    api.close()


def scheduler_cmdlines() -> list[str]:
    """kube-scheduler command lines running inside the control-plane node (in containerd)."""
    return peek.schedulers(peek.Container(realnodes.CONTROL_PLANE).cmdlines())


def test_both_nodes_registered_and_ready(real_cluster, core):
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert set(nodes) == set(realnodes.nodes())
    for name, node in nodes.items():
        ready = {c.type: c.status for c in node.status.conditions}["Ready"]
        assert ready == "True", f"{name} not Ready"
        # a real kubelet and a real runtime report themselves, unlike kwok's stand-in
        assert node.status.node_info.kubelet_version == realnodes.K8S_VERSION
        assert node.status.node_info.container_runtime_version.startswith("containerd://2.3.")
    print(f"real-node cluster up in {real_cluster.seconds:.0f}s (budget 180s)")


def test_scheduler_is_the_kubelets_static_pod_and_follows_its_manifest(real_cluster, core):
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


def test_pod_with_a_local_image_runs_on_the_worker(real_cluster, core):
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
    # the control plane keeps kubeadm's NoSchedule taint, so the scheduler must pick a worker
    node = running.spec.node_name
    assert node in realnodes.WORKERS, node
    ip = ipaddress.ip_address(running.status.pod_ip)
    assert ip in ipaddress.ip_network(realnodes.node_subnet(realnodes.nodes().index(node))), ip
    # and containerd on that worker really runs it
    tasks = realnodes.sh(node, "ctr -n k8s.io tasks ls")
    assert tasks.count("RUNNING") >= 2, tasks  # the pod's sandbox and its container


# --- loadwise_rollout (roles/loadwise_rollout) against the real kubelet ----------------------
# The role judges a rollout from the Deployment's and its pods' status; its filter's unit tests
# (tests/ansible/test_rollout_filter.py) use status documents shaped by hand. Here the real
# kubelet and containerd write them: the role runs through the real ansible-playbook on this
# machine (kubernetes.core with the cluster's admin kubeconfig), as site.yml runs it after
# applying an add-on's Deployment.

ROLLOUT_PLAY = """\
- name: Apply a Deployment and wait for its rollout as the add-on roles do
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Apply the Deployment
      kubernetes.core.k8s:
        state: present
        definition: "{{ rollout_deployment }}"
    - name: Wait for its rollout
      ansible.builtin.include_role:
        name: loadwise_rollout
      vars:
        loadwise_rollout_namespace: default
        loadwise_rollout_name: "{{ rollout_deployment.metadata.name }}"
"""
# Nothing listens on the node's loopback port 9 (discard): containerd's pull is refused there,
# without a DNS lookup or any traffic leaving the node (a name like registry.invalid would ask
# the machine's resolver).
UNPULLABLE = "127.0.0.1:9/loadwise/nothing:1"
ARM64_IMAGE = "localhost/loadwise/arm64-pause:1"
PAUSE_SRC = realnodes.HERE / "go-tools" / "pause"


def deployment(name: str, image: str, pull_policy: str) -> dict:
    labels = {"app.kubernetes.io/name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": "main", "image": image, "imagePullPolicy": pull_policy}
                    ],
                    "terminationGracePeriodSeconds": 1,
                    # the worker the test imported its image into
                    "nodeSelector": {"kubernetes.io/hostname": WORKER},
                },
            },
        },
    }


@pytest.fixture
def rollout(real_cluster, tmp_path):
    """Run the role on one Deployment: (ansible-playbook's result, seconds it took). The
    Deployments are deleted afterwards (their pods with them)."""
    from tests.ansible.playbook import ansible_playbook

    play = tmp_path / "rollout.yml"
    play.write_text(ROLLOUT_PLAY)
    api = config.new_client_from_config(str(real_cluster.kubeconfig))
    apps = client.AppsV1Api(api)
    names: list[str] = []

    def run(name, image, pull_policy, timeout):
        names.append(name)
        extra = tmp_path / f"{name}.json"
        extra.write_text(
            json.dumps(
                {
                    "rollout_deployment": deployment(name, image, pull_policy),
                    "loadwise_rollout_timeout": timeout,
                    "loadwise_rollout_delay": 2,
                }
            )
        )
        env = {**os.environ, "K8S_AUTH_KUBECONFIG": str(real_cluster.kubeconfig)}
        t0 = time.monotonic()
        proc = ansible_playbook(play, "-e", f"@{extra}", env=env, timeout=timeout + 120)
        seconds = time.monotonic() - t0
        print(f"\n{name}: ansible-playbook rc={proc.returncode} in {seconds:.1f}s")
        return proc, seconds

    yield run
    for name in names:
        try:
            apps.delete_namespaced_deployment(
                name, "default", propagation_policy="Foreground", grace_period_seconds=0
            )
        except ApiException as e:
            if e.status != 404:
                raise
    api.close()


def failure_message(proc) -> str:
    """The msg of the play's failed task (yaml result format: `msg: ...` lines under it)."""
    out = proc.stdout
    assert proc.returncode != 0, out[-3000:]
    at = out.find("FAILED! =>")
    assert at >= 0, out[-3000:]
    return " ".join(out[at:].split("PLAY RECAP")[0].split())


def container_status(core, name):
    """The kubelet's report for the Deployment's one container, as the API has it now."""
    pods = core.list_namespaced_pod(
        "default", label_selector=f"app.kubernetes.io/name={name}"
    ).items
    assert pods, f"no pod of {name}"
    statuses = pods[0].status.container_statuses or []
    assert statuses, pods[0].status
    return statuses[0]


def test_rollout_fails_naming_the_image_the_kubelet_cannot_pull(real_cluster, core, rollout):
    proc, seconds = rollout("rollout-unpullable", UNPULLABLE, "IfNotPresent", timeout=90)
    message = failure_message(proc)
    print(message)
    cs = container_status(core, "rollout-unpullable")
    print(f"kubelet: {cs.state.waiting.reason}: {cs.state.waiting.message}")
    assert cs.state.waiting.reason in {"ErrImagePull", "ImagePullBackOff"}
    assert "cannot pull image" in message and UNPULLABLE in message
    assert "ErrImagePull" in message or "ImagePullBackOff" in message
    # the failure read from the pod, not the timeout
    assert "still not rolled out" not in message and seconds < 90 + 60


def build_arm64_image(tmp_path) -> Path:
    """A FROM-scratch image holding the lab's pause program built for arm64 (config
    architecture arm64), saved as a docker archive; built with podman like the control-plane
    images (lab/nodes/kubeadm/build-image), and removed from podman's store again."""
    ctx = tmp_path / "arm64"
    ctx.mkdir()
    env = {**os.environ, "CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": "arm64",
           "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}  # fmt: skip
    go = shutil.which("go") or "/usr/local/go/bin/go"
    subprocess.run([go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(ctx / "pause"), "."],
                   cwd=PAUSE_SRC, env=env, check=True, timeout=600)  # fmt: skip
    assert (ctx / "pause").read_bytes()[18:20] == b"\xb7\x00", "not an aarch64 ELF (e_machine)"
    (ctx / "Containerfile").write_text('FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n')
    archive = tmp_path / "arm64-pause.tar"
    try:
        realnodes.podman("build", "-q", "--platform", "linux/arm64", "-t", ARM64_IMAGE, str(ctx))
        arch = realnodes.podman("image", "inspect", "--format", "{{.Architecture}}", ARM64_IMAGE)
        assert arch.strip() == "arm64", arch
        realnodes.podman("save", "-q", "--format", "docker-archive", "-o", str(archive),
                         ARM64_IMAGE)  # fmt: skip
    finally:
        realnodes.podman("rmi", "--ignore", ARM64_IMAGE, check=False)
    return archive


def test_rollout_fails_naming_the_wrong_architecture(real_cluster, core, rollout, tmp_path):
    # an arm64 binary would run here if qemu-user were registered for it (binfmt_misc)
    assert not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists(), (
        "qemu-aarch64 is registered: an arm64 binary would run on this amd64 machine"
    )
    archive = build_arm64_image(tmp_path)
    print(realnodes.import_image(WORKER, archive, platform="linux/arm64"))
    print(realnodes.sh(WORKER, f"ctr -n k8s.io images ls name=={ARM64_IMAGE}"))
    proc, seconds = rollout("rollout-arm64", ARM64_IMAGE, "IfNotPresent", timeout=120)
    message = failure_message(proc)
    print(message)
    cs = container_status(core, "rollout-arm64")
    print(f"kubelet: restarts {cs.restart_count}, state {cs.state}, last state {cs.last_state}")
    pod = core.list_namespaced_pod(
        "default", label_selector="app.kubernetes.io/name=rollout-arm64"
    ).items[0]
    for previous in (False, True):
        try:
            log = core.read_namespaced_pod_log(pod.metadata.name, "default", previous=previous)
        except ApiException as e:
            log = f"({e.status}: {e.body})"
        print(f"log previous={previous}: {log!r}")
    # What kubelet 1.36 with containerd 2.3 and Debian's runc 1.1.5 do: the image is present
    # (no platform check for an image that is a single manifest), the container is Started,
    # runc's exec of the arm64 binary fails after that, so it is Running and Ready for about a
    # second (the Deployment counts it available), then `terminated` (Error, exit code 1), and
    # runc's "exec /pause: exec format error" is the container's log. Which of the role's two
    # verdicts it gives depends on whether the kubelet restarted the container before the role
    # looked (kubelet's back-off starts at 10 s): "crashed" at once, "keeps crashing" after.
    assert re.search(
        r"(crashed \(|keeps crashing \(CrashLoopBackOff, )exit code 1, Error", message
    ), message
    assert "wrong architecture" in message and "exec format error" in message
    arch = core.read_node(WORKER).status.node_info.architecture
    assert arch != "arm64" and f"no binary for node {WORKER} ({arch})" in message
    assert "still not rolled out" not in message and seconds < 120 + 60


def test_rollout_of_a_runnable_local_image_is_reported_ready(real_cluster, core, rollout):
    """The control: the same role, a Deployment the kubelet can run."""
    proc, seconds = rollout("rollout-pause", "registry.k8s.io/pause:3.10.2", "Never", timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Deployment default/rollout-pause: 1 of 1 replicas available" in proc.stdout
    # ready is only said after a second look found the same container still up
    assert proc.stdout.count("TASK [loadwise_rollout : Rollout | Judge the rollout]") >= 2
    cs = container_status(core, "rollout-pause")
    assert cs.ready and cs.state.running, cs
