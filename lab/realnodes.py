"""A real kubeadm cluster in podman containers: `python -m lab realnodes up|down|status`.

Two nodes, each a privileged systemd container (lab/nodes/kubeadm/build-image) on podman's
default bridge network, so each has a network namespace of its own and the only traffic is
between these containers and this machine. Each runs containerd 2.3 and kubelet 1.36.4 built
by lab/build; `kubeadm init` makes the first a control plane (etcd, kube-apiserver,
kube-controller-manager and kube-scheduler as static pods the kubelet runs from
/etc/kubernetes/manifests), `kubeadm join` adds the second as a worker. Pods get addresses
from a bridge + host-local CNI conflist written here, one /24 per node, with routes between
the nodes. No registry: the control-plane images are imported into containerd from the
archive the image build saved.

Stand-ins that remain: no kube-proxy (Services' cluster IPs are not routed) and no CoreDNS;
both addons are skipped. See docs/lab.md.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lab.processes import LabError

HERE = Path(__file__).resolve().parent
BUILD_IMAGE = HERE / "nodes" / "kubeadm" / "build-image"
K8S_VERSION = "v1.36.4"
CONTROL_PLANE = "loadwise-real-cp"
WORKERS = ("loadwise-real-w1",)
POD_SUBNET = "10.244.0.0/16"
SERVICE_SUBNET = "10.96.0.0/12"
CRI_SOCKET = "unix:///run/containerd/containerd.sock"
IMAGE_ARCHIVE = "/opt/loadwise/images/control-plane.tar"
# On a failed init/join: the kubelet's and containerd's last errors, where the cause usually is.
KUBELET_TAIL = (
    "journalctl -u kubelet -u containerd --no-pager | grep -E ' E[0-9]{4} |level=error' | tail -8"
)
# Preflight checks that fail in these containers for reasons that do not apply, each named
# (kubeadm's check names, cmd/kubeadm/app/preflight/checks.go):
#  - SystemVerification: this machine has a cgroup v1 hierarchy, which kubeadm 1.36 reports
#    as an error; the kubelet is told to accept it (failCgroupV1: false below). The same
#    check also wants the kernel config (/proc/config.gz or /boot), which a container lacks.
#  - FileContent--proc-sys-net-bridge-bridge-nf-call-iptables: br_netfilter only matters to
#    kube-proxy's iptables rules for Services on a bridge, and kube-proxy is not installed.
IGNORED_PREFLIGHT = (
    "SystemVerification",
    "FileContent--proc-sys-net-bridge-bridge-nf-call-iptables",
)


def _run_dir() -> Path:
    return Path(os.environ.get("LOADWISE_REALNODES_RUN", "/tmp/loadwise-realnodes"))


def nodes() -> tuple[str, ...]:
    return (CONTROL_PLANE, *WORKERS)


def podman(*args: str, timeout: float = 120, check: bool = True) -> str:
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise LabError(f"podman {' '.join(args)} -> {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc.stdout


def sh(node: str, script: str, *, timeout: float = 120, check: bool = True) -> str:
    """Run a bash script inside a node; a failure names the node, the script and its output."""
    proc = subprocess.run(["podman", "exec", node, "bash", "-c", script],
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip
    if check and proc.returncode != 0:
        raise LabError(
            f"{node}: {script!r} -> {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
        )
    return proc.stdout


def build_image() -> str:
    """The node image's reference, building it (and missing binaries) first when needed."""
    proc = subprocess.run([str(BUILD_IMAGE)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise LabError(f"{BUILD_IMAGE} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def node_subnet(index: int) -> str:
    """Node `index`'s pod /24 inside POD_SUBNET (the control plane is 0)."""
    return f"10.244.{index}.0/24"


def cni_conflist(index: int) -> dict[str, Any]:
    """bridge + host-local for one node. No masquerading: pods only talk to each other and
    to the nodes, all inside podman's network. The pod's lo is not in the chain: containerd
    sets it up itself with the loopback plugin (go-cni's loopback network), and the plugin
    refuses an interface that has a non-loopback address (plugins/main/loopback)."""
    return {
        "cniVersion": "1.0.0",
        "name": "loadwise-lab",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node_subnet(index)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
        ],
    }


def kubeadm_config(cp_ip: str, token: str) -> str:
    """kubeadm's init configuration (v1beta4) with the kubelet's, as one YAML stream."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "InitConfiguration",
            "bootstrapTokens": [{"token": token, "ttl": "2h"}],
            "localAPIEndpoint": {"advertiseAddress": cp_ip, "bindPort": 6443},
            "nodeRegistration": {
                "name": CONTROL_PLANE,
                "criSocket": CRI_SOCKET,
                # every image is imported beforehand; kubeadm's preflight then checks that
                # each one it needs is present under the exact name it expects
                "imagePullPolicy": "Never",
                "ignorePreflightErrors": list(IGNORED_PREFLIGHT),
            },
        },
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "ClusterConfiguration",
            "kubernetesVersion": K8S_VERSION,
            "clusterName": "loadwise-lab",
            "controlPlaneEndpoint": f"{cp_ip}:6443",
            "networking": {"podSubnet": POD_SUBNET, "serviceSubnet": SERVICE_SUBNET},
            # no kube-proxy or CoreDNS image can be assembled here yet (docs/lab.md); disabled
            # addons also leave their images out of kubeadm's preflight image check
            # (cmd/kubeadm/app/images/images.go, GetControlPlaneImages)
            "proxy": {"disabled": True},
            "dns": {"disabled": True},
        },
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # containerd is configured with SystemdCgroup = false; both must agree
            "cgroupDriver": "cgroupfs",
            # kubelet 1.36 refuses cgroup v1 unless told otherwise
            # (pkg/kubelet/apis/config/v1beta1/defaults.go: FailCgroupV1 defaults to true)
            "failCgroupV1": False,
            # the nodes share one small disk with the machine: evict only when it is nearly full
            "evictionHard": {"nodefs.available": "2%", "imagefs.available": "2%"},
        },
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


@dataclass
class UpResult:
    kubeconfig: Path
    seconds: float
    image: str


def _wait(what: str, probe: Any, timeout: float, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (LabError, subprocess.TimeoutExpired) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise LabError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def _start_node(name: str, image: str) -> str:
    """Start one node container; its address on podman's network."""
    podman("rm", "--force", "--ignore", "--volumes", "--time", "10", name)
    podman(
        "run", "-d", "--name", name, "--hostname", name, "--network", "podman",
        "--privileged", "--systemd=always",
        # its own cgroup namespace: the kubelet then sees this container's cgroups as the root
        # and makes its kubepods hierarchy inside them, not at the machine's root next to the
        # other node's
        "--cgroupns=private",
        "--sysctl", "net.ipv4.ip_forward=1",
        # containerd's overlayfs snapshots cannot live on the container's own overlay root,
        # and the kubelet's stats (cadvisor) want a real filesystem under /var/lib/kubelet
        "--volume", "/var/lib/containerd", "--volume", "/var/lib/kubelet",
        image, "/sbin/init",
    )  # fmt: skip
    info = json.loads(podman("inspect", name))
    return str(info[0]["NetworkSettings"]["Networks"]["podman"]["IPAddress"])


def _prepare_node(name: str, index: int, routes: dict[str, str]) -> None:
    """Wait for containerd, import the images, write the CNI conflist and the pod routes."""
    _wait(f"containerd on {name}",
          lambda: sh(name, "ctr version >/dev/null 2>&1 && echo ok", check=False), 60)  # fmt: skip
    sh(name, f"ctr -n k8s.io images import {IMAGE_ARCHIVE} >/dev/null",
       timeout=300)  # fmt: skip
    conf = json.dumps(cni_conflist(index), indent=2)
    script = f"cat > /etc/cni/net.d/10-loadwise-lab.conflist <<'EOF'\n{conf}\nEOF\n"
    for subnet, via in routes.items():
        script += f"ip route replace {subnet} via {via}\n"
    sh(name, script)


def import_image(node: str, archive: Path, *, platform: str | None = None) -> str:
    """Import a docker or OCI image archive from this machine into a node's containerd (the
    k8s.io namespace the kubelet uses), as the control-plane images are; what `ctr` printed.
    platform: import (and unpack) that platform's content instead of the node's own."""
    target = f"/tmp/{archive.name}"
    podman("cp", str(archive), f"{node}:{target}")
    flag = f" --platform {platform}" if platform else ""
    return sh(node, f"ctr -n k8s.io images import{flag} {target} 2>&1; rc=$?; rm -f {target}; "
              "exit $rc", timeout=300)  # fmt: skip


def up(*, out: Any = None) -> UpResult:
    """Bring the cluster up from scratch; raises LabError naming the step that failed."""
    if shutil.which("podman") is None:
        raise LabError("podman is not installed (see docs/lab.md)")
    image = build_image()
    run = _run_dir()
    run.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    down()
    ips = {name: _start_node(name, image) for name in nodes()}
    for index, name in enumerate(nodes()):
        routes = {node_subnet(i): ips[other] for i, other in enumerate(nodes()) if other != name}
        _prepare_node(name, index, routes)
    token = f"{secrets.token_hex(3)}.{secrets.token_hex(8)}"
    sh(CONTROL_PLANE, "cat > /etc/kubernetes/loadwise-kubeadm.yaml <<'EOF'\n"
       f"{kubeadm_config(ips[CONTROL_PLANE], token)}EOF\n")  # fmt: skip
    sh(
        CONTROL_PLANE,
        "kubeadm init --config /etc/kubernetes/loadwise-kubeadm.yaml "
        "> /var/log/kubeadm-init.log 2>&1 "
        "|| { tail -15 /var/log/kubeadm-init.log; " + KUBELET_TAIL + "; exit 1; }",
        timeout=600,
    )
    ca_hash = sh(
        CONTROL_PLANE,
        "openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | "
        "openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1",
    ).strip()
    ignore = ",".join(IGNORED_PREFLIGHT)
    for name in WORKERS:
        sh(
            name,
            f"kubeadm join {ips[CONTROL_PLANE]}:6443 --token {token} "
            f"--discovery-token-ca-cert-hash sha256:{ca_hash} --node-name {name} "
            f"--cri-socket {CRI_SOCKET} --ignore-preflight-errors={ignore} "
            "> /var/log/kubeadm-join.log 2>&1 "
            "|| { tail -15 /var/log/kubeadm-join.log; " + KUBELET_TAIL + "; exit 1; }",
            timeout=600,
        )
    kubeconfig = run / "admin.conf"
    kubeconfig.write_text(sh(CONTROL_PLANE, "cat /etc/kubernetes/admin.conf"))
    kubeconfig.chmod(0o600)
    _wait("every node Ready and the kube-scheduler static pod Running",
          lambda: ready(kubeconfig), 240, 2)  # fmt: skip
    seconds = time.monotonic() - t0
    (run / "up.json").write_text(json.dumps({"image": image, "seconds": round(seconds, 1)}))
    return UpResult(kubeconfig, seconds, image)


def _get(kubeconfig: Path, namespace: str | None = None) -> dict[str, Any]:
    """Nodes (no namespace) or a namespace's pods as JSON, with the admin kubeconfig (the
    official client; there is no kubectl here)."""
    from kubernetes import client, config

    api = config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core = client.CoreV1Api(api)
        # _preload_content=False: the raw urllib3 response, read as plain JSON
        raw: Any = (
            core.list_node(_preload_content=False, _request_timeout=10)
            if namespace is None
            else core.list_namespaced_pod(namespace, _preload_content=False, _request_timeout=10)
        )
        data = json.loads(raw.data)
    finally:
        api.close()
    if not isinstance(data, dict):
        raise LabError("the API answered something other than a JSON object")
    return data


def node_ready(kubeconfig: Path) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for node in _get(kubeconfig)["items"]:
        conds = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
        out[node["metadata"]["name"]] = conds.get("Ready") == "True"
    return out


def scheduler_phase(kubeconfig: Path) -> str | None:
    pods = _get(kubeconfig, "kube-system")["items"]
    for pod in pods:
        if pod["metadata"]["name"] == f"kube-scheduler-{CONTROL_PLANE}":
            return str(pod["status"].get("phase"))
    return None


def ready(kubeconfig: Path) -> bool:
    try:
        nodes_ready = node_ready(kubeconfig)
        phase = scheduler_phase(kubeconfig)
    except Exception:  # the API server is still coming up: connection refused, 5xx
        return False
    return set(nodes_ready) == set(nodes()) and all(nodes_ready.values()) and phase == "Running"


def down() -> None:
    """Remove the node containers and their containerd volumes; fine if there are none."""
    if shutil.which("podman") is None:
        return
    for name in nodes():  # one at a time: podman 4 removes none when one name is missing
        podman("rm", "--force", "--ignore", "--volumes", "--time", "10", name, timeout=180)
    (_run_dir() / "admin.conf").unlink(missing_ok=True)


def status() -> dict[str, Any]:
    """What runs: each container's state, and from the API the nodes and the scheduler pod."""
    st: dict[str, Any] = {"containers": {}, "kubeconfig": None}
    for name in nodes():
        state = podman("inspect", "--format", "{{.State.Status}}", name, check=False).strip()
        st["containers"][name] = state or "absent"
    kubeconfig = _run_dir() / "admin.conf"
    if kubeconfig.exists():
        st["kubeconfig"] = str(kubeconfig)
        try:
            st["nodes_ready"] = node_ready(kubeconfig)
            st["kube_scheduler"] = scheduler_phase(kubeconfig)
        except Exception as e:  # reported, not raised: status must work on a broken cluster
            st["api_error"] = str(e)[:300]
    return st
